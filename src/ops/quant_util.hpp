#pragma once
// Helpers of the quantized kernels (quant.cpp, quant_qlinear.cpp, linalg.cpp's QLinearMatMul,
// nn_pool.cpp's QLinearAveragePool): rounding to an 8-bit type, and the per-tensor scale and
// zero point of ONNX Runtime's QLinear* operators.
#include <kiln/tensor.hpp>

#include <cmath>
#include <cstdint>
#include <limits>

#include "core/dispatch.hpp"
#include "ir/op_registry.hpp"

namespace kiln::ops {

// round half to even (std::nearbyint in the default rounding mode), then saturate to Q's range;
// NaN goes to Q's lowest value
template <typename Q, typename F>
Q saturate_round(F v) {
  F r = std::nearbyint(v);
  constexpr F lo = static_cast<F>(std::numeric_limits<Q>::min());
  constexpr F hi = static_cast<F>(std::numeric_limits<Q>::max());
  if (!(r >= lo)) r = lo;
  if (r > hi) r = hi;
  return static_cast<Q>(r);
}

// A per-tensor quantization: real = (q - zero_point) * scale.
struct QParam {
  float scale = 1.0f;
  float zero_point = 0.0f;
};

// Input `scale_at` (one float32 value) and the optional input `zp_at` (one value of `type`,
// the tensor's own 8-bit type; absent: 0). `name` names them in errors ("X" -> "X_scale").
QParam read_qparam(const ir::RunContext& ctx, size_t scale_at, size_t zp_at, DType type, const char* name);

// uint8 / int8 only (what every QLinear* op takes); anything else is an error naming `what`.
void check_int8(const ir::RunContext& ctx, DType t, const char* what);

// Calls fn(TypeTag<uint8_t>{}) or fn(TypeTag<int8_t>{}) (t checked by check_int8 first).
template <typename Fn>
decltype(auto) dispatch_int8(DType t, Fn&& fn) {
  return t == DType::u8 ? fn(TypeTag<uint8_t>{}) : fn(TypeTag<int8_t>{});
}

}  // namespace kiln::ops
