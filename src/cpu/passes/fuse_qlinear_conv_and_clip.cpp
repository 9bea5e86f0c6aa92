// FuseQLinearConvAndClip: a QuantizedConvolution whose 8-bit output only a Clip with constant
// bounds reads (QdqToQLinear writes one for a Relu / Clip that the output's range does not make
// redundant: a symmetric range, where Relu's 0 is the zero point) clamps in the primitive, as
// an eltwise clip post-op on the requantized value (after a fused residual sum, so this pass
// runs after FuseQLinearConvAndAdd). Exact: the bounds are integers, so clamping before the
// final rounding equals clamping the rounded value.
#include "core/strings.hpp"
#include "cpu/graph_optimizer.hpp"
#include "cpu/nodes/quantized_convolution.hpp"
#include "cpu/passes/fuse_util.hpp"

namespace kiln::cpu {

namespace {

constexpr const char* kFuseQlinearConvAndClip = "FuseQLinearConvAndClip";

// A bound input of the Clip: a constant scalar of the data's type, or absent (the type's end).
std::optional<int32_t> bound(const Node& clip, size_t i, DType t, int32_t absent) {
  if (clip.inputs.size() <= i || !clip.inputs[i]) return absent;
  const Edge* e = clip.inputs[i];
  if (e->kind != Edge::Kind::constant || e->constant.size() != 1 || e->constant.dtype() != t) return std::nullopt;
  return t == DType::u8 ? int32_t{*static_cast<const uint8_t*>(e->constant.raw())}
                        : int32_t{*static_cast<const int8_t*>(e->constant.raw())};
}

bool is_clip(const Node& n) {
  return n.source && n.source->op_type() == "Clip" && n.source->is_onnx_domain() && n.outputs.size() == 1;
}

}  // namespace

size_t fuse_qlinear_conv_and_clip(Graph& g, transforms::PassLog* log) {
  size_t fused = 0;
  for (Node* conv : passes::nodes_of_kind(g, NodeKind::QuantizedConvolution)) {
    Node* clip = passes::sole_reader(g, *conv, is_clip);
    if (!clip) continue;
    Edge* out = conv->outputs.at(0);
    const std::string where = log ? passes::arrow(*conv, *clip) : std::string();
    auto skip = [&](const std::string& why) {
      if (log) log->skipped(kFuseQlinearConvAndClip, where, cat("Clip not fused: ", why));
    };
    if (g.is_graph_output(out)) {
      skip(cat(conv->name, "'s output is a graph output"));
      continue;
    }
    const DType t = out->dtype;
    const bool s8 = t == DType::i8;
    const auto lo = bound(*clip, 1, t, s8 ? -128 : 0), hi = bound(*clip, 2, t, s8 ? 127 : 255);
    if (!lo || !hi || clip->outputs[0]->dtype != t) {
      skip("its bounds are not constant scalars of the data's 8-bit type");
      continue;
    }
    std::string why;
    auto* host = dynamic_cast<QuantizedSumHost*>(conv);
    if (!host || !host->take_clamp(*lo, *hi, &why)) {
      skip(host ? why : "the convolution takes no clamp");
      continue;
    }
    g.absorb(conv, clip);
    if (log) log->applied(kFuseQlinearConvAndClip, where, cat("clamps to [", *lo, ", ", *hi, "] in the primitive"));
    ++fused;
  }
  return fused;
}

}  // namespace kiln::cpu
