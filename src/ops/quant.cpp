// Quantisation ops: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear. (QLinearMatMul and
// MatMulInteger live in linalg.cpp with the matmul kernel, ONNX Runtime's QLinear* contrib ops
// in quant_qlinear.cpp.)
//
// Rounding is round-half-to-even (std::nearbyint in the default rounding mode), then
// saturation to the range of the 8-bit output type.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/narrow_types.hpp"
#include "core/onnx_dtype.hpp"
#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"
#include "ops/op_families.hpp"
#include "ops/quant_fake_quantize.hpp"
#include "ops/quant_util.hpp"

namespace kiln::ops {

namespace {

using ir::PartialShape;

// The integer types QuantizeLinear writes and DequantizeLinear reads through C++ types
// (int16 / uint16 since opset 21).
template <typename Fn>
decltype(auto) dispatch_q(DType t, Fn&& fn, const char* what) {
  switch (t) {
    case DType::i8: return fn(TypeTag<int8_t>{});
    case DType::u8: return fn(TypeTag<uint8_t>{});
    case DType::i16: return fn(TypeTag<int16_t>{});
    case DType::u16: return fn(TypeTag<uint16_t>{});
    default: throw_unsupported_dtype(t, what);
  }
}

// ... and the 8- / 4-bit formats (float8 since opset 19, int4 / uint4 since 21, float4e2m1
// since 23), held as bit patterns and converted by core/narrow_types.
bool is_q_type(DType t) {
  return t == DType::i8 || t == DType::u8 || t == DType::i16 || t == DType::u16 || is_narrow(t);
}


// Which scale / zero point each element of x uses: per tensor (one), per axis (a 1-D scale
// along `axis`), or blocked (opset 21: the scale has x's shape but ceil(D / block_size) along
// `axis`; block_size consecutive elements there share one).
struct ParamLayout {
  int64_t count = 1;       // number of parameters
  int64_t axis_dim = 1;    // x's size along the axis
  int64_t inner = 1;       // product of x's dims after the axis
  int64_t blocks = 1;      // the scale's size along the axis (blocked)
  int64_t block = 0;       // block_size; 0: per tensor / per axis
  int64_t index(int64_t i) const {
    if (count == 1) return 0;
    const int64_t a = (i / inner) % axis_dim;
    if (block == 0) return a;
    const int64_t outer = i / (inner * axis_dim);
    return (outer * blocks + a / block) * inner + i % inner;
  }
};

ParamLayout param_layout(const RunContext& ctx, const Shape& x, const Tensor& scale, const Tensor* zp) {
  ParamLayout lay;
  const ir::Node& n = ctx.node();
  const int64_t count = scale.size();
  // a one-element zero point goes with a one-element scale whatever their ranks ([] and [1])
  if (zp && zp->shape() != scale.shape() && !(zp->size() == 1 && count == 1))
    throw ctx.error("scale (shape ", shape_to_string(scale.shape()), ") and zero point (shape ",
                    shape_to_string(zp->shape()), ") must have the same shape");
  const int64_t block = n.attr_i("block_size", 0);
  if (block < 0) throw ctx.error("attribute 'block_size' must be >= 0, got ", block);
  const int64_t rank = static_cast<int64_t>(x.size());
  if (block == 0 && count == 1 && scale.rank() <= 1) return lay;  // per tensor
  const int64_t axis = normalize_axis(n.attr_i("axis", 1), std::max<int64_t>(rank, 1), n);
  if (rank == 0) throw ctx.error("a scale of shape ", shape_to_string(scale.shape()), " for a scalar input");
  lay.count = count;
  lay.axis_dim = x[static_cast<size_t>(axis)];
  for (int64_t d = axis + 1; d < rank; ++d) lay.inner *= x[static_cast<size_t>(d)];
  if (block == 0) {
    if (scale.rank() != 1 || count != lay.axis_dim)
      throw ctx.error("per-axis scale must be 1-D with ", lay.axis_dim, " elements (dim ", axis, " of ",
                      shape_to_string(x), "), got shape ", shape_to_string(scale.shape()));
    return lay;
  }
  // blocked: the scale has x's shape except ceil(D / block_size) along the axis
  bool ok = static_cast<int64_t>(scale.rank()) == rank;
  for (int64_t d = 0; ok && d < rank; ++d) {
    const int64_t want = d == axis ? (x[static_cast<size_t>(d)] + block - 1) / block : x[static_cast<size_t>(d)];
    ok = scale.shape()[static_cast<size_t>(d)] == want;
  }
  if (!ok)
    throw ctx.error("blocked scale (block_size ", block, ", axis ", axis, ") must have shape ",
                    "of x with ceil(", lay.axis_dim, " / ", block, ") along the axis; x ", shape_to_string(x),
                    ", scale ", shape_to_string(scale.shape()));
  lay.block = block;
  lay.blocks = scale.shape()[static_cast<size_t>(axis)];
  return lay;
}

// y = round(x / scale) + zero point for int4 / uint4 (clamped), x / scale + zero point for the
// float formats (rounded to nearest even, saturating unless `saturate` is 0 for float8).
void quantize_narrow(const RunContext& ctx, const Tensor& x, const ParamLayout& lay, const std::vector<double>& sc,
                     const Tensor* zp, Tensor& y) {
  const DType out = y.dtype();
  const bool integer = out == DType::i4 || out == DType::u4;
  const bool saturate = ctx.node().attr_i("saturate", 1) != 0;
  const std::vector<double> z = zp ? zp->to_f64() : std::vector<double>(static_cast<size_t>(lay.count), 0.0);
  const std::vector<double> xv = x.to_f64();
  auto* py = static_cast<uint8_t*>(y.raw());
  for (int64_t i = 0; i < x.size(); ++i) {
    const int64_t c = lay.index(i);
    const float v = static_cast<float>(xv[i]) / static_cast<float>(sc[c]);
    py[i] = integer ? narrow_from_float(out, std::nearbyint(v) + z[c])
                    : narrow_from_float(out, static_cast<double>(v) + z[c], saturate);
  }
}

// output_dtype (opset 21 Q, 23 DQ) when given, else `fallback`.
DType output_dtype(const ir::Node& n, DType fallback, const char* what) {
  if (!n.has_attr("output_dtype") || n.attr_i("output_dtype") == 0) return fallback;
  return dtype_from_onnx_code(static_cast<int>(n.attr_i("output_dtype")), cat(n.describe(), " ", what));
}

const std::vector<ir::AttrSpec> kQdqAttrs = {{"axis", ir::AttrType::i},         {"block_size", ir::AttrType::i},
                                             {"output_dtype", ir::AttrType::i}, {"saturate", ir::AttrType::i},
                                             {"precision", ir::AttrType::i}};

void register_quantize_linear(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "QuantizeLinear";
  s.since_version = 10;
  s.max_version = 23;
  s.min_inputs = 2;
  s.max_inputs = 3;
  s.attrs = kQdqAttrs;
  s.infer = [](ir::InferContext& ctx) {
    DType out = ctx.has_input(2) ? ctx.input_dtype(2) : DType::u8;
    out = output_dtype(ctx.node(), out, "output_dtype");
    if (ctx.has_input(2) && ctx.input_dtype(2) != DType::undefined && ctx.input_dtype(2) != out)
      throw ctx.error("output_dtype ", dtype_name(out), " differs from y_zero_point's ", dtype_name(ctx.input_dtype(2)));
    if (out != DType::undefined && !is_q_type(out))
      throw ctx.error("the output must be int8, uint8, int16, uint16, int4, uint4, float8 or float4e2m1, got ",
                      dtype_name(out));
    ctx.set_output(0, out, ctx.input_shape(0));
  };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& scale = ctx.input(1);
    const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    if (!is_floating(scale.dtype()))
      throw ctx.error("y_scale must be a float tensor, got ", dtype_name(scale.dtype()));
    const DType out = output_dtype(ctx.node(), zp ? zp->dtype() : DType::u8, "output_dtype");
    const ParamLayout lay = param_layout(ctx, x.shape(), scale, zp);
    std::vector<double> sc = scale.to_f64();
    std::vector<int64_t> z = zp ? zp->to_i64() : std::vector<int64_t>(static_cast<size_t>(lay.count), 0);
    if (zp && zp->dtype() != out)
      throw ctx.error("y_zero_point is ", dtype_name(zp->dtype()), ", output_dtype asks for ", dtype_name(out));
    Tensor& y = ctx.allocate_output(0, out, x.shape());
    if (is_narrow(out)) {
      if (!is_floating(x.dtype()) && x.dtype() != DType::i32)
        throw ctx.error("x must be a float or int32 tensor, got ", dtype_name(x.dtype()));
      quantize_narrow(ctx, x, lay, sc, zp, y);
      return;
    }
    dispatch_q(out, [&](auto qtag) {
      using Q = typename decltype(qtag)::type;
      Q* py = y.data<Q>();
      if (x.dtype() == DType::i32) {
        // numpy: int32 / float32 -> float64
        const int32_t* px = x.data<int32_t>();
        for (int64_t i = 0; i < x.size(); ++i) {
          const int64_t c = lay.index(i);
          py[i] = saturate_round<Q>(std::nearbyint(static_cast<double>(px[i]) / sc[c]) + static_cast<double>(z[c]));
        }
        return;
      }
      dispatch_float(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* px = x.data<T>();
        for (int64_t i = 0; i < x.size(); ++i) {
          const int64_t c = lay.index(i);
          const float v = static_cast<float>(px[i]) / static_cast<float>(sc[c]);
          py[i] = saturate_round<Q>(std::nearbyint(v) + static_cast<float>(z[c]));
        }
      }, ctx.node().describe().c_str());
    }, ctx.node().describe().c_str());
  };
  r.add(std::move(s));
}

void register_dequantize_linear(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "DequantizeLinear";
  s.since_version = 10;
  s.max_version = 23;
  s.min_inputs = 2;
  s.max_inputs = 3;
  s.attrs = kQdqAttrs;
  s.infer = [](ir::InferContext& ctx) {
    DType x = ctx.input_dtype(0);
    if (x != DType::undefined && !is_q_type(x) && x != DType::i32)
      throw ctx.error("x must be int8, uint8, int16, uint16, int32, int4, uint4, float8 or float4e2m1, got ",
                      dtype_name(x));
    // the scale's type (float32 before opset 19; float16 / bfloat16 too since), or output_dtype (23)
    DType out = ctx.input_dtype(1);
    if (out == DType::undefined) out = DType::f32;
    ctx.set_output(0, output_dtype(ctx.node(), out, "output_dtype"), ctx.input_shape(0));
  };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& scale = ctx.input(1);
    const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    if (!is_floating(scale.dtype()))
      throw ctx.error("x_scale must be a float tensor, got ", dtype_name(scale.dtype()));
    if (!is_q_type(x.dtype()) && x.dtype() != DType::i32)
      throw ctx.error("x must be int8, uint8, int16, uint16, int32, int4, uint4, float8 or float4e2m1, got ",
                      dtype_name(x.dtype()));
    if (zp && zp->dtype() != x.dtype())
      throw ctx.error("x_zero_point (", dtype_name(zp->dtype()), ") must have the element type of x (",
                      dtype_name(x.dtype()), ")");
    const DType out = output_dtype(ctx.node(), scale.dtype(), "output_dtype");
    if (!is_floating(out)) throw ctx.error("output_dtype must be a float type, got ", dtype_name(out));
    const ParamLayout lay = param_layout(ctx, x.shape(), scale, zp);
    std::vector<double> sc = scale.to_f64();
    Tensor& y = ctx.allocate_output(0, out, x.shape());
    // (value - zero point) * scale, the values read as doubles (exact for every x type: the
    // integers, and the 8- / 4-bit formats through their values)
    const std::vector<double> xv = x.to_f64();
    const std::vector<double> zv = zp ? zp->to_f64() : std::vector<double>(static_cast<size_t>(lay.count), 0.0);
    dispatch_float(out, [&](auto otag) {
      using O = typename decltype(otag)::type;
      O* py = y.data<O>();
      for (int64_t i = 0; i < x.size(); ++i) {
        const int64_t c = lay.index(i);
        py[i] = O(static_cast<float>(xv[i] - zv[c]) * static_cast<float>(sc[c]));
      }
    }, "DequantizeLinear");
  };
  r.add(std::move(s));
}

void register_dynamic_quantize_linear(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "DynamicQuantizeLinear";
  s.since_version = 11;
  s.min_outputs = s.max_outputs = 3;
  s.infer = [](ir::InferContext& ctx) {
    DType x = ctx.input_dtype(0);
    if (x != DType::undefined && x != DType::f32)
      throw ctx.error("x must be float, got ", dtype_name(x));
    ctx.set_output(0, DType::u8, ctx.input_shape(0));
    ctx.set_output(1, DType::f32, PartialShape(Shape{}));
    ctx.set_output(2, DType::u8, PartialShape(Shape{}));
  };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::f32) throw ctx.error("x must be float, got ", dtype_name(x.dtype()));
    const float* px = x.data<float>();
    // Range adjusted to include 0.
    float lo = 0.0f, hi = 0.0f;
    for (int64_t i = 0; i < x.size(); ++i) {
      lo = std::min(lo, px[i]);
      hi = std::max(hi, px[i]);
    }
    const float qmin = 0.0f, qmax = 255.0f;
    const float scale = (hi - lo) / (qmax - qmin);
    uint8_t zp = 0;
    if (scale != 0.0f && std::isfinite(scale)) {
      float initial = qmin - lo / scale;
      initial = std::clamp(initial, qmin, qmax);
      zp = static_cast<uint8_t>(std::nearbyint(initial));
    }
    Tensor& y = ctx.allocate_output(0, DType::u8, x.shape());
    uint8_t* py = y.data<uint8_t>();
    if (scale != 0.0f) {
      for (int64_t i = 0; i < x.size(); ++i)
        py[i] = saturate_round<uint8_t>(std::nearbyint(px[i] / scale) + static_cast<float>(zp));
    }  // all-zero input: scale 0, everything quantises to 0
    ctx.allocate_output(1, DType::f32, Shape{}).data<float>()[0] = scale;
    ctx.allocate_output(2, DType::u8, Shape{}).data<uint8_t>()[0] = zp;
  };
  r.add(std::move(s));
}

}  // namespace

void register_quant_ops(ir::OpRegistry& r) {
  register_quantize_linear(r);
  register_dequantize_linear(r);
  register_dynamic_quantize_linear(r);
  register_fake_quantize(r);  // kiln domain, quant_fake_quantize.cpp
}

}  // namespace kiln::ops
