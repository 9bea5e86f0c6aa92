// Compile stage 6 (cpu/compile_pipeline.hpp): with inference_precision=bf16, which nodes
// write bf16 for their readers.
#include <string>

#include "cpu/graph.hpp"

namespace kiln::cpu {

// bf16: a convolution computes on bf16 inputs anyway, so one whose output only other bf16
// convolutions read (as their source, not as a sum operand) writes bf16 and the f32 -> bf16
// Reorder in front of each reader disappears. Not with a sum or depthwise post-op (their
// operands would have to be bf16 too), not for graph outputs. A snippets Subgraph read only by
// bf16 convolutions is asked the same (its kernel stores bf16 where the CPU can).
void Graph::keep_bf16_between_convolutions() {
  auto conv = [](const Node* n) { return n->kind() == NodeKind::Convolution && n->bf16; };
  auto subgraph = [](const Node* n) { return n->kind() == NodeKind::Subgraph && n->bf16; };
  for (auto& n : nodes_) {
    if (!(conv(n.get()) || subgraph(n.get())) || n->outputs.size() != 1) continue;
    const PostOpList* ops = n->post_ops();
    if (ops && (ops->sum_input() >= 0 || ops->dw())) continue;
    Edge* out = n->outputs[0];
    if (is_graph_output(out) || out->dtype != DType::f32) continue;
    auto readers = consumers(out);
    bool ok = !readers.empty();
    for (Node* r : readers) {
      const PostOpList* rops = r->post_ops();
      ok = ok && conv(r) && r->inputs[0] == out && !(rops && rops->dw());
      for (size_t i = 1; ok && i < r->inputs.size(); ++i) ok = r->inputs[i] != out;
    }
    if (ok) n->bf16_output = true;
  }
}

}  // namespace kiln::cpu
