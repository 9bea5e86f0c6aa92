#pragma once
// The reference executor: runs an ir::Graph node by node with the registry's reference
// kernels on concrete tensors. Symbolic dims are bound from the actual input shapes at
// every run, so dynamic batch / sequence lengths work. Tensors are freed after their
// last use. This is the correctness baseline the fast paths are tested against.
#include <kiln/profiling.hpp>
#include <kiln/tensor.hpp>

#include <memory>
#include <unordered_map>
#include <vector>

#include "ir/graph.hpp"
#include "ir/op_registry.hpp"

namespace kiln::runtime {

class ReferenceExecutor {
 public:
  // Validates every node (throws kiln::Error on an unsupported op / bad attributes).
  explicit ReferenceExecutor(std::shared_ptr<const ir::Graph> graph);

  // inputs: one tensor per graph input, in graph input order. Checks dtype, rank and
  // dims (static dims must match; a symbolic dim must take one value across inputs).
  // `outer` gives values of an enclosing graph (for control-flow bodies); may be null.
  // `profile`, when given, gets one row per node (exec type "ref_any_<dtype>").
  std::vector<Tensor> run(const std::vector<Tensor>& inputs,
                          const std::unordered_map<const ir::Value*, Tensor>* outer = nullptr,
                          std::vector<ProfilingInfo>* profile = nullptr) const;

  const ir::Graph& graph() const { return *graph_; }
  // The largest tensor a kernel may allocate while this executor runs (kiln_max_tensor_bytes;
  // 0: whatever the caller's scope allows, see ir::TensorLimit).
  void set_max_tensor_bytes(uint64_t bytes) { max_tensor_bytes_ = bytes; }
  // The inputs' declared dims are hints, not checked (their kind, element type and rank are):
  // a Loop body's, whose carried values may change shape from one iteration to the next (a
  // tensor grown by a Concat each time, declared with the exporter's first shape).
  void set_input_dims_are_hints(bool hints) { input_dims_are_hints_ = hints; }

 private:
  struct Step {
    const ir::Node* node;
    const ir::OpSchema* schema;
    std::vector<const ir::Value*> release_after;  // values whose last use is this step
  };
  std::shared_ptr<const ir::Graph> graph_;
  std::vector<Step> steps_;
  uint64_t max_tensor_bytes_ = 0;
  bool input_dims_are_hints_ = false;
};

// Checks one user tensor against a graph input's declared type; binds symbolic dims.
// `check_dims` false: kind, element type and rank only.
void check_input(const ir::Value& input, const Tensor& t, std::unordered_map<std::string, int64_t>& symbols,
                 bool check_dims = true);

}  // namespace kiln::runtime
