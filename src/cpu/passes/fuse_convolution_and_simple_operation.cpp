// FuseConvolutionAndSimpleOperation: a Convolution absorbs the chain of simple layers
// after it (ReLU, ELU, Sigmoid, Clamp, ScaleShift = per-channel Mul/Add by constants,
// PReLU, and every other eltwise oneDNN has: LeakyRelu, Tanh, HardSwish, HardSigmoid,
// Gelu, Mish, Abs, Sqrt, Exp, ...) as oneDNN post-ops, any number and order.
#include "cpu/graph_optimizer.hpp"
#include "cpu/passes/fuse_util.hpp"

namespace kiln::cpu {

size_t fuse_convolution_and_simple_operation(Graph& g, transforms::PassLog* log) {
  std::vector<Node*> convs;
  for (auto& n : g.nodes())
    if (n->kind() == NodeKind::Convolution) convs.push_back(n.get());
  size_t fused = 0;
  for (Node* c : convs) fused += passes::fuse_simple_chain(g, c, "FuseConvolutionAndSimpleOperation", 1, log);
  return fused;
}

}  // namespace kiln::cpu
