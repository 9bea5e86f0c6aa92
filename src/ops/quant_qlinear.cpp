// ONNX Runtime's QOperator-format contrib ops (com.microsoft), as its quantizer writes them
// with QuantFormat.QOperator: QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu,
// QLinearSoftmax, QLinearGlobalAveragePool, QLinearConcat, QLinearWhere and QGemm.
// (QLinearAveragePool is with the pools in nn_pool.cpp, QLinearConv / QLinearMatMul with the
// convolutions and matmuls.)
//
// Each computes what its definition says on the dequantized values, real = (q - zero_point) *
// scale, and quantizes the result: round half to even, saturate to the 8-bit type. Integer sums
// (the pool, QGemm) are exact in int32 / int64 before the one rescale, as ONNX Runtime's kernels
// do. Scales and zero points are per tensor (QGemm's B: per column too).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"
#include "ops/op_families.hpp"
#include "ops/quant_util.hpp"

namespace kiln::ops {

QParam read_qparam(const ir::RunContext& ctx, size_t scale_at, size_t zp_at, DType type, const char* name) {
  QParam p;
  const Tensor& s = one_value(ctx, ctx.input(scale_at), cat(name, "_scale"));
  if (s.dtype() != DType::f32) throw ctx.error(name, "_scale must be float32, got ", dtype_name(s.dtype()));
  p.scale = s.data<float>()[0];
  if (!(p.scale > 0.0f) || !std::isfinite(p.scale))
    throw ctx.error(name, "_scale must be a positive finite number, got ", p.scale);
  if (zp_at < ctx.num_inputs() && ctx.has_input(zp_at)) {
    const Tensor& z = one_value(ctx, ctx.input(zp_at), cat(name, "_zero_point"));
    if (z.dtype() != type)
      throw ctx.error(name, "_zero_point must be ", dtype_name(type), " as ", name, ", got ", dtype_name(z.dtype()));
    p.zero_point = static_cast<float>(z.to_i64()[0]);
  }
  return p;
}

void check_int8(const ir::RunContext& ctx, DType t, const char* what) {
  if (t != DType::u8 && t != DType::i8) throw ctx.error(what, " must be uint8 or int8, got ", dtype_name(t));
}

namespace {

void infer_int8(ir::InferContext& ctx, size_t i, const char* what) {
  const DType t = ctx.input_dtype(i);
  if (t != DType::undefined && t != DType::u8 && t != DType::i8)
    throw ctx.error(what, " must be uint8 or int8, got ", dtype_name(t));
}

// An op of one quantized input X (X, X_scale, X_zero_point?, Y_scale, Y_zero_point?) whose output
// has X's type and shape, computed through a table of the 256 possible inputs.
void register_unary_table(ir::OpRegistry& r, const char* name, std::vector<ir::AttrSpec> attrs,
                          float (*f)(const ir::Node&, float)) {
  ir::OpSchema s;
  s.domain = "com.microsoft";
  s.name = name;
  s.min_inputs = 4;
  s.max_inputs = 5;
  s.optional_inputs = {2};
  s.attrs = std::move(attrs);
  s.infer = [](ir::InferContext& ctx) {
    infer_int8(ctx, 0, "X");
    ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
  };
  s.run = [f](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    check_int8(ctx, x.dtype(), "X");
    const QParam qx = read_qparam(ctx, 1, 2, x.dtype(), "X"), qy = read_qparam(ctx, 3, 4, x.dtype(), "Y");
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    dispatch_int8(x.dtype(), [&](auto tag) {
      using Q = typename decltype(tag)::type;
      Q table[256];
      for (int v = std::numeric_limits<Q>::min(); v <= std::numeric_limits<Q>::max(); ++v) {
        const float real = f(ctx.node(), (static_cast<float>(v) - qx.zero_point) * qx.scale);
        table[static_cast<uint8_t>(v)] = saturate_round<Q>(real / qy.scale + qy.zero_point);
      }
      const Q* px = x.data<Q>();
      Q* py = y.data<Q>();
      for (int64_t i = 0; i < x.size(); ++i) py[i] = table[static_cast<uint8_t>(px[i])];
    });
  };
  r.add(std::move(s));
}

// The scales of a binary QLinear op, as its arithmetic uses them.
struct BinaryScales {
  float ra, rb;  // A_scale / C_scale, B_scale / C_scale
  float k;       // A_scale B_scale / C_scale
  float zc;      // C's zero point
};

// A binary op of two quantized tensors of one 8-bit type (A, A_scale, A_zp?, B, B_scale, B_zp?,
// C_scale, C_zp?), numpy broadcast: C = saturate(combine(A - A_zp, B - B_zp)), where combine
// gives the result in C's units, its zero point added (and rounded as ONNX Runtime's kernel does).
void register_qlinear_binary(ir::OpRegistry& r, const char* name, float (*combine)(float, float, const BinaryScales&)) {
  ir::OpSchema s;
  s.domain = "com.microsoft";
  s.name = name;
  s.min_inputs = 7;
  s.max_inputs = 8;
  s.optional_inputs = {2, 5};
  s.infer = [](ir::InferContext& ctx) {
    infer_int8(ctx, 0, "A");
    infer_int8(ctx, 3, "B");
    if (ctx.input_dtype(0) != DType::undefined && ctx.input_dtype(3) != DType::undefined &&
        ctx.input_dtype(0) != ctx.input_dtype(3))
      throw ctx.error("A is ", dtype_name(ctx.input_dtype(0)), " but B is ", dtype_name(ctx.input_dtype(3)));
    ctx.set_output(0, ctx.input_dtype(0), ir::broadcast_shapes({ctx.input_shape(0), ctx.input_shape(3)}, ctx.node()));
  };
  s.run = [combine](ir::RunContext& ctx) {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(3);
    check_int8(ctx, a.dtype(), "A");
    if (b.dtype() != a.dtype()) throw ctx.error("A is ", dtype_name(a.dtype()), " but B is ", dtype_name(b.dtype()));
    const QParam qa = read_qparam(ctx, 1, 2, a.dtype(), "A"), qb = read_qparam(ctx, 4, 5, a.dtype(), "B");
    const QParam qc = read_qparam(ctx, 6, 7, a.dtype(), "C");
    const BinaryScales sc{qa.scale / qc.scale, qb.scale / qc.scale, qa.scale * qb.scale / qc.scale, qc.zero_point};
    const Shape out = broadcast_shape({a.shape(), b.shape()}, ctx.node());
    Tensor& c = ctx.allocate_output(0, a.dtype(), out);
    dispatch_int8(a.dtype(), [&](auto tag) {
      using Q = typename decltype(tag)::type;
      const Q* pa = a.data<Q>();
      const Q* pb = b.data<Q>();
      Q* pc = c.data<Q>();
      for_each_broadcast<2>(out, {a.shape(), b.shape()}, [&](int64_t i, const std::array<int64_t, 2>& off) {
        const float da = static_cast<float>(pa[off[0]]) - qa.zero_point, db = static_cast<float>(pb[off[1]]) - qb.zero_point;
        pc[i] = saturate_round<Q>(combine(da, db, sc));
      });
    });
  };
  r.add(std::move(s));
}

// QLinearAdd: C = (A - A_zp) A_scale / C_scale + (B - B_zp) B_scale / C_scale, rounded, + C_zp
// (kiln's QDQ pass writes it too).
float qlinear_add(float da, float db, const BinaryScales& s) { return std::nearbyint(da * s.ra + db * s.rb) + s.zc; }
// QLinearMul: C = (A - A_zp)(B - B_zp) A_scale B_scale / C_scale + C_zp, then rounded.
float qlinear_mul(float da, float db, const BinaryScales& s) { return da * db * s.k + s.zc; }

// QLinearSoftmax(X, X_scale, x_zp?, y_scale, y_zp): softmax of the dequantized X along `axis`;
// the attribute `opset` (of the Softmax it replaces) decides the form: before 13 the input is
// seen as 2-D [prod(d < axis), prod(d >= axis)], since along the one dim `axis` (default -1).
void register_qlinear_softmax(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.domain = "com.microsoft";
  s.name = "QLinearSoftmax";
  s.min_inputs = 4;
  s.max_inputs = 5;
  s.optional_inputs = {2};
  s.attrs = {{"axis", ir::AttrType::i}, {"opset", ir::AttrType::i, true}};
  s.infer = [](ir::InferContext& ctx) {
    infer_int8(ctx, 0, "X");
    ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
  };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    check_int8(ctx, x.dtype(), "X");
    const QParam qx = read_qparam(ctx, 1, 2, x.dtype(), "X"), qy = read_qparam(ctx, 3, 4, x.dtype(), "Y");
    const ir::Node& n = ctx.node();
    const bool legacy = n.attr_i("opset") < 13;
    const auto rank = static_cast<int64_t>(x.rank());
    if (rank < 1) throw ctx.error("X must have rank >= 1, got a scalar");
    const int64_t axis = n.attr_i("axis", legacy ? 1 : -1);
    const int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a > rank || (a == rank && !legacy))
      throw ctx.error("axis ", axis, " is out of range for X of rank ", rank);
    int64_t outer = 1, len = 1, inner = 1;
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t v = x.shape()[static_cast<size_t>(d)];
      if (d < a) outer *= v;
      else if (legacy || d == a) len *= v;
      else inner *= v;
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    dispatch_int8(x.dtype(), [&](auto tag) {
      using Q = typename decltype(tag)::type;
      const Q* px = x.data<Q>();
      Q* py = y.data<Q>();
      std::vector<float> e(static_cast<size_t>(len));
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t in = 0; in < inner; ++in) {
          const int64_t base = o * len * inner + in;
          Q mx = std::numeric_limits<Q>::lowest();
          for (int64_t k = 0; k < len; ++k) mx = std::max(mx, px[base + k * inner]);
          float sum = 0;
          for (int64_t k = 0; k < len; ++k) {  // exp((x - max) * scale): the zero point cancels
            e[static_cast<size_t>(k)] = std::exp((static_cast<float>(px[base + k * inner]) - static_cast<float>(mx)) * qx.scale);
            sum += e[static_cast<size_t>(k)];
          }
          for (int64_t k = 0; k < len; ++k)
            py[base + k * inner] = saturate_round<Q>(e[static_cast<size_t>(k)] / sum / qy.scale + qy.zero_point);
        }
    });
  };
  r.add(std::move(s));
}

// QLinearGlobalAveragePool(X, x_scale, x_zp, y_scale, y_zp), channels_last 0: [N, C, d...] ->
// [N, C, 1...], 1: [N, d..., C] -> [N, 1..., C]. The integer sum of each channel, less the zero
// point's share, rescaled once by x_scale / (y_scale * count).
void register_qlinear_global_average_pool(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.domain = "com.microsoft";
  s.name = "QLinearGlobalAveragePool";
  s.min_inputs = s.max_inputs = 5;
  s.attrs = {{"channels_last", ir::AttrType::i}};
  s.infer = [](ir::InferContext& ctx) {
    infer_int8(ctx, 0, "X");
    const ir::PartialShape& xs = ctx.input_shape(0);
    if (!xs.rank_known) return ctx.set_output(0, ctx.input_dtype(0), ir::PartialShape::unknown_rank());
    if (xs.rank() < 3) throw ctx.error("X must have rank >= 3 (N, C and spatial dims), got ", xs.to_string());
    const bool last = ctx.node().attr_i("channels_last", 0) != 0;
    std::vector<ir::Dim> dims(xs.rank(), ir::Dim(1));
    dims[0] = xs.dims[0];
    const size_t c = last ? xs.rank() - 1 : 1;
    dims[c] = xs.dims[c];
    ctx.set_output(0, ctx.input_dtype(0), ir::PartialShape(dims));
  };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    check_int8(ctx, x.dtype(), "X");
    if (x.rank() < 3) throw ctx.error("X must have rank >= 3 (N, C and spatial dims), got ", shape_to_string(x.shape()));
    const QParam qx = read_qparam(ctx, 1, 2, x.dtype(), "x"), qy = read_qparam(ctx, 3, 4, x.dtype(), "y");
    const bool last = ctx.node().attr_i("channels_last", 0) != 0;
    const Shape& xs = x.shape();
    const size_t cdim = last ? xs.size() - 1 : 1;
    const int64_t N = xs[0], C = xs[cdim];
    int64_t count = 1;
    for (size_t d = 1; d < xs.size(); ++d)
      if (d != cdim) count *= xs[d];
    Shape ys(xs.size(), 1);
    ys[0] = N;
    ys[cdim] = C;
    Tensor& y = ctx.allocate_output(0, x.dtype(), ys);
    if (count == 0) throw ctx.error("X has no spatial elements (shape ", shape_to_string(xs), ")");
    const float k = qx.scale / (qy.scale * static_cast<float>(count));
    const auto zsum = static_cast<int64_t>(qx.zero_point) * count;
    dispatch_int8(x.dtype(), [&](auto tag) {
      using Q = typename decltype(tag)::type;
      const Q* px = x.data<Q>();
      Q* py = y.data<Q>();
      for (int64_t nn = 0; nn < N; ++nn)
        for (int64_t c = 0; c < C; ++c) {
          int64_t sum = 0;
          for (int64_t i = 0; i < count; ++i)
            sum += last ? px[(nn * count + i) * C + c] : px[(nn * C + c) * count + i];
          py[nn * C + c] = saturate_round<Q>(static_cast<float>(sum - zsum) * k + qy.zero_point);
        }
    });
  };
  r.add(std::move(s));
}

// QLinearConcat(Y_scale, Y_zp, X0, X0_scale, X0_zp, X1, ...): each input requantized to Y's
// parameters (copied as it is when they are the same), concatenated along `axis`.
void register_qlinear_concat(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.domain = "com.microsoft";
  s.name = "QLinearConcat";
  s.min_inputs = 5;
  s.max_inputs = 3 * 1024 + 2;
  s.attrs = {{"axis", ir::AttrType::i, true}};
  s.infer = [](ir::InferContext& ctx) {
    const size_t n = ctx.num_inputs();
    if ((n - 2) % 3 != 0) throw ctx.error("inputs must be Y_scale, Y_zero_point and (X, X_scale, X_zero_point) triples, got ", n);
    const DType t = ctx.input_dtype(1);
    infer_int8(ctx, 1, "Y_zero_point");
    std::optional<ir::PartialShape> out;
    for (size_t i = 2; i < n; i += 3) {
      if (ctx.input_dtype(i) != DType::undefined && t != DType::undefined && ctx.input_dtype(i) != t)
        throw ctx.error("input ", (i - 2) / 3, " is ", dtype_name(ctx.input_dtype(i)), ", Y is ", dtype_name(t));
      const ir::PartialShape& xs = ctx.input_shape(i);
      if (!xs.rank_known) return ctx.set_output(0, t, ir::PartialShape::unknown_rank());
      if (!out) {
        out = xs;
        continue;
      }
      if (xs.rank() != out->rank()) throw ctx.error("input ", (i - 2) / 3, " has rank ", xs.rank(), ", the first ", out->rank());
      const auto axis = static_cast<size_t>(normalize_axis(ctx.node().attr_i("axis"), static_cast<int64_t>(xs.rank()), ctx.node()));
      out->dims[axis] = ir::dim_add(out->dims[axis], xs.dims[axis]);
    }
    ctx.set_output(0, t, *out);
  };
  s.run = [](ir::RunContext& ctx) {
    const size_t n = ctx.num_inputs();
    if ((n - 2) % 3 != 0) throw ctx.error("inputs must be Y_scale, Y_zero_point and (X, X_scale, X_zero_point) triples, got ", n);
    const DType t = ctx.input(1).dtype();
    check_int8(ctx, t, "Y_zero_point");
    const QParam qy = read_qparam(ctx, 0, 1, t, "Y");
    const Tensor& first = ctx.input(2);
    const auto rank = static_cast<int64_t>(first.rank());
    if (rank < 1) throw ctx.error("the inputs must have rank >= 1");
    const int64_t axis = normalize_axis(ctx.node().attr_i("axis"), rank, ctx.node());
    Shape out = first.shape();
    out[static_cast<size_t>(axis)] = 0;
    for (size_t i = 2; i < n; i += 3) {
      const Tensor& x = ctx.input(i);
      if (x.dtype() != t) throw ctx.error("input ", (i - 2) / 3, " is ", dtype_name(x.dtype()), ", Y is ", dtype_name(t));
      if (static_cast<int64_t>(x.rank()) != rank)
        throw ctx.error("input ", (i - 2) / 3, " has rank ", x.rank(), ", the first ", rank);
      for (int64_t d = 0; d < rank; ++d)
        if (d != axis && x.shape()[static_cast<size_t>(d)] != first.shape()[static_cast<size_t>(d)])
          throw ctx.error("input ", (i - 2) / 3, " has shape ", shape_to_string(x.shape()), ", the first ",
                          shape_to_string(first.shape()), ": only dim ", axis, " may differ");
      out[static_cast<size_t>(axis)] += x.shape()[static_cast<size_t>(axis)];
    }
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= out[static_cast<size_t>(d)];
    for (int64_t d = axis + 1; d < rank; ++d) inner *= out[static_cast<size_t>(d)];
    const int64_t out_row = out[static_cast<size_t>(axis)] * inner;
    Tensor& y = ctx.allocate_output(0, t, out);
    dispatch_int8(t, [&](auto tag) {
      using Q = typename decltype(tag)::type;
      Q* py = y.data<Q>();
      int64_t at = 0;  // where this input's rows start in an output row
      for (size_t i = 2; i < n; i += 3) {
        const Tensor& x = ctx.input(i);
        const QParam qx = read_qparam(ctx, i + 1, i + 2, t, "X");
        const int64_t row = x.shape()[static_cast<size_t>(axis)] * inner;
        const Q* px = x.data<Q>();
        const bool same = qx.scale == qy.scale && qx.zero_point == qy.zero_point;
        const float k = qx.scale / qy.scale;
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t j = 0; j < row; ++j) {
            const Q v = px[o * row + j];
            py[o * out_row + at + j] =
                same ? v : saturate_round<Q>((static_cast<float>(v) - qx.zero_point) * k + qy.zero_point);
          }
        at += row;
      }
    });
  };
  r.add(std::move(s));
}

// QLinearWhere(condition, X, x_scale, x_zp, Y, y_scale, y_zp, z_scale, z_zp): X where the
// condition holds, else Y, each requantized to Z's parameters; numpy broadcast of the three.
void register_qlinear_where(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.domain = "com.microsoft";
  s.name = "QLinearWhere";
  s.min_inputs = s.max_inputs = 9;
  s.infer = [](ir::InferContext& ctx) {
    infer_int8(ctx, 1, "X");
    infer_int8(ctx, 4, "Y");
    ctx.set_output(0, ctx.input_dtype(1),
                   ir::broadcast_shapes({ctx.input_shape(0), ctx.input_shape(1), ctx.input_shape(4)}, ctx.node()));
  };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& cond = ctx.input(0);
    const Tensor& x = ctx.input(1);
    const Tensor& yv = ctx.input(4);
    if (cond.dtype() != DType::boolean) throw ctx.error("condition must be bool, got ", dtype_name(cond.dtype()));
    check_int8(ctx, x.dtype(), "X");
    if (yv.dtype() != x.dtype()) throw ctx.error("X is ", dtype_name(x.dtype()), " but Y is ", dtype_name(yv.dtype()));
    const QParam qx = read_qparam(ctx, 2, 3, x.dtype(), "x"), qy = read_qparam(ctx, 5, 6, x.dtype(), "y");
    const QParam qz = read_qparam(ctx, 7, 8, x.dtype(), "z");
    const Shape out = broadcast_shape({cond.shape(), x.shape(), yv.shape()}, ctx.node());
    Tensor& z = ctx.allocate_output(0, x.dtype(), out);
    dispatch_int8(x.dtype(), [&](auto tag) {
      using Q = typename decltype(tag)::type;
      const bool* pc = cond.data<bool>();
      const Q* px = x.data<Q>();
      const Q* py = yv.data<Q>();
      Q* pz = z.data<Q>();
      auto requant = [&](Q v, const QParam& q) {
        return saturate_round<Q>((static_cast<float>(v) - q.zero_point) * q.scale / qz.scale + qz.zero_point);
      };
      for_each_broadcast<3>(out, {cond.shape(), x.shape(), yv.shape()}, [&](int64_t i, const std::array<int64_t, 3>& o) {
        pz[i] = pc[o[0]] ? requant(px[o[1]], qx) : requant(py[o[2]], qy);
      });
    });
  };
  r.add(std::move(s));
}

// QGemm(A, a_scale, a_zp, B, b_scale, b_zp, C?, y_scale?, y_zp?), alpha, transA, transB:
// acc[m, n] = sum_k (A[m, k] - a_zp)(B[k, n] - b_zp[n]) + C[m, n] in integers (C is int32 in
// the scale a_scale * b_scale, broadcast to [M, N]); real = alpha * a_scale * b_scale[n] * acc;
// the output is that real value (float) without y_scale, else it quantized to y's parameters.
// b_scale and b_zp are per tensor or per column (N values).
void register_qgemm(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.domain = "com.microsoft";
  s.name = "QGemm";
  s.min_inputs = 6;
  s.max_inputs = 9;
  s.optional_inputs = {5};
  s.attrs = {{"alpha", ir::AttrType::f}, {"transA", ir::AttrType::i}, {"transB", ir::AttrType::i}};
  s.infer = [](ir::InferContext& ctx) {
    infer_int8(ctx, 0, "A");
    infer_int8(ctx, 3, "B");
    const ir::Node& n = ctx.node();
    const ir::PartialShape &as = ctx.input_shape(0), &bs = ctx.input_shape(3);
    DType out = DType::f32;
    if (ctx.num_inputs() > 7 && ctx.has_input(7)) out = ctx.num_inputs() > 8 && ctx.has_input(8) ? ctx.input_dtype(8) : DType::u8;
    if (!as.rank_known || !bs.rank_known) return ctx.set_output(0, out, ir::PartialShape::unknown_rank());
    if (as.rank() != 2 || bs.rank() != 2) throw ctx.error("A and B must be 2-D, got ", as.to_string(), " and ", bs.to_string());
    const ir::Dim m = as.dims[n.attr_i("transA", 0) ? 1 : 0], nn = bs.dims[n.attr_i("transB", 0) ? 0 : 1];
    ctx.set_output(0, out, ir::PartialShape(std::vector<ir::Dim>{m, nn}));
  };
  s.run = [](ir::RunContext& ctx) {
    const ir::Node& node = ctx.node();
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(3);
    check_int8(ctx, a.dtype(), "A");
    check_int8(ctx, b.dtype(), "B");
    if (a.rank() != 2 || b.rank() != 2)
      throw ctx.error("A and B must be 2-D, got ", shape_to_string(a.shape()), " and ", shape_to_string(b.shape()));
    const bool ta = node.attr_i("transA", 0) != 0, tb = node.attr_i("transB", 0) != 0;
    const int64_t M = a.shape()[ta ? 1 : 0], K = a.shape()[ta ? 0 : 1];
    const int64_t N = b.shape()[tb ? 0 : 1], KB = b.shape()[tb ? 1 : 0];
    if (K != KB) throw ctx.error("A is [", M, ", ", K, "] but B is [", KB, ", ", N, "] (after transA / transB)");
    const float alpha = node.attr_f("alpha", 1.0f);
    const QParam qa = read_qparam(ctx, 1, 2, a.dtype(), "a");
    // b_scale / b_zero_point: one value, or one per column
    const Tensor& bsc = ctx.input(4);
    if (bsc.dtype() != DType::f32) throw ctx.error("b_scale must be float32, got ", dtype_name(bsc.dtype()));
    if (bsc.size() != 1 && bsc.size() != N) throw ctx.error("b_scale must hold 1 or N = ", N, " values, got ", bsc.size());
    std::vector<float> sb(static_cast<size_t>(N)), zb(static_cast<size_t>(N), 0.0f);
    for (int64_t j = 0; j < N; ++j) sb[static_cast<size_t>(j)] = bsc.data<float>()[bsc.size() == 1 ? 0 : j];
    if (ctx.has_input(5)) {
      const Tensor& bz = ctx.input(5);
      if (bz.dtype() != b.dtype()) throw ctx.error("b_zero_point must be ", dtype_name(b.dtype()), " as B, got ", dtype_name(bz.dtype()));
      if (bz.size() != 1 && bz.size() != N) throw ctx.error("b_zero_point must hold 1 or N = ", N, " values, got ", bz.size());
      const std::vector<int64_t> z = bz.to_i64();
      for (int64_t j = 0; j < N; ++j) zb[static_cast<size_t>(j)] = static_cast<float>(z[bz.size() == 1 ? 0 : static_cast<size_t>(j)]);
    }
    const Tensor* c = ctx.num_inputs() > 6 && ctx.has_input(6) ? &ctx.input(6) : nullptr;
    if (c && c->dtype() != DType::i32) throw ctx.error("C must be int32, got ", dtype_name(c->dtype()));
    const bool quantized = ctx.num_inputs() > 7 && ctx.has_input(7);
    const DType out = quantized ? (ctx.num_inputs() > 8 && ctx.has_input(8) ? ctx.input(8).dtype() : DType::u8) : DType::f32;
    if (quantized) check_int8(ctx, out, "y_zero_point");
    const QParam qy = quantized ? read_qparam(ctx, 7, 8, out, "y") : QParam{};
    const Shape ys{M, N};
    if (c) broadcast_shape({c->shape(), ys}, node);  // C must broadcast to [M, N]
    const std::vector<int64_t> cs = c ? broadcast_strides(c->shape(), ys) : std::vector<int64_t>{};
    Tensor& y = ctx.allocate_output(0, out, ys);
    std::vector<int64_t> acc(static_cast<size_t>(M * N));
    dispatch_int8(a.dtype(), [&](auto atag) {
      using A = typename decltype(atag)::type;
      dispatch_int8(b.dtype(), [&](auto btag) {
        using B = typename decltype(btag)::type;
        const A* pa = a.data<A>();
        const B* pb = b.data<B>();
        const auto za = static_cast<int64_t>(qa.zero_point);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t j = 0; j < N; ++j) {
            const auto zbj = static_cast<int64_t>(zb[static_cast<size_t>(j)]);
            int64_t sum = 0;
            for (int64_t k = 0; k < K; ++k)
              sum += (static_cast<int64_t>(pa[ta ? k * M + m : m * K + k]) - za) *
                     (static_cast<int64_t>(pb[tb ? j * K + k : k * N + j]) - zbj);
            if (c) sum += c->data<int32_t>()[m * cs[0] + j * cs[1]];
            acc[static_cast<size_t>(m * N + j)] = sum;
          }
      });
    });
    auto real = [&](int64_t i) {
      return alpha * qa.scale * sb[static_cast<size_t>(i % N)] * static_cast<float>(acc[static_cast<size_t>(i)]);
    };
    if (!quantized) {
      float* py = y.data<float>();
      for (int64_t i = 0; i < M * N; ++i) py[i] = real(i);
      return;
    }
    dispatch_int8(out, [&](auto ytag) {
      using Y = typename decltype(ytag)::type;
      Y* py = y.data<Y>();
      for (int64_t i = 0; i < M * N; ++i) py[i] = saturate_round<Y>(real(i) / qy.scale + qy.zero_point);
    });
  };
  r.add(std::move(s));
}

float sigmoid(const ir::Node&, float x) { return 1.0f / (1.0f + std::exp(-x)); }
float leaky_relu(const ir::Node& n, float x) { return x >= 0 ? x : n.attr_f("alpha", 0.01f) * x; }

}  // namespace

void register_qlinear_ops(ir::OpRegistry& r) {
  register_unary_table(r, "QLinearSigmoid", {}, sigmoid);
  register_unary_table(r, "QLinearLeakyRelu", {{"alpha", ir::AttrType::f}}, leaky_relu);
  register_qlinear_binary(r, "QLinearAdd", qlinear_add);
  register_qlinear_binary(r, "QLinearMul", qlinear_mul);
  register_qlinear_softmax(r);
  register_qlinear_global_average_pool(r);
  register_qlinear_concat(r);
  register_qlinear_where(r);
  register_qgemm(r);
}

}  // namespace kiln::ops
