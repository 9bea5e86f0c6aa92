#pragma once
// The scale and zero point of a QuantizeLinear or DequantizeLinear, as the QDQ passes
// (QdqToQLinear, QdqToFakeQuantize, HoistQdqAboveLayout) and the attention pattern use them: constants, float32 scales that are positive
// and finite, one value (per tensor) or one per index of one axis of X, and none of opset 21's
// blocked / output_dtype forms.
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.hpp"

namespace kiln::ir {

struct QdqParams {
  Value* scale = nullptr;       // constant f32
  Value* zero_point = nullptr;  // constant, or null
  std::vector<double> scales;
  std::vector<int64_t> zero_points;  // one per scale (0s when there is no zero point)
  DType zp_type = DType::undefined;  // undefined: no zero point (its type is not checked here)
  int64_t axis = -1;                 // -1: per tensor
  // The 8-bit (or other) type of the quantized side: the zero point's, uint8 when there is none.
  DType quantized_type() const { return zp_type == DType::undefined ? DType::u8 : zp_type; }
};

// `n`'s parameters, X (its quantized or float side) of shape `xs`; nullopt and `why` when unusable.
std::optional<QdqParams> read_qdq_params(const Node& n, const PartialShape& xs, std::string* why);

}  // namespace kiln::ir
