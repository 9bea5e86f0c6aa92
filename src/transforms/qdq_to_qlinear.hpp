#pragma once
// QdqToQLinear: the operators of a QDQ model (a float op between DequantizeLinear inputs and a
// QuantizeLinear output, as ONNX Runtime's and kiln's quantizers write them) become the
// integer operators that compute them on 8-bit data, so tensors stay 8-bit between layers:
//
//   DQ(x) , DQ(w) [, DQ(b) | b] -> Conv [-> Relu | Clip] -> Q   =>  QLinearConv
//   DQ(a) , DQ(b)               -> MatMul                  -> Q   =>  QLinearMatMul
//   DQ(a) , DQ(constant B)      -> MatMul (float result) [-> Add(bias)]  =>  com.microsoft MatMulIntegerToFloat
//   DQ(a) , DQ(b)               -> Add    [-> Relu | Clip] -> Q   =>  com.microsoft QLinearAdd
//   DQ(x) -> MaxPool | Reshape | Flatten | Transpose | Squeeze | Unsqueeze -> Q, with the same
//            scale, zero point and type on both sides                      =>  the op on x's 8-bit data
//
// Conditions (each skip is logged with the first that failed): scales and zero points are
// constants; activations (x, a, b) are u8 / s8 per tensor; Conv weights are constant, per
// tensor or per output channel (axis 0); MatMul's B is per tensor, or constant 2-D per column;
// the float op's output is read by the QuantizeLinear alone (and is no graph output). A Relu
// or Clip between the op and the QuantizeLinear is dropped only when it changes nothing: when
// its bounds quantize to qmin and qmax (the QuantizeLinear's range [(qmin - zp) s, (qmax - zp) s]
// lies inside the clamp, up to rounding), the saturation to [qmin, qmax] does its work. A bias becomes int32 in the product's
// scale x_scale * w_scale[m], rounded half to even (a bias DequantizeLinear in that scale, as
// quantizers write it, passes through unchanged).
//
// The results equal the QDQ graph's up to the rounding of the float op itself: QDQ computes
// the float op on dequantized values and rounds once at the QuantizeLinear; the integer ops
// compute exactly in int32 and round once, so the two may differ by one quantization step where
// the float result lies within float rounding of a rounding tie.
//
// The CPU plugin runs this pass (graph_optimizer.cpp) where its int8 kernels are exact and fast:
// oneDNN's with VNNI or AMX, kiln's 16-bit GEMM with AVX2 (there grouped convolutions stay
// float: `conv_kept`); elsewhere QDQ pairs become FakeQuantize and compute in f32.
#include <functional>
#include <string>

#include "ir/graph.hpp"
#include "transforms/pass_log.hpp"

namespace kiln::transforms {

inline constexpr const char* kQdqToQLinear = "QdqToQLinear";

struct QdqToQLinearOptions {
  // Why a Conv stays float although its pattern matches (the target has no int8 kernel for
  // it), or "" to take it; null: every Conv is taken.
  std::function<std::string(const ir::Node& conv)> conv_kept;
};

// Returns the number of operators replaced; `log` may be null.
size_t fuse_qdq_to_qlinear(ir::Graph& g, PassLog* log, const QdqToQLinearOptions& options = {});

}  // namespace kiln::transforms
