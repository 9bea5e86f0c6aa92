#pragma once
// e^x = 2^n e^r for kiln's kernels: n = round(x log2 e), r = x - n ln2 with ln2 in two parts (the
// high one has few enough bits that n ln2_hi is exact), so |r| <= ln2 / 2, and e^r by kExpPoly, a
// degree-5 polynomial fitted for relative error on that interval (Lawson's iteration on 4001
// Chebyshev points): 1.5e-7 in f32 Horner, 2.5 ulp. Shared by the snippets' emitters
// (emitters/x64/transcendental_emitters.cpp) and the intrinsics' Swish (simd_avx512.hpp v_swish_n,
// simd_avx2.hpp v_swish8_n), so that a Swish has the same accuracy wherever it runs (AVX2's
// intrinsics evaluate it by Estrin's scheme and divide: their last bits may differ).

namespace kiln::cpu::simd {

inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f;
inline constexpr float kLn2Lo = -2.12194440e-4f;
// highest degree first: c5 .. c0
inline constexpr float kExpPoly[] = {0.0082903147f, 0.041897930f, 0.16667636f, 0.49999150f, 0.99999971f, 1.0f};
inline constexpr int kExpDegree = 5;
// kExpPoly at -s (e^r where s = -r): the coefficients of odd degree negated
constexpr float exp_poly_negated(int i) { return (kExpDegree - i) % 2 ? -kExpPoly[i] : kExpPoly[i]; }

// Swish's clamps: x below kSwishLow is taken as kSwishLow (x / (1 + e^-x) is -1.4e-36 there, and
// 1 + e^87 and its reciprocal stay finite); e^-x's argument is clamped above at kSwishExpHigh
// on AVX-512 (vscalefps flushes to 0) and kSwishExpHighAvx2 on AVX2 (2^n stays a normal float).
inline constexpr float kSwishLow = -87.0f;
inline constexpr float kSwishExpHigh = 104.0f;
inline constexpr float kSwishExpHighAvx2 = 86.5f;

}  // namespace kiln::cpu::simd
