#pragma once
// FuseMatMulIntegerToFloat: a dynamically quantized projection (ONNX Runtime's quantize_dynamic,
// `kiln quantize --dynamic`) written as four ONNX ops,
//
//   MatMulInteger(A, B, a_zp?, b_zp?) -> Cast(to float) -> Mul(_, Mul(a_scale, b_scale)) [-> Add(bias)]
//
// becomes com.microsoft MatMulIntegerToFloat(A, B, a_scale, b_scale, a_zp, b_zp [, bias]), which
// scales the int32 product to float (and adds the bias) as it is stored, where the four nodes
// moved the [M, N] result through memory three or four times (BERT-base, AVX2: the Casts and
// scale Muls were 15 of 134 ms). Same arithmetic: float(acc) * (a_scale * b_scale[n]) + bias[n],
// the scale product rounded once as the Mul computes it.
// Conditions (each skip logged): B a constant 8-bit [K, N]; a_scale one f32 value (a
// DynamicQuantizeLinear's output or a constant); b_scale a constant f32 of one value or N ([N]);
// the int32 result read by the Cast alone, its float result by the Mul alone (and neither a
// graph output); a bias Add is taken when it alone reads the Mul's result and adds a constant
// f32 [N].
//
// FuseConvIntegerToFloat: the same for a dynamically quantized convolution,
//
//   ConvInteger(x, w, x_zp?, w_zp?) -> Cast(to float) -> Mul(_, Mul(x_scale, w_scale)) [-> Add(bias)]
//
// becomes kiln ConvIntegerToFloat(x, w, x_scale, w_scale, x_zp, w_zp [, bias]) with the window's
// attributes (ops/nn_conv.cpp), which scales and adds the bias as it writes its output. w_scale
// and the bias hold one value per output channel as they broadcast along axis 1 ([M, 1, 1], what
// the quantizers write), w_scale may hold one value.
#include "ir/graph.hpp"
#include "transforms/pass_log.hpp"

namespace kiln::transforms {

inline constexpr const char* kFuseMatMulIntegerToFloat = "FuseMatMulIntegerToFloat";
inline constexpr const char* kFuseConvIntegerToFloat = "FuseConvIntegerToFloat";

// Returns the number of MatMulInteger nodes fused; `log` may be null.
size_t fuse_matmul_integer_to_float(ir::Graph& g, PassLog* log);
// Returns the number of ConvInteger nodes fused; `log` may be null.
size_t fuse_conv_integer_to_float(ir::Graph& g, PassLog* log);

}  // namespace kiln::transforms
