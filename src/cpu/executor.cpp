#include "cpu/executor.hpp"

#include <unordered_map>

#include "cpu/graph_optimizer.hpp"
#include "transforms/specialize_shapes.hpp"

namespace kiln::cpu {

Executor::Executor(std::shared_ptr<const ir::Graph> graph, GraphOptions options)
    : graph_(graph), options_(std::move(options)), reference_(graph) {
  options_.log = nullptr;
}

const Executor::Plan& Executor::plan_for(const std::vector<Shape>& shapes) {
  auto it = plans_.find(shapes);
  if (it != plans_.end()) return *it->second;
  auto plan = std::make_unique<Plan>();
  plan->graph = graph_->clone();
  auto r = transforms::specialize_shapes(*plan->graph, shapes);
  if (r.all_static) {
    // model-level passes on the specialised graph (weights are constants by now)
    run_ir_passes(*plan->graph, options_.disabled_passes, &plan->log);
    GraphOptions o = options_;
    o.log = &plan->log;
    plan->cpu = std::make_unique<Graph>(plan->graph, o);
  } else {
    plan->fallback_reason = "the shape of '" + r.first_dynamic + "' depends on data";
  }
  return *(plans_[shapes] = std::move(plan));
}

std::vector<Tensor> Executor::run(const std::vector<Tensor>& inputs, std::vector<ProfilingInfo>* profile) {
  const auto& gin = graph_->inputs();
  KILN_CHECK(inputs.size() == gin.size(),
             "graph '" + graph_->name + "' expects " + std::to_string(gin.size()) + " inputs, got " +
                 std::to_string(inputs.size()));
  std::unordered_map<std::string, int64_t> symbols;
  std::vector<Shape> shapes;
  for (size_t i = 0; i < gin.size(); ++i) {
    runtime::check_input(*gin[i], inputs[i], symbols);
    shapes.push_back(inputs[i].shape());
  }
  std::lock_guard<std::mutex> lock(mutex_);  // a plan's arena serves one request at a time
  const Plan& p = plan_for(shapes);
  if (!p.cpu) return reference_.run(inputs, nullptr, profile);
  return p.cpu->run(inputs, profile);
}

}  // namespace kiln::cpu
