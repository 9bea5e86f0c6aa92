#pragma once
// Post-training dynamic quantization of an ONNX model (`kiln quantize --dynamic`), in the form
// ONNX Runtime's quantize_dynamic writes and any runtime reads:
//
//   MatMul(A, B)      -> DynamicQuantizeLinear(A) -> MatMulInteger(A_q, B_q, A_zp, 0)
//                        -> Cast(float) -> Mul(A_scale * B_scale)
//   Conv(X, W[, b])   -> DynamicQuantizeLinear(X) -> ConvInteger(X_q, W_q, X_zp, 0)
//                        -> Cast(float) -> Mul(X_scale * W_scale) [-> Add(b)]
//
// for MatMul with a constant 2-D float B and Conv with constant float weights. Weights become
// int8, symmetric (zero point 0, scale max|w| / 127), per tensor or, with per_channel, per output
// column / channel (the zero point stays one scalar 0: ORT's ConvInteger takes no per-channel
// one; the scales per channel live in the Mul); activations are quantized to uint8 at run time
// over each tensor's range.
// An activation read by several quantized nodes is quantized once.
#include <set>
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
}

namespace kiln::tools {

struct QuantizeOptions {
  bool per_channel = false;
  std::set<std::string> exclude;                        // node names left in float
  std::set<std::string> op_types = {"MatMul", "Conv"};  // the op types to quantize
};

struct QuantizeReport {
  std::vector<std::string> quantized;  // "name (MatMul)"
  std::vector<std::string> skipped;    // "name (MatMul): why"
};

// Rewrites `model`'s main graph in place. `base_dir`: where external weight files live.
// Throws kiln::Error for a model it cannot rewrite as a whole (opset below 11).
QuantizeReport quantize_dynamic(onnx::ModelProto& model, const std::string& base_dir, const QuantizeOptions& options);

}  // namespace kiln::tools
