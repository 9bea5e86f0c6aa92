#pragma once
// Post-training static quantization (`kiln quantize` without --dynamic): a QDQ model, the form
// ONNX Runtime's quantize_static writes and every runtime reads. Activations are uint8 (or
// int8) with a scale and zero point calibrated on the user's samples (or a scale alone, the
// range symmetric about 0); weights are int8, symmetric (zero
// point 0), per tensor or per output channel / column; a Conv bias is int32 in the scale
// x_scale * w_scale[m].
//
//   Conv(X, W, B) [-> Relu | Clip]  ->  DQ(Q(X)), DQ(W_q), DQ(B_q) -> Conv [-> Relu | Clip] -> Q -> DQ
//   MatMul(A, B), B a 2-D weight    ->  DQ(Q(A)), DQ(B_q) -> MatMul (its result float: the bias Add,
//                                       activation or LayerNorm after it stays float)
//   Gemm(A, B [, C]), B a 2-D weight, no transA  ->  DQ(Q(A)), DQ(B_q) [, DQ(C_q) int32 when C is one
//                                       value per column] -> Gemm (its result float, as a MatMul's)
//   Add(A, B) [-> Relu | Clip], both operands quantized already (a residual sum of int8
//                                   branches)  ->  DQ(Q(A)), DQ(Q(B)) -> Add [-> Relu | Clip] -> Q -> DQ
//   Concat of quantized activations that only it reads: its output is calibrated and every input
//   takes the output's scale and zero point, so the concat copies 8-bit data
//   MaxPool, Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Slice on a quantized tensor: the
//   output is quantized with its input's scale and zero point (it only moves or selects values)
//
// Attention's MatMuls of two activations stay float (kiln fuses attention in float). A Relu or
// Clip that alone reads a Conv's or Add's output is calibrated after it, with no
// QDQ in between (runtimes fold it into the op's saturation). Each quantized tensor gets one
// Q -> DQ pair that all its readers read; a graph output keeps its float value.
#include <kiln/tensor.hpp>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tools/common/quantize.hpp"

namespace onnx {
class ModelProto;
}

namespace kiln {
class Core;
}

namespace kiln::tools {

struct StaticQuantizeOptions {
  bool per_channel = false;
  bool reduce_range = false;           // 7-bit weights: [-64, 64]
  bool signed_activations = false;     // int8 activations (else uint8)
  bool symmetric_activations = false;  // ranges symmetric about 0: zero point 0 (int8) / 128 (uint8)
  std::set<std::string> exclude;                                   // node names left in float
  std::set<std::string> op_types = {"Conv", "MatMul", "Gemm", "Add", "Concat", "MaxPool"};  // + the moving ops after them
};

// Folds each BatchNormalization (constant parameters) that alone reads a Conv's output (constant
// float weights) into the Conv's weights and bias, as quantizers' pre-processing does: the
// folded weights quantize once, and no float op sits between the Conv and its activation.
// Run before calibrating. Returns how many it folded.
size_t fold_batch_norms(onnx::ModelProto& model, const std::string& base_dir);

// The activation tensors whose range calibration must measure, in graph order (tensors that
// share another's parameters are not listed). Throws kiln::Error for a model it cannot
// quantize (opset below 13 with per_channel, below 10 otherwise).
std::vector<std::string> tensors_to_calibrate(const onnx::ModelProto& model, const StaticQuantizeOptions& options);

// The calibration methods: minmax (the observed range), percentile (the range that holds
// `percentile` % of the magnitudes), entropy (the clipping threshold whose 8-bit histogram is
// closest to the observed one in KL divergence, as TensorRT calibrates). The histogram methods
// need a second pass over the samples, once the minmax pass has set the histogram range.
class RangeCalibrator {
 public:
  RangeCalibrator(std::string method, double percentile = 99.999);  // throws for an unknown method
  bool needs_histogram() const { return method_ != "minmax"; }
  void observe_range(const std::string& tensor, const Tensor& t);      // pass 1
  void observe_histogram(const std::string& tensor, const Tensor& t);  // pass 2 (histogram methods)
  // [lo, hi] per tensor, each including 0.
  std::map<std::string, std::pair<float, float>> ranges() const;

 private:
  struct Stats {
    float lo = 0, hi = 0;
    std::vector<double> hist;  // |x| over [0, max(|lo|, |hi|)]
  };
  float threshold(const Stats& s) const;
  std::string method_;
  double percentile_;
  std::map<std::string, Stats> stats_;
};

// Measures `tensors` of the float `model` on `samples` (one tensor per model input each): the
// model with them as extra outputs, compiled by `core` in f32 and run on every sample, once for
// the ranges and, for the histogram methods, once more. Returns calibrator.ranges().
std::map<std::string, std::pair<float, float>> calibrate(Core& core, const onnx::ModelProto& model,
                                                         const std::string& base_dir,
                                                         const std::vector<std::string>& tensors,
                                                         const std::vector<std::vector<Tensor>>& samples,
                                                         RangeCalibrator& calibrator);

// Rewrites `model`'s main graph into QDQ form with these activation ranges (every tensor
// tensors_to_calibrate listed). `base_dir`: where external weight files live.
QuantizeReport quantize_static(onnx::ModelProto& model, const std::string& base_dir,
                               const StaticQuantizeOptions& options,
                               const std::map<std::string, std::pair<float, float>>& ranges);

}  // namespace kiln::tools
