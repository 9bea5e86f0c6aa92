#pragma once
// QuantizedConvolution (quantized_convolution.cpp): a QLinearConv on oneDNN's int8 convolution
// with the requantization in the primitive, 8-bit channels-last in and out, so a chain of them
// (a network from QdqToQLinear) never leaves 8 bits. Where its weights and ISA allow
// (quantized_convolution_supports); ConvInteger's node computes the other QLinearConvs.
//
// FuseQLinearConvAndClip gives it a clamp of its 8-bit output (a Relu that a symmetric range
// keeps) as a clip post-op after the rest.
//
// FuseQLinearConvAndAdd gives it a residual sum (a QLinearAdd of its output a and another 8-bit
// tensor b) as post-ops that compute what the pair does, in registers: the convolution's
// requantized value round(x_scale w_scale[m] / a_scale (acc + bias)) clamped to a's range less
// a_zp (eltwise round and clip), times a_scale / c_scale (linear), plus b_scale / c_scale
// (b - b_zp) (sum), rounded, + c_zp, saturated: the QLinearAdd's own formula on the a the
// convolution would have written.
#include "cpu/node.hpp"

namespace kiln::cpu {

// Without VNNI (kiln's kernels: gemm_s16, depthwise_s8), why a convolution of `group` groups
// and weights `w` [M, C / group, kernel...] has no exact int8 kernel, or "" when it has one:
// 2-D, and no groups or one channel per group (depthwise, a window of at most 514 taps).
std::string s16_convolution_unsupported(int64_t group, const Shape& w);

// The QLinearAdd a QuantizedConvolution absorbs: the scale and zero point of the convolution's
// own output as the Add reads it, the other operand's, the sum's (its new output's).
struct QuantizedSum {
  float own_scale = 1;
  int32_t own_zero_point = 0;
  float other_scale = 1;
  int32_t other_zero_point = 0;
  float out_scale = 1;
  int32_t out_zero_point = 0;
};

class QuantizedSumHost {
 public:
  virtual ~QuantizedSumHost() = default;
  // Called before prepare(): from now on the node accumulates into the input the caller adds
  // next (Graph::add_input) and computes `sum`; false (and `why`, the node unchanged) when
  // oneDNN would not keep an int8 JIT kernel for it.
  virtual bool take_sum(const QuantizedSum& sum, std::string* why) = 0;
  // Called before prepare(), after any take_sum: the node clamps its 8-bit output to [lo, hi]
  // (a Clip on it, in the output's type); false (and `why`) when oneDNN would not keep an int8
  // JIT kernel for it.
  virtual bool take_clamp(int32_t lo, int32_t hi, std::string* why) = 0;
};

}  // namespace kiln::cpu
