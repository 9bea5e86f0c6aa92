// FuseDepthwiseBlock: a depthwise Convolution (group == input channels == output channels, with
// its simple layers), with the 1x1 Convolution that alone reads into it before and the one
// that alone reads it after (each with its simple layers; the last with the residual sum of
// FuseConvolutionAndSum), becomes one DepthwiseBlock node: kiln's GEMM and depthwise kernels,
// the expanded tensor never in memory (cpu/nodes/depthwise_block.cpp). Either 1x1 may be
// missing (MobileNet-v2's first block has no expansion). The one before may instead be a window
// over few channels that kiln computes as im2col and GEMM (MobileNet-v2's stem, 3x3 stride 2
// over the image's 3 channels): its 32-channel output at half the image's size, the largest
// tensor of the network, then never goes to memory either.
// Only where the model's input shapes vary (Node::shape_agnostic): the node then creates nothing
// per shape where oneDNN makes a brgemm primitive for each of the three convolutions; f32 only
// (bf16 keeps oneDNN's kernels); AVX2 or better (depthwise_block_refuses says why not).
#include "core/strings.hpp"
#include "cpu/graph_optimizer.hpp"
#include "cpu/im2col_f32.hpp"
#include "cpu/nodes/node_factory.hpp"
#include "cpu/passes/fuse_util.hpp"

namespace kiln::cpu {

namespace {

constexpr const char* kFuseDepthwiseBlock = "FuseDepthwiseBlock";

bool constant_params(const Node& n) {
  return n.inputs[1]->kind == Edge::Kind::constant &&
         (n.inputs.size() < 3 || !n.inputs[2] || n.inputs[2]->kind == Edge::Kind::constant);
}

// A 4-D f32 Convolution kiln's kernels may take a part of: constant weights and bias, no
// depthwise post-op, not bf16, every dim above 0.
bool usable(const Node& n) {
  if (n.kind() != NodeKind::Convolution || n.bf16 || n.outputs.size() != 1 || n.inputs.size() < 2) return false;
  if (n.inputs[0]->shape.size() != 4 || n.inputs[0]->dtype != DType::f32 || !constant_params(n)) return false;
  if (const_cast<Node&>(n).post_ops()->dw()) return false;
  for (const Edge* e : {n.inputs[0], n.outputs[0]})
    for (int64_t d : e->shape)
      if (d <= 0) return false;
  return true;
}

bool pointwise(const Node& n) { return usable(n) && passes::not_pointwise(n).empty(); }

// A window convolution the block computes as im2col and GEMM: group 1, at most
// im2col_f32::kMaxColumns columns (input channels x window).
bool windowed(const Node& n) {
  if (!usable(n) || n.source->attr_i("group", 1) != 1) return false;
  const Shape& w = n.inputs[1]->shape;
  return w.size() == 4 && w[1] * w[2] * w[3] <= im2col_f32::kMaxColumns;
}

// One filter per channel, input channels == output channels == group, and no sum post-op.
bool depthwise(const Node& n) {
  if (!usable(n) || n.inputs.size() > 3) return false;
  const Shape& w = n.inputs[1]->shape;
  const int64_t c = n.inputs[0]->shape[1];
  return w.size() == 4 && w[1] == 1 && w[0] == c && n.source->attr_i("group", 1) == c;
}

Node* producer(Graph& g, const Edge* e) {
  for (auto& n : g.nodes())
    for (const Edge* o : n->outputs)
      if (o == e) return n.get();
  return nullptr;
}

}  // namespace

std::optional<DepthwiseBlockMatch> match_depthwise_block(Graph& g, Node& dw) {
  if (!dw.shape_agnostic || !depthwise(dw)) return std::nullopt;
  DepthwiseBlockMatch m;
  // the 1x1 (or small window) convolution before, when it alone reads into dw (and does not
  // end the graph)
  m.expand = producer(g, dw.inputs[0]);
  if (m.expand && ((!pointwise(*m.expand) && !windowed(*m.expand)) || m.expand->post_ops()->sum_input() >= 0 ||
                   g.readers_of(dw.inputs[0]).size() != 1 || g.is_graph_output(dw.inputs[0])))
    m.expand = nullptr;
  // the 1x1 convolution after, when it alone reads dw's output
  m.project = passes::sole_reader(g, dw, [](const Node& r) { return pointwise(r); });
  if (m.project && (m.project->inputs[0] != dw.outputs[0] || g.is_graph_output(dw.outputs[0]))) m.project = nullptr;
  m.refused = depthwise_block_refuses(m.expand, dw, m.project);
  return m;
}

size_t fuse_depthwise_block(Graph& g, transforms::PassLog* log) {
  size_t fused = 0;
  for (Node* dw : passes::nodes_of_kind(g, NodeKind::Convolution)) {
    const std::optional<DepthwiseBlockMatch> m = match_depthwise_block(g, *dw);
    if (!m) continue;
    Node *expand = m->expand, *project = m->project;
    Node* first = expand ? expand : dw;
    const std::string where = !log      ? std::string()
                              : project ? passes::arrow(*first, *project)
                              : expand  ? passes::arrow(*first, *dw)
                                        : dw->name;
    if (!m->refused.empty()) {
      if (log) log->skipped(kFuseDepthwiseBlock, where, cat("not one DepthwiseBlock: ", m->refused));
      continue;
    }
    const std::string expansion = !expand                ? ""
                                  : pointwise(*expand)   ? "1x1 expansion, "
                                                         : cat(expand->inputs[1]->shape[2], "x", expand->inputs[1]->shape[3],
                                                               " window expansion (im2col), ");
    std::unique_ptr<Node> block = make_depthwise_block_node(expand, *dw, project);
    block->name = first->name;
    block->fused = first->fused;
    block->shapes_vary = first->shapes_vary;
    block->shape_agnostic = first->shape_agnostic;
    block->fusion_decisions = first->fusion_decisions;
    block->snippets_isa = first->snippets_isa;
    Node* host = g.replace(first, std::move(block));
    if (expand) g.absorb(host, dw);
    if (project) g.absorb(host, project);
    if (log)
      log->applied(kFuseDepthwiseBlock, where,
                   cat(expansion, "depthwise ", dw->inputs[1]->shape[2], "x", dw->inputs[1]->shape[3],
                       project ? ", 1x1 projection" : "",
                       project && project->post_ops()->sum_input() >= 0 ? " and the residual sum" : "",
                       " on kiln's kernels"));
    ++fused;
  }
  return fused;
}

}  // namespace kiln::cpu
