#pragma once
// The fast executor. For each distinct set of input shapes it compiles a plan once:
// the ir::Graph is cloned, specialised to those shapes (constant subexpressions folded,
// every shape static) and lowered to a cpu::Graph. Plans are cached by input shapes,
// so repeating shapes cost nothing extra. A graph whose shapes depend on data (e.g.
// NonZero feeding a Reshape) runs on the reference executor instead.
#include <kiln/tensor.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "cpu/graph.hpp"
#include "runtime/reference_executor.hpp"
#include "transforms/pass_log.hpp"

namespace kiln::cpu {

class Executor {
 public:
  // `options.log` is ignored: every plan keeps its own log.
  explicit Executor(std::shared_ptr<const ir::Graph> graph, GraphOptions options = {});
  // `profile`: see Graph::run (rows from the reference executor when the plan falls back).
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, std::vector<ProfilingInfo>* profile = nullptr);

  struct Plan {
    std::shared_ptr<ir::Graph> graph;   // specialised copy (owns what cpu::Graph points into)
    std::unique_ptr<Graph> cpu;         // null when the shapes are data-dependent
    std::string fallback_reason;
    transforms::PassLog log;            // what the optimizer passes did for this plan
  };
  // The plan for these input shapes (compiled on first use).
  const Plan& plan_for(const std::vector<Shape>& shapes);
  size_t cached_plans() const { return plans_.size(); }

 private:
  std::shared_ptr<const ir::Graph> graph_;
  GraphOptions options_;
  runtime::ReferenceExecutor reference_;
  std::map<std::vector<Shape>, std::unique_ptr<Plan>> plans_;
  std::mutex mutex_;
};

}  // namespace kiln::cpu
