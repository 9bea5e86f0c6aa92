#pragma once
// What the integer node kinds share (conv_integer.cpp: ConvInteger / QLinearConv,
// matmul_integer.cpp: MatMulInteger / QLinearMatMul): weights as oneDNN's int8 kernels take
// them, activation zero points, s8 activations moved to u8, requantization.
//
// oneDNN multiplies u8 activations by s8 weights. Weights w with zero point zw (u8 or s8,
// one per tensor or per output channel) become s8 weights w' plus a per-channel constant c,
// w - zw = w' + c[channel]:
//   u8 weights   w' = w - 128,  c = 128 - zw
//   s8 weights   w' = w,        c = -zw
// and a product sum over (x - zx)(w - zw) is the one over (x - zx) w' plus c times the sum of
// (x - zx): the node adds the second term in int32.
//
// Without VNNI, oneDNN's int8 kernels multiply with vpmaddubsw, which saturates pairs of
// products at 16 bits (255 * 128 * 2 > 32767): there w' is split once more, w' = lo + 128 hi,
// lo in [-64, 63] and hi in {-1, 0, 1}, and two products without saturation (255 * 64 * 2 <
// 32768) give the exact one.
#include <kiln/tensor.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include <cstdint>
#include <functional>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "ir/graph.hpp"

namespace kiln::cpu {

// oneDNN's int8 kernels on the ISA in use multiply without saturating (VNNI or AMX).
bool exact_int8_kernels();
// The ISA in use runs QDQ models as integer networks (QdqToQLinear): oneDNN's exact kernels, or
// kiln's 16-bit GEMM (gemm_s16.hpp: AVX2).
bool int8_network_kernels();

struct Int8Weights {
  std::vector<int8_t> main;  // w', or lo when split
  std::vector<int8_t> hi;    // empty unless split
  bool split() const { return !hi.empty(); }
};

// w' of `w` (u8 or s8, any shape, same element order), split when `split`.
Int8Weights s8_weights(const Tensor& w, bool split);

// c for `channels` output channels; `zw` (may be null: 0) holds 1 or `channels` values.
std::vector<int32_t> weight_offsets(const Tensor& w, const Tensor* zw, int64_t channels);

// B [K, N] packed for gemm_s16::run_u8s8, with its column sums after the packed bytes (what the
// activation zero point multiplies), when its values (`values(out)`: the weights less their zero
// points in the GEMM's order; false when one does not fit s8) are gemm_s16::pair_safe; `packed`
// empty when they are not. The verdict and the packed bytes are kept in the weights cache under
// `variant` (the use and what the values depend on), so the model's other plans (its other
// input shapes) neither derive the values nor check them again.
struct PackedU8S8 {
  dnnl::memory packed;                   // empty: the 16-bit GEMM
  const int32_t* column_sums = nullptr;  // N values, in `packed`'s memory
};
PackedU8S8 pack_u8s8_if_safe(const Tensor& source, const std::string& variant, int64_t K, int64_t N,
                             const std::function<bool(std::vector<int8_t>*)>& values);

// B - zb of a GEMM's B [K, N] (`b` row-major, s8 when `b_signed`, else u8; zb[n] per column) as
// s8 in `out`, when every value fits s8; false otherwise.
bool s8_weights_less_zero_points(const void* b, bool b_signed, int64_t K, const std::vector<int32_t>& zb,
                                 std::vector<int8_t>* out);

// w' (and, split, hi) packed into the primitive's layout `target` from the plain s8 layout
// `plain` of `w`, once per compiled model through the weights cache (`variant` names the use,
// e.g. "convinteger/g2"): the conversion runs only when the cache has no copy yet.
struct PackedInt8 {
  dnnl::memory main, hi;  // hi: empty unless split
};
PackedInt8 pack_int8_weights(const Tensor& w, bool split, const dnnl::memory::desc& plain,
                             const dnnl::memory::desc& target, const std::string& variant);

// The implementation name the counters show: oneDNN's, marked when the weights are split.
std::string int8_impl_name(const std::string& onednn_impl, bool split);

// The value of a one-element u8 / s8 zero point (a plain edge's data).
int32_t zero_point_value(DType dtype, const void* data);

// s8 activations as u8: v + 128 (the zero point moves with them, so x - zx is unchanged), on
// the stream's threads.
void s8_to_u8(const uint8_t* in, uint8_t* out, int64_t count);

// A constant f32 tensor of one value, or of `alt` values in one dim (QLinear* scales).
bool constant_scale(const ir::Value* v, int64_t alt = 1);

bool is_int8(DType t);  // u8 or s8

// What the integer nodes take of their operands (the `supports` checks): an activation zero
// point `zp` (null: none) of one value of the activation's type `x`, static; a weight zero
// point `zw` (null: none), constant, of the weights' type `w`: one value, or `channels` in one
// dim.
bool activation_zero_point_ok(const ir::Value* zp, DType x);
bool weight_zero_point_ok(const ir::Value* zw, DType w, int64_t channels);

// QLinearConv / QLinearMatMul: the per-channel multiplier x_scale * w_scale[c] / y_scale in
// float, as the reference kernels compute it, and the output's zero point and type (from the
// constant scales and y_zero_point the `supports` checks asked for).
struct Requantization {
  std::vector<float> mult;
  int64_t zp = 0;
  bool signed_out = false;  // s8 output, else u8
};
Requantization requantization(const Tensor& x_scale, const Tensor& w_scale, const Tensor& y_scale,
                              const Tensor& y_zero_point, int64_t channels);

// QLinearConv's requantization, as its reference kernel: round_half_even(acc * mult) (NaN: 0)
// + zp, saturated to Y.
template <typename Y>
Y requantize_conv(int32_t acc, float mult, int64_t zp) {
  float v = std::nearbyint(static_cast<float>(acc) * mult);
  if (std::isnan(v)) v = 0.0f;
  const int64_t q = static_cast<int64_t>(std::clamp(v, -1e9f, 1e9f)) + zp;
  return static_cast<Y>(std::clamp<int64_t>(q, std::numeric_limits<Y>::min(), std::numeric_limits<Y>::max()));
}

// QLinearMatMul's, as its reference kernel: round_half_even(acc * mult) + zp in float,
// saturated to Y (NaN: Y's lowest).
template <typename Y>
Y requantize_matmul(int32_t acc, float mult, int64_t zp) {
  const float v = std::nearbyint(static_cast<float>(acc) * mult) + static_cast<float>(zp);
  constexpr float lo = std::numeric_limits<Y>::min(), hi = std::numeric_limits<Y>::max();
  return static_cast<Y>(!(v >= lo) ? lo : v > hi ? hi : v);
}

}  // namespace kiln::cpu
