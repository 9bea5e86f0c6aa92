// FuseFullyConnectedAndSimpleOperation: a FullyConnected (Gemm / MatMul with constant
// weights) absorbs the bias Add (one value per output column) and the activations after
// it as oneDNN matmul post-ops.
#include "cpu/graph_optimizer.hpp"
#include "cpu/passes/fuse_util.hpp"

namespace kiln::cpu {

size_t fuse_fully_connected_and_simple_operation(Graph& g, transforms::PassLog* log) {
  std::vector<Node*> fcs;
  for (auto& n : g.nodes())
    if (n->kind() == NodeKind::FullyConnected) fcs.push_back(n.get());
  size_t fused = 0;
  for (Node* fc : fcs) {
    const int channel_axis = static_cast<int>(fc->outputs[0]->shape.size()) - 1;  // output columns
    fused += passes::fuse_simple_chain(g, fc, "FuseFullyConnectedAndSimpleOperation", channel_axis, log);
  }
  return fused;
}

}  // namespace kiln::cpu
