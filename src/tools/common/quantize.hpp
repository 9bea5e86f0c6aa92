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
#include <kiln/tensor.hpp>

#include <set>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace onnx {
class AttributeProto;
class GraphProto;
class ModelProto;
}

namespace kiln::tools {

struct QuantizeOptions {
  bool per_channel = false;
  bool reduce_range = false;  // 7-bit weights: [-64, 64]
  std::set<std::string> exclude;                        // node names left in float
  std::set<std::string> op_types = {"MatMul", "Conv"};  // the op types to quantize
};

struct QuantizeReport {
  std::vector<std::string> quantized;  // "name (MatMul)"
  std::vector<std::string> skipped;    // "name (MatMul): why"
};

// Shared by the dynamic and static quantizers (quantize_static.hpp):

// Symmetric int8 weights: q = round(w / scale) in [-qmax, qmax], scale = max|w| / qmax over the
// whole tensor or, with per_channel, per index along `axis` (1 where a channel is all zero);
// qmax 127, or 64 for 7-bit weights (reduce_range: no two of one sign overflow the 16-bit pair
// sums of vpmaddubsw with u8 activations, 255 x 128 < 2^15).
std::pair<Tensor, std::vector<float>> quantize_weight_symmetric(const Tensor& w, size_t axis, bool per_channel,
                                                                bool reduce_range = false);

// Unused names in a graph: fresh("x") is "x", then "x_1", ...
class GraphNames {
 public:
  explicit GraphNames(const onnx::GraphProto& g);
  std::string fresh(const std::string& base);

 private:
  std::unordered_set<std::string> taken_;
};

// `t` as an initializer of `g` named `name`.
void add_initializer(onnx::GraphProto& g, const std::string& name, const Tensor& t);

// An attribute `name` holding the integer `v`.
onnx::AttributeProto int_attribute(const std::string& name, int64_t v);

// Initializers no node (nor subgraph, nor graph output) reads any more go, with their
// graph-input entries (old IR versions).
void drop_unread_initializers(onnx::GraphProto& g);

// The ONNX opset `model` imports.
int onnx_opset(const onnx::ModelProto& model);

// Rewrites `model`'s main graph in place. `base_dir`: where external weight files live.
// Throws kiln::Error for a model it cannot rewrite as a whole (opset below 11).
QuantizeReport quantize_dynamic(onnx::ModelProto& model, const std::string& base_dir, const QuantizeOptions& options);

}  // namespace kiln::tools
