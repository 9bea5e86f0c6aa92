// FuseConvolutionAndDWConvolution: a 1x1 Convolution (with its simple layers) whose only
// reader is a 3x3 depthwise Convolution (group == input channels == output channels,
// stride 1 or 2, pads 1, undilated, constant weights; with its own simple layers) becomes
// one Convolution with oneDNN's depthwise post-op: the 1x1 output never goes to memory.
// oneDNN 2.6 has a fused JIT kernel for this only for some shapes and thread counts, and it
// is its older jit_1x1 kernel: where the 1x1 convolution alone runs brgconv_1x1 (AVX-512
// CPUs) the fused node measured slower than the two brgemm convolutions (MobileNetV2 2.64
// vs 2.28 ms), so keeps_jit refuses that switch; elsewhere it would run its reference
// "fused convolution". In both cases the pass leaves the graph as it is and the log says why.
#include "core/strings.hpp"
#include "cpu/graph_optimizer.hpp"
#include "cpu/passes/fuse_util.hpp"

namespace kiln::cpu {

namespace {

constexpr const char* kFuseConvolutionAndDwConvolution = "FuseConvolutionAndDWConvolution";

// Why `n` is not a 3x3 depthwise convolution oneDNN's depthwise post-op computes, or "".
std::string not_depthwise(const Node& n, int64_t channels) {
  const ir::Node& s = *n.source;
  const Shape& w = n.inputs[1]->shape;
  if (w.size() != 4 || w[2] != 3 || w[3] != 3 || w[1] != 1) return "not a 3x3 depthwise kernel";
  if (s.attr_i("group", 1) != channels || w[0] != channels) return "group, input and output channels differ";
  const auto strides = s.attr_ints("strides", {1, 1});
  if (strides.size() != 2 || strides[0] != strides[1] || (strides[0] != 1 && strides[0] != 2))
    return "stride is not 1 or 2 in both dims";
  if (!passes::all_equal(s.attr_ints("dilations", {1, 1}), 1)) return "dilated";
  if (!passes::all_equal(s.attr_ints("pads", {1, 1, 1, 1}), 1) || s.attr_s("auto_pad", "NOTSET") != "NOTSET")
    return "padding is not 1 on every side";
  if (n.inputs[1]->kind != Edge::Kind::constant) return "weights are not constant";
  if (n.inputs.size() > 2 && n.inputs[2] && n.inputs[2]->kind != Edge::Kind::constant) return "bias is not constant";
  if (n.inputs.size() > 3) return "it has a sum post-op";
  return "";
}

}  // namespace

size_t fuse_convolution_and_dw_convolution(Graph& g, transforms::PassLog* log) {
  std::vector<Node*> convs;
  for (auto& n : g.nodes())
    if (n->kind() == NodeKind::Convolution && n->inputs[0]->shape.size() == 4) convs.push_back(n.get());
  size_t fused = 0;
  for (Node* c1 : convs) {
    if (c1->outputs.size() != 1 || !passes::not_pointwise(*c1).empty()) continue;
    if (c1->post_ops()->sum_input() >= 0 || c1->post_ops()->dw()) continue;
    Edge* mid = c1->outputs[0];
    auto readers = g.consumers(mid);
    if (readers.size() != 1 || readers[0]->kind() != NodeKind::Convolution) continue;
    Node* c2 = readers[0];
    const std::string where = log ? passes::arrow(*c1, *c2) : std::string();
    auto skip = [&](const std::string& why) {
      if (log) log->skipped(kFuseConvolutionAndDwConvolution, where, cat("depthwise convolution not fused: ", why));
    };
    if (c2->inputs[0] != mid) continue;
    const int64_t channels = mid->shape[1];
    if (std::string why = not_depthwise(*c2, channels); !why.empty()) {
      if (why != "not a 3x3 depthwise kernel") skip(why);
      continue;
    }
    if (g.is_graph_output(mid)) {
      skip(cat(c1->name, "'s output is a graph output"));
      continue;
    }
    // where the shapes vary, kiln's DepthwiseBlock makes nothing per shape, where this fusion
    // makes a oneDNN primitive (a JIT kernel and the depthwise weights' reorder: on AVX2,
    // EfficientNet-B0's features.2.0, 11.5M instructions of the 15.2M a new shape's plan took)
    if (auto m = match_depthwise_block(g, *c2); m && m->expand == c1 && m->refused.empty()) {
      skip("FuseDepthwiseBlock takes both: kiln's kernels, nothing made per shape");
      continue;
    }
    PostOp dw;
    dw.kind = PostOp::Kind::dw;
    dw.from = c2->name;
    dw.constant = c2->inputs[1]->constant;
    if (c2->inputs.size() > 2 && c2->inputs[2]) dw.dw_bias = c2->inputs[2]->constant;
    dw.dw_stride = c2->source->attr_ints("strides", {1, 1})[0];
    dw.conv_out = mid->shape;
    std::vector<PostOp> extra = {dw};
    const PostOpList* after = c2->post_ops();  // the depthwise convolution's own simple layers
    extra.insert(extra.end(), after->ops.begin(), after->ops.end());
    std::string why;
    if (!c1->accepts_post_ops(extra, &why)) {
      skip(cat("no faster fused kernel in oneDNN 2.6 here (", why, ")"));
      continue;
    }
    PostOpList* list = c1->post_ops();
    list->ops.insert(list->ops.end(), extra.begin(), extra.end());
    g.absorb(c1, c2);
    if (log) log->applied(kFuseConvolutionAndDwConvolution, where, "depthwise convolution as a post-op");
    ++fused;
  }
  return fused;
}

}  // namespace kiln::cpu
