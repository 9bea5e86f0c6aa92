// Opset 23's transformer operators, reference kernels (double accumulation):
//
// Attention: scaled dot-product attention, multi-head (q_num_heads = kv_num_heads),
// grouped-query and multi-query (kv heads shared by q_num_heads / kv_num_heads query heads).
// Q [B, Hq, S, D] (or 3-D [B, S, Hq*D] with attribute q_num_heads), K [B, Hkv, T, D], V
// [B, Hkv, T, Dv]; past_key / past_value [B, Hkv, P, D] go before K / V (present_key /
// present_value are the concatenations). Per query row:
//   scores = (Q sqrt(scale)) (K sqrt(scale))^T   (scale default 1 / sqrt(D))
//   scores = softcap * tanh(scores / softcap)    (softcap > 0)
//   scores += mask bias: a bool attn_mask gives -inf where false, a float one is added;
//             is_causal adds -inf where key j > i + P
//   Y = softmax(scores) V; a row whose every bias is -inf gives zeros.
// qk_matmul_output: mode 0 the Q K^T product (scaled), 1 after softcap, 2 with the mask
// bias too, 3 the softmax.
//
// RotaryEmbedding: rotates the first rotary_embedding_dim (default: all) elements of each
// head by the angles in cos_cache / sin_cache (rows picked by position_ids when given), as
// two halves or as interleaved pairs.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/dispatch.hpp"
#include "core/strings.hpp"
#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"
#include "ops/nn_common.hpp"

namespace kiln::ops {
void misc_store_f64(Tensor& t, const std::vector<double>& v, const char* what);  // misc.cpp
}

namespace kiln::ops::nn {

namespace {

using ir::Dim;
using ir::PartialShape;

// Geometry of an Attention node on concrete shapes.
struct AttnGeom {
  bool three_d = false;
  int64_t B = 0, Hq = 0, Hkv = 0, S = 0, T = 0, P = 0, D = 0, Dv = 0;
  int64_t total() const { return P + T; }
};

// Reads Q/K/V as [B, H, seq, d] (3-D inputs split by the head attributes).
AttnGeom attention_geometry(const RunContext& ctx, const Shape& q, const Shape& k, const Shape& v, const Tensor* pk) {
  const ir::Node& n = ctx.node();
  AttnGeom g;
  if (q.size() != k.size() || q.size() != v.size() || (q.size() != 3 && q.size() != 4))
    throw ctx.error("Q, K and V must all be 4-D [B, heads, seq, size] or all 3-D [B, seq, heads*size]; got ",
                    shape_to_string(q), ", ", shape_to_string(k), ", ", shape_to_string(v));
  g.three_d = q.size() == 3;
  g.B = q[0];
  if (g.three_d) {
    g.Hq = n.attr_i("q_num_heads", 0);
    g.Hkv = n.attr_i("kv_num_heads", 0);
    if (g.Hq <= 0 || g.Hkv <= 0) throw ctx.error("3-D Q, K, V need attributes q_num_heads and kv_num_heads >= 1");
    if (q[2] % g.Hq || k[2] % g.Hkv || v[2] % g.Hkv)
      throw ctx.error("hidden sizes ", q[2], ", ", k[2], ", ", v[2], " are not multiples of the heads (", g.Hq, ", ",
                      g.Hkv, ")");
    g.S = q[1];
    g.T = k[1];
    g.D = q[2] / g.Hq;
    g.Dv = v[2] / g.Hkv;
    if (k[2] / g.Hkv != g.D) throw ctx.error("K's head size ", k[2] / g.Hkv, " differs from Q's ", g.D);
    if (v[1] != g.T) throw ctx.error("K and V have different sequence lengths (", g.T, ", ", v[1], ")");
  } else {
    g.Hq = q[1];
    g.Hkv = k[1];
    g.S = q[2];
    g.T = k[2];
    g.D = q[3];
    g.Dv = v[3];
    if (k[3] != g.D) throw ctx.error("K's head size ", k[3], " differs from Q's ", g.D);
    if (v[1] != g.Hkv || v[2] != g.T) throw ctx.error("V ", shape_to_string(v), " does not match K ", shape_to_string(k));
  }
  if (k[0] != g.B || v[0] != g.B) throw ctx.error("Q, K and V have different batch sizes");
  if (g.Hkv <= 0 || g.Hq % g.Hkv != 0)
    throw ctx.error("q_num_heads (", g.Hq, ") must be a multiple of kv_num_heads (", g.Hkv, ")");
  if (pk) {
    const Shape& p = pk->shape();
    if (p.size() != 4 || p[0] != g.B || p[1] != g.Hkv || p[3] != g.D)
      throw ctx.error("past_key must be [", g.B, ", ", g.Hkv, ", past, ", g.D, "], got ", shape_to_string(p));
    g.P = p[2];
  }
  return g;
}

// Element (b, h, s, d) of a Q/K/V tensor in its layout.
inline int64_t at4(bool three_d, int64_t H, int64_t seq, int64_t d_size, int64_t b, int64_t h, int64_t s, int64_t d) {
  return three_d ? ((b * seq + s) * H + h) * d_size + d : ((b * H + h) * seq + s) * d_size + d;
}

void register_attention23(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Attention";
  s.since_version = 23;
  s.max_version = 23;
  s.min_inputs = 3;
  s.max_inputs = 6;
  s.min_outputs = 1;
  s.max_outputs = 4;
  s.attrs = {{"is_causal", ir::AttrType::i},     {"kv_num_heads", ir::AttrType::i},
             {"q_num_heads", ir::AttrType::i},   {"qk_matmul_output_mode", ir::AttrType::i},
             {"scale", ir::AttrType::f},         {"softcap", ir::AttrType::f},
             {"softmax_precision", ir::AttrType::i}};
  s.validate = [](const ir::Node& n) {
    const int64_t mode = n.attr_i("qk_matmul_output_mode", 0);
    KILN_CHECK(mode >= 0 && mode <= 3, cat(n.describe(), ": qk_matmul_output_mode must be 0..3, got ", mode));
    KILN_CHECK(n.has_input(4) == n.has_input(5), cat(n.describe(), ": past_key and past_value go together"));
  };
  s.infer = [](ir::InferContext& ctx) {
    const ir::Node& n = ctx.node();
    const DType dt = ctx.input_dtype(0);
    if (dt != DType::undefined && !is_floating(dt)) throw ctx.error("Q must be a float tensor, got ", dtype_name(dt));
    const PartialShape& q = ctx.input_shape(0);
    const PartialShape& k = ctx.input_shape(1);
    const PartialShape& v = ctx.input_shape(2);
    if (!q.rank_known || !k.rank_known || !v.rank_known) {
      for (size_t i = 0; i < ctx.num_outputs(); ++i)
        if (n.output(i)) ctx.set_output(i, dt, PartialShape::unknown_rank());
      return;
    }
    if (q.rank() != k.rank() || q.rank() != v.rank() || (q.rank() != 3 && q.rank() != 4))
      throw ctx.error("Q, K and V must all be 4-D or all 3-D, got ", q.to_string(), ", ", k.to_string(), ", ",
                      v.to_string());
    const bool three = q.rank() == 3;
    Dim kv_heads = three ? Dim(n.attr_i("kv_num_heads", 0)) : k.dims[1];
    Dim q_heads = three ? Dim(n.attr_i("q_num_heads", 0)) : q.dims[1];
    if (three && (n.attr_i("kv_num_heads", 0) <= 0 || n.attr_i("q_num_heads", 0) <= 0))
      throw ctx.error("3-D Q, K, V need attributes q_num_heads and kv_num_heads >= 1");
    const Dim q_seq = three ? q.dims[1] : q.dims[2];
    const Dim kv_seq = three ? k.dims[1] : k.dims[2];
    const Dim head = three ? (q.dims[2].is_static() ? Dim(q.dims[2].value / q_heads.value) : Dim::unknown()) : q.dims[3];
    const Dim vhead = three ? (v.dims[2].is_static() ? Dim(v.dims[2].value / kv_heads.value) : Dim::unknown()) : v.dims[3];
    if (three) {
      ctx.set_output(0, dt, PartialShape({q.dims[0], q_seq, ir::dim_mul(q_heads, vhead)}));
    } else {
      ctx.set_output(0, dt, PartialShape({q.dims[0], q_heads, q_seq, vhead}));
    }
    Dim total = kv_seq;
    if (ctx.has_input(4)) {
      const PartialShape& pk = ctx.input_shape(4);
      total = pk.rank_known && pk.rank() == 4 ? ir::dim_add(pk.dims[2], kv_seq) : Dim::unknown();
    }
    if (ctx.num_outputs() > 1 && n.output(1)) ctx.set_output(1, dt, PartialShape({q.dims[0], kv_heads, total, head}));
    if (ctx.num_outputs() > 2 && n.output(2)) ctx.set_output(2, dt, PartialShape({q.dims[0], kv_heads, total, vhead}));
    if (ctx.num_outputs() > 3 && n.output(3)) ctx.set_output(3, dt, PartialShape({q.dims[0], q_heads, q_seq, total}));
  };
  s.run = [](RunContext& ctx) {
    const ir::Node& n = ctx.node();
    const Tensor& Q = ctx.input(0);
    const Tensor& K = ctx.input(1);
    const Tensor& V = ctx.input(2);
    const Tensor* mask = ctx.has_input(3) ? &ctx.input(3) : nullptr;
    const Tensor* PK = ctx.has_input(4) ? &ctx.input(4) : nullptr;
    const Tensor* PV = ctx.has_input(5) ? &ctx.input(5) : nullptr;
    if (!is_floating(Q.dtype()) || K.dtype() != Q.dtype() || V.dtype() != Q.dtype())
      throw ctx.error("Q, K and V must be float tensors of one type");
    if ((PK == nullptr) != (PV == nullptr)) throw ctx.error("past_key and past_value go together");
    const AttnGeom g = attention_geometry(ctx, Q.shape(), K.shape(), V.shape(), PK);
    if (PV && (PV->shape() != Shape{g.B, g.Hkv, g.P, g.Dv}))
      throw ctx.error("past_value must be [", g.B, ", ", g.Hkv, ", ", g.P, ", ", g.Dv, "], got ",
                      shape_to_string(PV->shape()));
    const int64_t TT = g.total();
    const double scale = n.has_attr("scale") ? n.attr_f("scale") : 1.0 / std::sqrt(static_cast<double>(g.D));
    const double softcap = n.attr_f("softcap", 0.0f);
    const bool causal = n.attr_i("is_causal", 0) != 0;
    const int64_t mode = n.attr_i("qk_matmul_output_mode", 0);

    // present K / V: [B, Hkv, P + T, d] (past rows first)
    const std::vector<double> q = Q.to_f64(), k = K.to_f64(), v = V.to_f64();
    std::vector<double> pk = PK ? PK->to_f64() : std::vector<double>(), pv = PV ? PV->to_f64() : std::vector<double>();
    std::vector<double> kk(static_cast<size_t>(g.B * g.Hkv * TT * g.D)), vv(static_cast<size_t>(g.B * g.Hkv * TT * g.Dv));
    for (int64_t b = 0; b < g.B; ++b)
      for (int64_t h = 0; h < g.Hkv; ++h)
        for (int64_t t = 0; t < TT; ++t) {
          for (int64_t d = 0; d < g.D; ++d)
            kk[static_cast<size_t>(((b * g.Hkv + h) * TT + t) * g.D + d)] =
                t < g.P ? pk[static_cast<size_t>(((b * g.Hkv + h) * g.P + t) * g.D + d)]
                        : k[static_cast<size_t>(at4(g.three_d, g.Hkv, g.T, g.D, b, h, t - g.P, d))];
          for (int64_t d = 0; d < g.Dv; ++d)
            vv[static_cast<size_t>(((b * g.Hkv + h) * TT + t) * g.Dv + d)] =
                t < g.P ? pv[static_cast<size_t>(((b * g.Hkv + h) * g.P + t) * g.Dv + d)]
                        : v[static_cast<size_t>(at4(g.three_d, g.Hkv, g.T, g.Dv, b, h, t - g.P, d))];
        }

    // the mask read as [B, Hq, S, TT] with broadcasting (numpy rules against that shape)
    std::vector<double> mvals;
    std::vector<int64_t> mstride(4, 0);
    bool mask_bool = false;
    if (mask) {
      const Shape& ms = mask->shape();
      if (ms.size() > 4) throw ctx.error("attn_mask has rank ", ms.size(), " (at most 4)");
      const int64_t full[4] = {g.B, g.Hq, g.S, TT};
      Shape p(4 - ms.size(), 1);
      p.insert(p.end(), ms.begin(), ms.end());
      int64_t st = 1;
      for (int d = 3; d >= 0; --d) {
        const auto u = static_cast<size_t>(d);
        if (p[u] != 1 && p[u] != full[d])
          throw ctx.error("attn_mask ", shape_to_string(ms), " does not broadcast to [", g.B, ", ", g.Hq, ", ", g.S, ", ",
                          TT, "]");
        mstride[u] = p[u] == 1 ? 0 : st;
        st *= p[u];
      }
      mask_bool = mask->dtype() == DType::boolean;
      if (mask_bool) {
        const auto* pm = static_cast<const uint8_t*>(mask->raw());
        mvals.resize(static_cast<size_t>(mask->size()));
        for (size_t i = 0; i < mvals.size(); ++i) mvals[i] = pm[i] ? 0.0 : -std::numeric_limits<double>::infinity();
      } else {
        mvals = mask->to_f64();
      }
    }

    const std::vector<int64_t> yshape = g.three_d ? std::vector<int64_t>{g.B, g.S, g.Hq * g.Dv}
                                                  : std::vector<int64_t>{g.B, g.Hq, g.S, g.Dv};
    std::vector<double> y(static_cast<size_t>(g.B * g.Hq * g.S * g.Dv), 0.0);
    const bool want_qk = ctx.num_outputs() > 3 && n.output(3);
    std::vector<double> qk_out(want_qk ? static_cast<size_t>(g.B * g.Hq * g.S * TT) : 0);
    const double sq = std::sqrt(scale);
    const int64_t group = g.Hq / g.Hkv;
    std::vector<double> row(static_cast<size_t>(TT));
    const double ninf = -std::numeric_limits<double>::infinity();
    for (int64_t b = 0; b < g.B; ++b)
      for (int64_t h = 0; h < g.Hq; ++h) {
        const int64_t hk = h / group;
        for (int64_t i = 0; i < g.S; ++i) {
          double* qk_row = want_qk ? qk_out.data() + ((b * g.Hq + h) * g.S + i) * TT : nullptr;
          for (int64_t j = 0; j < TT; ++j) {
            double acc = 0;
            for (int64_t d = 0; d < g.D; ++d)
              acc += q[static_cast<size_t>(at4(g.three_d, g.Hq, g.S, g.D, b, h, i, d))] * sq *
                     (kk[static_cast<size_t>(((b * g.Hkv + hk) * TT + j) * g.D + d)] * sq);
            if (qk_row && mode == 0) qk_row[j] = acc;
            if (softcap > 0) acc = softcap * std::tanh(acc / softcap);
            if (qk_row && mode == 1) qk_row[j] = acc;
            double bias = 0;
            if (mask)
              bias += mvals[static_cast<size_t>(b * mstride[0] + h * mstride[1] + i * mstride[2] + j * mstride[3])];
            if (causal && j > i + g.P) bias += ninf;
            acc += bias;
            if (qk_row && mode == 2) qk_row[j] = acc;
            row[static_cast<size_t>(j)] = acc;
          }
          double mx = ninf;
          for (double x : row) mx = std::max(mx, x);
          double sum = 0;
          if (mx != ninf)
            for (double& x : row) sum += (x = std::exp(x - mx));
          for (int64_t j = 0; j < TT; ++j) {
            const double p = mx == ninf ? 0.0 : row[static_cast<size_t>(j)] / sum;  // fully masked row: zeros
            if (qk_row && mode == 3) qk_row[j] = p;
            if (p == 0) continue;
            for (int64_t e = 0; e < g.Dv; ++e)
              y[static_cast<size_t>(at4(g.three_d, g.Hq, g.S, g.Dv, b, h, i, e))] +=
                  p * vv[static_cast<size_t>(((b * g.Hkv + hk) * TT + j) * g.Dv + e)];
          }
        }
      }
    misc_store_f64(ctx.allocate_output(0, Q.dtype(), yshape), y, "Attention");
    if (ctx.num_outputs() > 1 && n.output(1)) misc_store_f64(ctx.allocate_output(1, Q.dtype(), {g.B, g.Hkv, TT, g.D}), kk, "Attention");
    if (ctx.num_outputs() > 2 && n.output(2)) misc_store_f64(ctx.allocate_output(2, Q.dtype(), {g.B, g.Hkv, TT, g.Dv}), vv, "Attention");
    if (want_qk) misc_store_f64(ctx.allocate_output(3, Q.dtype(), {g.B, g.Hq, g.S, TT}), qk_out, "Attention");
  };
  r.add(std::move(s));
}

void register_rotary_embedding(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "RotaryEmbedding";
  s.since_version = 23;
  s.max_version = 23;
  s.min_inputs = 3;
  s.max_inputs = 4;
  s.attrs = {{"interleaved", ir::AttrType::i}, {"num_heads", ir::AttrType::i}, {"rotary_embedding_dim", ir::AttrType::i}};
  s.infer = ir::infer_same_as_input(0);
  s.run = [](RunContext& ctx) {
    const ir::Node& n = ctx.node();
    const Tensor& X = ctx.input(0);
    const Tensor& C = ctx.input(1);
    const Tensor& Sn = ctx.input(2);
    const Tensor* pos = ctx.has_input(3) ? &ctx.input(3) : nullptr;
    if (!is_floating(X.dtype())) throw ctx.error("X must be a float tensor, got ", dtype_name(X.dtype()));
    const Shape& xs = X.shape();
    int64_t B, S, H, D;
    const bool four = xs.size() == 4;
    if (four) {
      B = xs[0], H = xs[1], S = xs[2], D = xs[3];
    } else if (xs.size() == 3) {
      H = n.attr_i("num_heads", 0);
      if (H <= 0 || xs[2] % H) throw ctx.error("3-D X needs attribute num_heads dividing its last dim ", xs[2]);
      B = xs[0], S = xs[1], D = xs[2] / H;
    } else {
      throw ctx.error("X must be 4-D [B, heads, seq, size] or 3-D [B, seq, hidden], got ", shape_to_string(xs));
    }
    int64_t R = n.attr_i("rotary_embedding_dim", 0);
    if (R == 0) R = D;
    if (R < 0 || R > D || R % 2) throw ctx.error("rotary_embedding_dim ", R, " must be even and at most the head size ", D);
    const int64_t half = R / 2;
    // cos / sin row for (b, s): cache[pos[b, s]] (2-D cache) or cache[b, s] (3-D cache); a row may
    // be longer than R / 2 (a cache made for the full head): its first R / 2 entries are used
    const std::vector<double> cv = C.to_f64(), sv = Sn.to_f64();
    const int64_t width = C.rank() >= 1 ? C.shape().back() : 0;
    std::vector<int64_t> ids;
    if (pos) {
      if (pos->shape() != Shape{B, S}) throw ctx.error("position_ids must be [", B, ", ", S, "], got ", shape_to_string(pos->shape()));
      ids = pos->to_i64();
      if (C.rank() != 2 || Sn.shape() != C.shape() || width < half)
        throw ctx.error("with position_ids, cos_cache and sin_cache must be [max position + 1, >= ", half, "], got ",
                        shape_to_string(C.shape()), " and ", shape_to_string(Sn.shape()));
      for (int64_t id : ids)
        if (id < 0 || id >= C.shape()[0]) throw ctx.error("position id ", id, " is outside the caches' ", C.shape()[0], " rows");
    } else if (C.rank() != 3 || C.shape()[0] != B || C.shape()[1] != S || width < half || Sn.shape() != C.shape()) {
      throw ctx.error("without position_ids, cos_cache and sin_cache must be [", B, ", ", S, ", >= ", half, "], got ",
                      shape_to_string(C.shape()), " and ", shape_to_string(Sn.shape()));
    }
    const bool inter = n.attr_i("interleaved", 0) != 0;
    const std::vector<double> x = X.to_f64();
    std::vector<double> y = x;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < S; ++t) {
          const int64_t row = pos ? ids[static_cast<size_t>(b * S + t)] : b * S + t;
          const int64_t base = four ? ((b * H + h) * S + t) * D : ((b * S + t) * H + h) * D;
          for (int64_t i = 0; i < half; ++i) {
            const double c = cv[static_cast<size_t>(row * width + i)], sn = sv[static_cast<size_t>(row * width + i)];
            const int64_t i1 = inter ? 2 * i : i, i2 = inter ? 2 * i + 1 : i + half;
            const double x1 = x[static_cast<size_t>(base + i1)], x2 = x[static_cast<size_t>(base + i2)];
            y[static_cast<size_t>(base + i1)] = c * x1 - sn * x2;
            y[static_cast<size_t>(base + i2)] = sn * x1 + c * x2;
          }
        }
    misc_store_f64(ctx.allocate_output(0, X.dtype(), xs), y, "RotaryEmbedding");
  };
  r.add(std::move(s));
}

}  // namespace

void register_attention23_ops(ir::OpRegistry& r) {
  register_attention23(r);
  register_rotary_embedding(r);
}

}  // namespace kiln::ops::nn
