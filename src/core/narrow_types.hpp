#pragma once
// Values of the 8- and 4-bit formats (DType::f8e4m3fn ... f4e2m1), which kiln holds as bit
// patterns (kiln::narrow_bits). The ONNX Cast-23 rules:
//   float8: round to nearest even; with `saturate` (the default) values past the largest
//           finite one, and +-inf, become +-that largest value; without it they become NaN
//           (e5m2: +-inf). NaN stays NaN. The FNUZ formats have no negative zero (-0 -> 0).
//   float4e2m1: round to nearest even, always saturating; NaN -> +6 (it has no NaN).
//   int4 / uint4: from a float, round half to even and clamp to [-8, 7] / [0, 15];
//           from an integer, keep the low 4 bits (like any integer narrowing).
#include <kiln/dtype.hpp>

#include <cstdint>

namespace kiln {

// The value a bit pattern stands for (exact in float).
float narrow_to_float(DType t, uint8_t bits);

// The bit pattern of a real number (`saturate` matters for the float8 formats only).
uint8_t narrow_from_float(DType t, double v, bool saturate = true);

// The bit pattern of an integer: int4 / uint4 wrap (low 4 bits); the float formats round.
uint8_t narrow_from_integer(DType t, int64_t v, bool saturate = true);

}  // namespace kiln
