#include <kiln/error.hpp>

#include <map>
#include <string>
#include <vector>

#include "core/strings.hpp"
#include "ir/onnx_versions.hpp"
#include "ir/op_registry.hpp"
#include "ops/op_families.hpp"

namespace kiln::ops {

namespace {

// The revisions after opset 17 kiln implements: operator -> the newest (every older one too;
// ops not listed implement the revisions up to opset 17). Each is tested by a case of
// tests/data/onnx_new (tests/onnx_new/make_cases.py) unless it only adds element types.
//
// Many revisions only add element types: bfloat16 to the math ops (22), float8 (19), int4 /
// uint4 (21), float4 (23). kiln's kernels dispatch on every type kiln has (f16 and bf16
// included); a model with a type kiln does not have (float8, int4, float4) is refused when it
// is read, naming the tensor and its type.
const std::map<std::string, int>& newest_revisions() {
  static const std::map<std::string, int> v = {
      // opset 18: axes as an input of every Reduce*, noop_with_empty_axes
      {"ReduceL1", 18}, {"ReduceL2", 18}, {"ReduceLogSum", 18}, {"ReduceLogSumExp", 18}, {"ReduceMean", 18},
      {"ReduceProd", 18}, {"ReduceSumSquare", 18},
      {"ReduceMax", 20}, {"ReduceMin", 20},  // 20: bool
      {"Split", 18},                        // num_outputs
      {"ScatterElements", 18}, {"ScatterND", 18},  // reduction max / min
      {"LpPool", 22},                       // 18: ceil_mode
      {"Pad", 23},                          // 18: axes; 19: wrap; 21, 23: types
      {"Mish", 22},
      // opset 19
      {"AveragePool", 22},  // 19: dilations
      {"Cast", 23}, {"CastLike", 23},  // saturate applies to float8 only
      {"Equal", 19},  // 19: string (refused with the type)
      {"Identity", 23}, {"Reshape", 23}, {"Shape", 23}, {"Size", 23}, {"If", 23}, {"Loop", 23},
      {"Scan", 23},
      // opset 20
      {"Gelu", 20}, {"IsInf", 20}, {"IsNaN", 20}, {"ConstantOfShape", 23},
      // opset 21
      {"Flatten", 23}, {"Squeeze", 23}, {"Unsqueeze", 23}, {"Transpose", 23}, {"QLinearMatMul", 21},
      // opset 22: bfloat16
      {"Acos", 22}, {"Acosh", 22}, {"Asin", 22}, {"Asinh", 22}, {"Atan", 22}, {"Atanh", 22}, {"Cos", 22},
      {"Cosh", 22}, {"Sin", 22}, {"Sinh", 22}, {"Tan", 22}, {"Bernoulli", 22}, {"Conv", 22},
      {"ConvTranspose", 22}, {"Det", 22}, {"Dropout", 22}, {"Elu", 22}, {"EyeLike", 22}, {"GRU", 22},
      {"LSTM", 22}, {"RNN", 22}, {"GlobalAveragePool", 22}, {"GlobalLpPool", 22}, {"GlobalMaxPool", 22},
      {"HardSigmoid", 22}, {"HardSwish", 22}, {"InstanceNormalization", 22}, {"MaxPool", 22},
      {"MaxUnpool", 22}, {"NegativeLogLikelihoodLoss", 22},
      {"RandomNormal", 22}, {"RandomNormalLike", 22}, {"RandomUniform", 22}, {"RandomUniformLike", 22},
      {"RoiAlign", 22}, {"Round", 22}, {"Selu", 22}, {"Softplus", 22}, {"Softsign", 22},
      {"ThresholdedRelu", 22},
  };
  return v;
}

}  // namespace

void register_all_ops(ir::OpRegistry& r) {
  register_elementwise_ops(r);
  register_nn_ops(r);
  register_linalg_ops(r);
  register_shape_ops(r);
  register_reduction_ops(r);
  register_quant_ops(r);
  register_qlinear_ops(r);
  register_misc_ops(r);
  register_control_flow_ops(r);
  register_string_ops(r);  // after elementwise: extends Equal
  register_sequence_ops(r);
  // an operator listed must be registered, and its revision must exist in ONNX
  std::vector<std::string> bad;
  for (const auto& [op, newest] : newest_revisions()) {
    ir::OpSchema* s = r.find_mutable("", op);
    if (!s || ir::onnx_op_version(op, newest) != newest) {
      bad.push_back(cat(op, "-", newest));
      continue;
    }
    if (s->max_version < newest) s->max_version = newest;
  }
  KILN_CHECK(bad.empty(), cat("ops: the revision table names unregistered or unknown revisions: ", join(bad, ", ")));
  // the ops that take the 8- / 4-bit types (ONNX allows them in these; the movers copy bytes)
  for (const char* op : {"Cast", "CastLike", "QuantizeLinear", "DequantizeLinear", "Identity", "Reshape",
                         "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Shape", "Size", "If", "Loop", "Scan"}) {
    ir::OpSchema* s = r.find_mutable("", op);
    KILN_CHECK(s, cat("ops: ", op, " is not registered"));
    s->takes_narrow_types = true;
  }
}

// Every op above is in the process's registry (ir/op_registry.hpp: providers).
namespace {
[[maybe_unused]] const bool kRegistered = ir::OpRegistry::add_provider(&register_all_ops);
}  // namespace

}  // namespace kiln::ops
