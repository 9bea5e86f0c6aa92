#pragma once
// HoistQdqAboveLayout: a per-tensor QuantizeLinear -> DequantizeLinear pair on the output of a
// Reshape or Transpose moves above it, onto the layout op's input:
//
//   x -> Reshape | Transpose -> Q -> DQ -> readers   =>   x -> Q -> DQ -> Reshape | Transpose -> readers
//
// and a pair that then follows a DequantizeLinear with the same scale, zero point and type
// (x already on that 8-bit grid) disappears. Exact: a per-tensor pair acts on each element
// alone, the layout op only moves elements, and quantizing a value of the grid gives it back.
// Quantizers put pairs on every MatMul input (ONNX Runtime's quantize_static on a transformer:
// after the Transpose that splits heads); moved up to the projections, they leave the
// Reshape / Transpose / MatMul chain the attention pattern recognises. Runs before the
// transformer patterns, where the graph has QuantizeLinear nodes.
#include "ir/graph.hpp"
#include "transforms/pass_log.hpp"

namespace kiln::transforms {

inline constexpr const char* kHoistQdqAboveLayout = "HoistQdqAboveLayout";

// Returns the number of pairs moved or removed; `log` may be null.
size_t hoist_qdq_above_layout(ir::Graph& g, PassLog* log);

}  // namespace kiln::transforms
