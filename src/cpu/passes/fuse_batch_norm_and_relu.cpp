// FuseBatchNormAndRelu: a BatchNormalization left after the model-level folding (one that
// no Conv / Gemm precedes, as in DenseNet's pre-activation BN -> ReLU -> Conv) absorbs the
// ReLU after it: one pass over the tensor instead of two. The BatchNorm node takes only a
// ReLU (accepts_post_ops says why not otherwise): oneDNN 2.6's batch normalization fuses no
// other activation, and the node picks that primitive or a binary by the layout it meets.
#include "cpu/graph_optimizer.hpp"
#include "cpu/passes/fuse_util.hpp"

namespace kiln::cpu {

size_t fuse_batch_norm_and_relu(Graph& g, transforms::PassLog* log) {
  std::vector<Node*> norms;
  for (auto& n : g.nodes())
    if (n->kind() == NodeKind::BatchNorm) norms.push_back(n.get());
  size_t fused = 0;
  for (Node* b : norms) fused += passes::fuse_simple_chain(g, b, "FuseBatchNormAndRelu", 1, log);
  return fused;
}

}  // namespace kiln::cpu
