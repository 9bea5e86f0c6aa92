#pragma once
// AVX-512 helpers shared by kiln's own kernels (gemm_f32, layer_norm_f32, attention_f32).
// Those files are built for the baseline ISA: every function that uses AVX-512 intrinsics
// carries KILN_AVX512, and only a kernel's available() lets a caller reach one.
#include <immintrin.h>

#include <cstdint>

#include "cpu/erf_rational.hpp"
#include "cpu/exp_poly.hpp"

#define KILN_AVX512 __attribute__((target("avx512f,avx512dq,fma")))
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 takes the intrinsics' deliberately undefined pass-through operands (scalef,
// roundscale, the reductions) for uninitialised reads
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace kiln::cpu::simd {

// The first `left` lanes (all 16 from 16 on).
KILN_AVX512 inline __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
}

// Vector math, absolute error about 1e-7 where the result is about 1.

// e^x = 2^n e^r for x = n ln2 + r: n (rounded x / ln2) in *n, e^r (|r| <= ln2 / 2) by its Taylor
// polynomial to r^6 returned. The part v_exp and v_exp_nonpositive share.
KILN_AVX512 inline __m512 exp_reduced(__m512 x, __m512* n) {
  *n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(*n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(*n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
}

// exp(x): e^r times 2^n (scalef). Below -87.3 the result is 0, not a denormal: a kernel that goes
// on computing with denormals (a softmax's masked keys times V) runs many times slower on x86.
KILN_AVX512 inline __m512 v_exp(__m512 x) {
  const __mmask16 normal = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.33654f), _CMP_GE_OQ);
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.33654f)), _mm512_set1_ps(88.72283f));
  __m512 n;
  const __m512 p = exp_reduced(x, &n);
  return _mm512_maskz_mov_ps(normal, _mm512_scalef_ps(p, n));
}

// e^x for x <= 0 (a softmax's score less its row's maximum), 0 below -87 where e^x would come
// near the denormals; no clamp above. Never a denormal (e^-87 = 1.6e-38).
KILN_AVX512 inline __m512 v_exp_nonpositive(__m512 x) {
  const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_GE_OQ);
  __m512 n;
  const __m512 p = exp_reduced(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), &n);
  return _mm512_maskz_mov_ps(keep, _mm512_scalef_ps(p, n));
}

KILN_AVX512 inline __m512 v_abs(__m512 x) { return _mm512_andnot_ps(_mm512_set1_ps(-0.0f), x); }
KILN_AVX512 inline __m512 v_copysign(__m512 mag, __m512 sign) {
  return _mm512_or_ps(v_abs(mag), _mm512_and_ps(sign, _mm512_set1_ps(-0.0f)));
}

// erf(x) = x P(x^2) / Q(x^2) (erf_rational.hpp): at most 3.8e-7 absolute and relative error in
// float over the whole line (the rational function's 3.5e-7 and the reciprocal's rounding); odd,
// NaN in, NaN out.
KILN_AVX512 inline __m512 v_erf(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-kErfClamp), _mm512_min_ps(_mm512_set1_ps(kErfClamp), x));  // NaN passes
  const __m512 u = _mm512_mul_ps(x, x);
  __m512 p = _mm512_set1_ps(kErfP[0]), q = _mm512_set1_ps(kErfQ[0]);
  p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(kErfP[1]));
  q = _mm512_fmadd_ps(q, u, _mm512_set1_ps(kErfQ[1]));
  p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(kErfP[2]));
  q = _mm512_fmadd_ps(q, u, _mm512_set1_ps(kErfQ[2]));
  p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(kErfP[3]));
  q = _mm512_fmadd_ps(q, u, _mm512_set1_ps(kErfQ[3]));
  p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(kErfP[4]));
  q = _mm512_fmadd_ps(q, u, _mm512_set1_ps(kErfQ[4]));
  p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(kErfP[5]));
  q = _mm512_fmadd_ps(q, u, _mm512_set1_ps(kErfQ[5]));
  // x P / Q with 1 / Q from the 14-bit estimate and a Newton step (Q >= 1; about 1 ulp), not a
  // division: vdivps holds its port 10 cycles a vector, a third of GELU's time in gemm_f32's epilogue
  const __m512 r0 = _mm512_rcp14_ps(q);
  const __m512 r = _mm512_fmadd_ps(r0, _mm512_fnmadd_ps(q, r0, _mm512_set1_ps(1.0f)), r0);
  return _mm512_mul_ps(_mm512_mul_ps(x, p), r);
}

// tanh(x): 1 - 2 / (e^2|x| + 1) with the sign of x; a short series below |x| = 1/16, where
// that form loses digits to cancellation
KILN_AVX512 inline __m512 v_tanh(__m512 x) {
  const __m512 ax = v_abs(x);
  const __m512 e = v_exp(_mm512_add_ps(ax, ax));
  const __m512 big = _mm512_sub_ps(_mm512_set1_ps(1.0f),
                                   _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, _mm512_set1_ps(1.0f))));
  const __m512 x2 = _mm512_mul_ps(ax, ax);
  __m512 s = _mm512_set1_ps(-17.0f / 315);
  s = _mm512_fmadd_ps(s, x2, _mm512_set1_ps(2.0f / 15));
  s = _mm512_fmadd_ps(s, x2, _mm512_set1_ps(-1.0f / 3));
  s = _mm512_fmadd_ps(_mm512_mul_ps(s, x2), ax, ax);
  const __mmask16 small = _mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.0625f), _CMP_LT_OQ);
  return v_copysign(_mm512_mask_blend_ps(small, big, s), x);
}

KILN_AVX512 inline __m512 v_logistic(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 r = _mm512_div_ps(one, _mm512_add_ps(one, v_exp(_mm512_sub_ps(_mm512_setzero_ps(), x))));
  // below about -87 the quotient is a denormal: 0 instead (see v_exp)
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(r, _mm512_set1_ps(1.17549435e-38f), _CMP_GE_OQ), r);
}

// Swish(x) = x / (1 + e^-x), the snippets' emit_swish in intrinsics (the same clamps, polynomial
// and results): x clamped below at kSwishLow (NaN kept: max / min return their second operand
// then), e^-x as 2^n e^-s with n = round(-x log2 e), s = x + n ln2, by kExpPoly at -s, and
// 1 / (1 + e^-x) from the reciprocal estimate and a Newton step. 17 vector operations, no
// division, where v_logistic and a multiply take 23, a division among them, and on a CPU that runs 512-bit
// operations as two halves (AMD Zen 4) the FMA pipes bound both (gemm_f32's epilogue after
// EfficientNet's expansions, where K is 16-40 and the Swish costs as much as the product).
// On v[0, U) in place, the vectors' chains interleaved step by step: one vector at a
// time, its 17 dependent operations filled the scheduler before the next vector's could start.
template <int U>
KILN_AVX512 inline __attribute__((always_inline)) void v_swish_n(__m512* v) {
  __m512 xc[U], n[U], s[U], p[U];
#pragma GCC unroll 8
  for (int i = 0; i < U; ++i) {
    xc[i] = _mm512_max_ps(_mm512_set1_ps(kSwishLow), v[i]);
    s[i] = _mm512_min_ps(_mm512_set1_ps(kSwishExpHigh), xc[i]);
    n[i] = _mm512_roundscale_ps(_mm512_mul_ps(s[i], _mm512_set1_ps(-kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
#pragma GCC unroll 8
  for (int i = 0; i < U; ++i) s[i] = _mm512_fmadd_ps(n[i], _mm512_set1_ps(kLn2Hi), s[i]);
#pragma GCC unroll 8
  for (int i = 0; i < U; ++i) s[i] = _mm512_fmadd_ps(n[i], _mm512_set1_ps(kLn2Lo), s[i]);
#pragma GCC unroll 8
  for (int i = 0; i < U; ++i) p[i] = _mm512_fmadd_ps(_mm512_set1_ps(exp_poly_negated(0)), s[i], _mm512_set1_ps(exp_poly_negated(1)));
#pragma GCC unroll 8
  for (int k = 2; k <= kExpDegree; ++k)
#pragma GCC unroll 8
    for (int i = 0; i < U; ++i) p[i] = _mm512_fmadd_ps(p[i], s[i], _mm512_set1_ps(exp_poly_negated(k)));
#pragma GCC unroll 8
  for (int i = 0; i < U; ++i) {
    const __m512 q = _mm512_add_ps(_mm512_scalef_ps(p[i], n[i]), _mm512_set1_ps(1.0f));  // 1 + e^-x
    const __m512 r0 = _mm512_rcp14_ps(q);
    v[i] = _mm512_mul_ps(xc[i], _mm512_fmadd_ps(r0, _mm512_fnmadd_ps(q, r0, _mm512_set1_ps(1.0f)), r0));
  }
}

}  // namespace kiln::cpu::simd
