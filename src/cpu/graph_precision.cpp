// Compile stage 6 (cpu/compile_pipeline.hpp): with inference_precision=bf16, which nodes of a
// new shape's graph compute in f32 until the shape is hot, and which nodes write bf16 for
// their readers.
#include <string>

#include "core/strings.hpp"
#include "cpu/graph.hpp"
#include "cpu/graph_optimizer.hpp"
#include "transforms/pass_log.hpp"

namespace kiln::cpu {

// kiln_convolutions_until_hot = f32. A model whose input shapes vary makes a graph for every
// new shape. In bf16 mode oneDNN's convolutions are JIT kernels made for the shape (0.3-2 ms
// each, their code kept with the plan), where in f32 kiln's GEMM, Winograd and depthwise-block
// kernels take most of them for every shape. With this setting a new shape's convolutions
// compute in f32, as f32 mode builds them; the graph rebuilt once the shape is hot
// (Executor::kHotRuns) computes them in bf16. All of them, not only those kiln's kernels take:
// a mix converts every activation between the two (MobileNet-v2's stream ran 0.95x ORT's time
// with its 1x1 convolutions in f32 and its depthwise ones in bf16). It pays for narrow
// convolutions that bf16 computes no faster (the CRNN stream's first pass 1.46x -> 0.85x ORT's
// time, memory 1.65x -> 0.66x) but not for a ResNet-50, whose f32 convolutions cost as much to
// make per shape and run 1.6x slower (docs/settings.md, Precision); so by default (auto) the
// executor builds each new shape's graph with it or without it as it measures
// (until_hot_chooser.hpp).
void Graph::convolutions_in_f32_until_hot(transforms::PassLog* log) {
  for (auto& n : nodes_)
    if (n->bf16 && n->kind() == NodeKind::Convolution) {
      n->bf16 = false;
      ++f32_until_hot_;
    }
  if (log && f32_until_hot_)
    log->applied(kConvolutionsInF32UntilHot, ir_->name.empty() ? "graph" : ir_->name,
                 cat(f32_until_hot_, " convolutions compute in f32 for this new input shape, in bf16 once it is hot"));
}

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
