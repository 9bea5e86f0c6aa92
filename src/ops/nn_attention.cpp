// MultiHeadAttention (domain "kiln"): scaled dot-product attention over packed heads, the
// op the attention pattern (src/pattern/library/attention.json) collapses a transformer's
// Reshape/Transpose/MatMul/scale/mask/Softmax/MatMul block into.
//   Q [B, S, H*D], K [B, T, H*D], V [B, T, H*Dv], mask (optional, additive, broadcast to [B, H, S, T])
//   Y[b, s, h*Dv + e] = sum_t softmax_t(scale * <Q[b,s,h,:], K[b,t,h,:]> + mask[b,h,s,t]) V[b, t, h*Dv + e]
// Attributes: num_heads (H), scale; optional probs_scale, probs_zero_point, probs_type (2 uint8,
// 3 int8): the softmax probabilities quantized and dequantized before V (what a QDQ model's
// QuantizeLinear -> DequantizeLinear there computes). The reference kernel computes in double per
// row (the quantization in f32, as QuantizeLinear does).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/dispatch.hpp"
#include "core/strings.hpp"
#include "ir/infer_util.hpp"
#include "ops/nn_common.hpp"

namespace kiln::ops::nn {

namespace {

// Strides of a mask of shape `m` read as [B, H, S, T] (leading 1s added; 0 where broadcast).
std::array<int64_t, 4> mask_strides(const Shape& m, const std::array<int64_t, 4>& full) {
  Shape p(4 - m.size(), 1);
  p.insert(p.end(), m.begin(), m.end());
  std::array<int64_t, 4> st{};
  int64_t s = 1;
  for (int d = 3; d >= 0; --d) {
    st[static_cast<size_t>(d)] = p[static_cast<size_t>(d)] == 1 && full[static_cast<size_t>(d)] != 1 ? 0 : s;
    s *= p[static_cast<size_t>(d)];
  }
  return st;
}

}  // namespace

void register_attention_ops(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.domain = "kiln";
  s.name = "MultiHeadAttention";
  s.since_version = 1;
  s.min_inputs = 3;
  s.max_inputs = 4;
  s.attrs = {{"num_heads", ir::AttrType::i, true},
             {"scale", ir::AttrType::f, true},
             {"probs_scale", ir::AttrType::f, false},
             {"probs_zero_point", ir::AttrType::i, false},
             {"probs_type", ir::AttrType::i, false}};
  s.validate = [](const ir::Node& n) {
    KILN_CHECK(n.attr_i("num_heads") >= 1, cat(n.describe(), ": num_heads must be >= 1, got ", n.attr_i("num_heads")));
    if (n.has_attr("probs_scale")) {
      const float ps = n.attr_f("probs_scale");
      const int64_t type = n.attr_i("probs_type", 2), zp = n.attr_i("probs_zero_point", 0);
      KILN_CHECK(ps > 0 && std::isfinite(ps), cat(n.describe(), ": probs_scale must be positive and finite, got ", ps));
      KILN_CHECK(type == 2 || type == 3, cat(n.describe(), ": probs_type must be 2 (uint8) or 3 (int8), got ", type));
      KILN_CHECK(type == 2 ? zp >= 0 && zp <= 255 : zp >= -128 && zp <= 127,
                 cat(n.describe(), ": probs_zero_point ", zp, " is outside its 8-bit type"));
    }
  };
  s.infer = [](ir::InferContext& ctx) {
    const int64_t heads = ctx.node().attr_i("num_heads");
    DType dt = ctx.input_dtype(0);
    for (size_t i = 0; i < 3; ++i) {
      if (ctx.input_dtype(i) != DType::undefined && ctx.input_dtype(i) != DType::f32)
        throw ctx.error("input ", i, " must be f32, got ", dtype_name(ctx.input_dtype(i)));
      const ir::PartialShape& p = ctx.input_shape(i);
      if (p.rank_known && p.rank() != 3) throw ctx.error("input ", i, " must be [batch, sequence, heads*size], got ", p.to_string());
      if (p.rank_known && p.dims[2].is_static() && p.dims[2].value % heads != 0)
        throw ctx.error("input ", i, " last dim ", p.dims[2].value, " is not a multiple of num_heads ", heads);
    }
    const ir::PartialShape& q = ctx.input_shape(0);
    const ir::PartialShape& v = ctx.input_shape(2);
    if (!q.rank_known || !v.rank_known) {
      ctx.set_output(0, dt, ir::PartialShape::unknown_rank());
      return;
    }
    ctx.set_output(0, dt, ir::PartialShape(std::vector<ir::Dim>{q.dims[0], q.dims[1], v.dims[2]}));
  };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& q = ctx.input(0);
    const Tensor& k = ctx.input(1);
    const Tensor& v = ctx.input(2);
    for (const Tensor* t : {&q, &k, &v})
      if (t->dtype() != DType::f32 || t->rank() != 3) throw ctx.error("Q, K and V must be f32 of rank 3");
    const int64_t H = ctx.node().attr_i("num_heads");
    const float scale = ctx.node().attr_f("scale");
    const int64_t B = q.shape()[0], S = q.shape()[1], T = k.shape()[1];
    const int64_t HD = q.shape()[2], HDv = v.shape()[2];
    if (k.shape()[0] != B || v.shape()[0] != B || v.shape()[1] != T || k.shape()[2] != HD || HD % H || HDv % H)
      throw ctx.error("inconsistent shapes Q ", shape_to_string(q.shape()), ", K ", shape_to_string(k.shape()), ", V ",
                      shape_to_string(v.shape()), " for ", H, " heads");
    const int64_t D = HD / H, Dv = HDv / H;
    const float* mask = nullptr;
    std::array<int64_t, 4> ms{};
    if (ctx.has_input(3)) {
      const Tensor& m = ctx.input(3);
      if (m.dtype() != DType::f32 || m.rank() > 4) throw ctx.error("mask must be f32 of rank <= 4");
      Shape p(4 - m.rank(), 1);
      p.insert(p.end(), m.shape().begin(), m.shape().end());
      const std::array<int64_t, 4> full = {B, H, S, T};
      for (size_t d = 0; d < 4; ++d)
        if (p[d] != 1 && p[d] != full[d])
          throw ctx.error("mask ", shape_to_string(m.shape()), " does not broadcast to [", B, ",", H, ",", S, ",", T, "]");
      mask = m.data<float>();
      ms = mask_strides(m.shape(), full);
    }
    // probs_*: the probabilities through QuantizeLinear -> DequantizeLinear, in f32 as those ops compute
    const bool quant = ctx.node().has_attr("probs_scale");
    const float ps = quant ? ctx.node().attr_f("probs_scale") : 1.0f;
    const float pz = static_cast<float>(ctx.node().attr_i("probs_zero_point", 0));
    const bool ps8 = ctx.node().attr_i("probs_type", 2) == 3;
    const float pmin = ps8 ? -128.0f : 0.0f, pmax = ps8 ? 127.0f : 255.0f;
    Tensor& y = ctx.allocate_output(0, DType::f32, {B, S, HDv});
    const float* pq = q.data<float>();
    const float* pk = k.data<float>();
    const float* pv = v.data<float>();
    float* py = y.data<float>();
    std::vector<double> p(static_cast<size_t>(T));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < S; ++i) {
          double mx = -std::numeric_limits<double>::infinity();
          for (int64_t t = 0; t < T; ++t) {
            double dot = 0;
            for (int64_t d = 0; d < D; ++d)
              dot += static_cast<double>(pq[(b * S + i) * HD + h * D + d]) * pk[(b * T + t) * HD + h * D + d];
            double sc = static_cast<double>(scale) * dot;
            if (mask) sc += mask[b * ms[0] + h * ms[1] + i * ms[2] + t * ms[3]];
            p[static_cast<size_t>(t)] = sc;
            mx = std::max(mx, sc);
          }
          double sum = 0;
          for (int64_t t = 0; t < T; ++t) sum += p[static_cast<size_t>(t)] = std::exp(p[static_cast<size_t>(t)] - mx);
          if (quant) {  // normalised, quantized and dequantized; the sum is then 1 by construction
            for (int64_t t = 0; t < T; ++t) {
              const float q = std::nearbyint(static_cast<float>(p[static_cast<size_t>(t)] / sum) / ps) + pz;
              p[static_cast<size_t>(t)] = (std::min(std::max(q, pmin), pmax) - pz) * ps;
            }
            sum = 1;
          }
          for (int64_t e = 0; e < Dv; ++e) {
            double acc = 0;
            for (int64_t t = 0; t < T; ++t) acc += p[static_cast<size_t>(t)] * pv[(b * T + t) * HDv + h * Dv + e];
            py[(b * S + i) * HDv + h * Dv + e] = static_cast<float>(acc / sum);
          }
        }
  };
  r.add(std::move(s));
}

}  // namespace kiln::ops::nn
