#pragma once
// erf(x) = x P(x^2) / Q(x^2) for |x| <= kErfClamp, P and Q of degree 5, fitted (Loeb's
// iteration, on Chebyshev nodes of [0, 3.95]) for kiln's kernels; past the clamp erf is 1 in
// float (1 - 2e-8). Absolute and relative error at most 3.5e-7 in float over the whole line
// (3.8e-7 in v_erf, which takes 1 / Q from the reciprocal estimate and a Newton step).
// The vector forms (simd_avx2.hpp v_erf8, simd_avx512.hpp v_erf) evaluate P and Q by Horner's
// rule from the highest coefficient, interleaved.

namespace kiln::cpu::simd {

inline constexpr float kErfClamp = 3.95f;
// highest degree first
inline constexpr float kErfP[6] = {2.024596327e-06f, 2.858082439e-04f, 3.840963586e-03f,
                                   5.297292449e-02f, 1.922641251e-01f, 1.128379079f};
inline constexpr float kErfQ[6] = {3.78786793e-05f, 1.179507091e-03f, 1.51185594e-02f,
                                   1.148581847e-01f, 5.037217758e-01f, 1.0f};

}  // namespace kiln::cpu::simd
