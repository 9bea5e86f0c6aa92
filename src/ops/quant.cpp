// Quantisation ops: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear.
// (QLinearMatMul and MatMulInteger live in linalg.cpp with the matmul kernel.)
//
// Rounding is round-half-to-even (std::nearbyint in the default rounding mode), then
// saturation to the range of the 8-bit output type.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"
#include "ops/op_families.hpp"
#include "ops/quant_fake_quantize.hpp"

namespace kiln::ops {

namespace {

using ir::PartialShape;

template <typename Q, typename F>
Q saturate_round(F v) {
  F r = std::nearbyint(v);
  constexpr F lo = static_cast<F>(std::numeric_limits<Q>::min());
  constexpr F hi = static_cast<F>(std::numeric_limits<Q>::max());
  if (!(r >= lo)) r = lo;  // NaN -> lo
  if (r > hi) r = hi;
  return static_cast<Q>(r);
}

template <typename Fn>
decltype(auto) dispatch_q8(DType t, Fn&& fn, const char* what) {
  switch (t) {
    case DType::i8: return fn(TypeTag<int8_t>{});
    case DType::u8: return fn(TypeTag<uint8_t>{});
    default: throw_unsupported_dtype(t, what);
  }
}

// Per-tensor or per-axis layout of scale / zero point over x: element i of x uses
// parameter (i / inner) % count.
struct AxisLayout {
  int64_t count = 1;  // number of parameters
  int64_t inner = 1;  // product of dims after the axis
};

AxisLayout axis_layout(const RunContext& ctx, const Shape& x, const Tensor& scale, const Tensor* zp) {
  AxisLayout lay;
  const int64_t n = scale.size();
  if (zp && zp->size() != n)
    throw ctx.error("scale (shape ", shape_to_string(scale.shape()), ") and zero point (shape ",
                    shape_to_string(zp->shape()), ") must have the same shape");
  if (n == 1 && scale.rank() <= 1) return lay;  // per tensor
  if (scale.rank() != 1)
    throw ctx.error("scale must be a scalar or a 1-D tensor, got shape ", shape_to_string(scale.shape()));
  const int64_t rank = static_cast<int64_t>(x.size());
  const int64_t axis = normalize_axis(ctx.node().attr_i("axis", 1), rank, ctx.node());
  if (rank == 0 || x[axis] != n)
    throw ctx.error("per-axis scale has ", n, " elements but input dim ", axis, " of ", shape_to_string(x), " is ",
                    rank == 0 ? 0 : x[axis]);
  lay.count = n;
  for (int64_t d = axis + 1; d < rank; ++d) lay.inner *= x[d];
  return lay;
}

void register_quantize_linear(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "QuantizeLinear";
  s.since_version = 10;
  s.min_inputs = 2;
  s.max_inputs = 3;
  s.attrs = {{"axis", ir::AttrType::i}};
  s.infer = [](ir::InferContext& ctx) {
    DType out = DType::u8;
    if (ctx.has_input(2)) {
      out = ctx.input_dtype(2);
      if (out != DType::undefined && out != DType::u8 && out != DType::i8)
        throw ctx.error("y_zero_point must be uint8 or int8, got ", dtype_name(out));
    }
    ctx.set_output(0, out, ctx.input_shape(0));
  };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& scale = ctx.input(1);
    const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    if (!is_floating(scale.dtype()))
      throw ctx.error("y_scale must be a float tensor, got ", dtype_name(scale.dtype()));
    const DType out = zp ? zp->dtype() : DType::u8;
    AxisLayout lay = axis_layout(ctx, x.shape(), scale, zp);
    std::vector<double> sc = scale.to_f64();
    std::vector<int64_t> z = zp ? zp->to_i64() : std::vector<int64_t>(static_cast<size_t>(lay.count), 0);
    Tensor& y = ctx.allocate_output(0, out, x.shape());
    dispatch_q8(out, [&](auto qtag) {
      using Q = typename decltype(qtag)::type;
      Q* py = y.data<Q>();
      if (x.dtype() == DType::i32) {
        // numpy: int32 / float32 -> float64
        const int32_t* px = x.data<int32_t>();
        for (int64_t i = 0; i < x.size(); ++i) {
          const int64_t c = (i / lay.inner) % lay.count;
          py[i] = saturate_round<Q>(std::nearbyint(static_cast<double>(px[i]) / sc[c]) + static_cast<double>(z[c]));
        }
        return;
      }
      dispatch_float(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* px = x.data<T>();
        for (int64_t i = 0; i < x.size(); ++i) {
          const int64_t c = (i / lay.inner) % lay.count;
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
  s.min_inputs = 2;
  s.max_inputs = 3;
  s.attrs = {{"axis", ir::AttrType::i}};
  s.infer = [](ir::InferContext& ctx) {
    DType x = ctx.input_dtype(0);
    if (x != DType::undefined && x != DType::u8 && x != DType::i8 && x != DType::i32)
      throw ctx.error("x must be int8, uint8 or int32, got ", dtype_name(x));
    ctx.set_output(0, DType::f32, ctx.input_shape(0));
  };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& scale = ctx.input(1);
    const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    if (!is_floating(scale.dtype()))
      throw ctx.error("x_scale must be a float tensor, got ", dtype_name(scale.dtype()));
    if (zp && zp->dtype() != x.dtype())
      throw ctx.error("x_zero_point (", dtype_name(zp->dtype()), ") must have the element type of x (",
                      dtype_name(x.dtype()), ")");
    AxisLayout lay = axis_layout(ctx, x.shape(), scale, zp);
    std::vector<double> sc = scale.to_f64();
    std::vector<int64_t> z = zp ? zp->to_i64() : std::vector<int64_t>(static_cast<size_t>(lay.count), 0);
    Tensor& y = ctx.allocate_output(0, DType::f32, x.shape());
    float* py = y.data<float>();
    auto body = [&](auto tag) {
      using Q = typename decltype(tag)::type;
      const Q* px = x.data<Q>();
      for (int64_t i = 0; i < x.size(); ++i) {
        const int64_t c = (i / lay.inner) % lay.count;
        py[i] = static_cast<float>(static_cast<int64_t>(px[i]) - z[c]) * static_cast<float>(sc[c]);
      }
    };
    switch (x.dtype()) {
      case DType::i8: body(TypeTag<int8_t>{}); break;
      case DType::u8: body(TypeTag<uint8_t>{}); break;
      case DType::i32: body(TypeTag<int32_t>{}); break;
      default: throw ctx.error("x must be int8, uint8 or int32, got ", dtype_name(x.dtype()));
    }
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
