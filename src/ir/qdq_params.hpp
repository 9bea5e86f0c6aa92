#pragma once
// The scale and zero point of a QuantizeLinear or DequantizeLinear, as the QDQ passes
// (QdqToQLinear, QdqToFakeQuantize) can use them: constants, float32 scales that are positive
// and finite, one value (per tensor) or one per index of one axis of X, and none of opset 21's
// blocked / output_dtype forms.
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.hpp"

namespace kiln::transforms {

struct QdqParams {
  ir::Value* scale = nullptr;       // constant f32
  ir::Value* zero_point = nullptr;  // constant, or null
  std::vector<double> scales;
  std::vector<int64_t> zero_points;  // one per scale (0s when there is no zero point)
  DType zp_type = DType::undefined;  // undefined: no zero point (its type is not checked here)
  int64_t axis = -1;                 // -1: per tensor
};

// `n`'s parameters, X (its quantized or float side) of shape `xs`; nullopt and `why` when unusable.
std::optional<QdqParams> read_qdq_params(const ir::Node& n, const ir::PartialShape& xs, std::string* why);

}  // namespace kiln::transforms
