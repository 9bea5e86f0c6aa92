#pragma once
// QdqToFakeQuantize: QuantizeLinear -> DequantizeLinear on an activation (the Q input is not
// a constant; weight QDQ is left to constant folding) becomes one kiln FakeQuantize
// (domain "kiln", levels = 256, ops/quant_fake_quantize.cpp). Scales and zero points must
// be constants, per tensor or per axis, u8 or i8, scales positive; the Q output must be read
// by the DequantizeLinear only, and X must be f32. With [qmin, qmax] the range of the
// quantised type:
//   input_low  = (qmin - zp_q)  * scale_q,   input_high  = (qmax - zp_q)  * scale_q
//   output_low = (qmin - zp_dq) * scale_dq,  output_high = (qmax - zp_dq) * scale_dq
// (a per-axis parameter becomes a [C, 1, ..., 1] tensor that broadcasts along its axis).
//
// Equality with the pair: FakeQuantize rounds ties to even on the grid anchored at 0, as
// QuantizeLinear's nearbyint(x / scale) does, so ties and out-of-range inputs give the same
// result exactly when the ranges above are exact in f32 (e.g. power-of-two scales). In
// general QuantizeLinear rounds x / scale to f32 before nearbyint and FakeQuantize works in
// double from f32-rounded ranges: an input within f32 rounding of a tie (or of the clamp
// boundary) can then land one quantisation step (one scale) away; elsewhere the two agree
// to f32 rounding. NaN: the pair gives output_low, FakeQuantize NaN.
#include "ir/graph.hpp"
#include "transforms/pass_log.hpp"

namespace kiln::transforms {

inline constexpr const char* kQdqToFakeQuantize = "QdqToFakeQuantize";

// Returns the number of pairs replaced; `log` may be null.
size_t fuse_qdq_to_fake_quantize(ir::Graph& g, PassLog* log);

}  // namespace kiln::transforms
