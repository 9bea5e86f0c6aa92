#pragma once
// AVX2 helpers for kiln's own kernels where the CPU has no AVX-512 (gemm_f32's AVX2 kernel):
// the vector math of simd_avx512.hpp on 8 lanes, same algorithms and accuracy. These files are
// built for the baseline ISA: every function that uses AVX2 intrinsics carries KILN_AVX2, and
// only a kernel's available() lets a caller reach one.
#include <immintrin.h>

#include <cstdint>

#include "cpu/erf_rational.hpp"
#include "cpu/exp_poly.hpp"

#define KILN_AVX2 __attribute__((target("avx2,fma")))

namespace kiln::cpu::simd {

// The first `left` lanes (all 8 from 8 on), as a maskload / maskstore mask.
KILN_AVX2 inline __m256i tail_mask8(int64_t left) {
  const int n = left >= 8 ? 8 : static_cast<int>(left);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The first min(left, 8) floats at p, the other lanes 0; and the store of as many. Full vectors
// take the plain load / store: AMD CPUs run vmaskmovps stores in microcode, tens of cycles each.
KILN_AVX2 inline __m256 v_load8(const float* p, int64_t left) {
  return left >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, tail_mask8(left));
}
KILN_AVX2 inline void v_store8(float* p, int64_t left, __m256 v) {
  if (left >= 8)
    _mm256_storeu_ps(p, v);
  else
    _mm256_maskstore_ps(p, tail_mask8(left), v);
}
// All ones in the first min(left, 8) lanes, as floats (to zero the others with _mm256_and_ps).
KILN_AVX2 inline __m256 v_lanes8(int64_t left) { return _mm256_castsi256_ps(tail_mask8(left)); }

// e^x = 2^n e^r for x = n ln2 + r: n (rounded x / ln2) in *n, e^r (|r| <= ln2 / 2) by its Taylor
// polynomial to r^6 returned. The part v_exp8 and v_exp_nonpositive8 share.
KILN_AVX2 inline __m256 exp_reduced8(__m256 x, __m256* n) {
  *n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(*n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(*n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  return _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
}

// exp(x) as v_exp of simd_avx512.hpp: x = n ln2 + r, e^r by its Taylor polynomial to r^6,
// times 2^n made from exponent bits in two factors (2^n alone is no normal float at n = 128
// or -126); 0 below -87.3 (no denormals).
KILN_AVX2 inline __m256 v_exp8(__m256 x) {
  const __m256 normal = _mm256_cmp_ps(x, _mm256_set1_ps(-87.33654f), _CMP_GE_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.33654f)), _mm256_set1_ps(88.72283f));
  __m256 n;
  const __m256 p = exp_reduced8(x, &n);
  // 2^n = 2^h 2^(n-h), h = n / 2: both factors normal for every n in [-126, 128]
  const __m256i ni = _mm256_cvtps_epi32(n), h = _mm256_srai_epi32(ni, 1);
  const __m256i e1 = _mm256_slli_epi32(_mm256_add_epi32(h, _mm256_set1_epi32(127)), 23);
  const __m256i e2 = _mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, h), _mm256_set1_epi32(127)), 23);
  const __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e1)), _mm256_castsi256_ps(e2));
  return _mm256_and_ps(y, normal);
}

// e^x for x <= 0 (a softmax's score less its row's maximum), 0 below -87 where e^x would come
// near the denormals: 2^n one normal factor (n >= -126 here), no clamp above. About a fifth
// fewer instructions than v_exp8; never a denormal (e^-87 = 1.6e-38).
KILN_AVX2 inline __m256 v_exp_nonpositive8(__m256 x) {
  const __m256 keep = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_GE_OQ);
  __m256 n;
  const __m256 p = exp_reduced8(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), &n);
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), keep);
}

// The sum / maximum of the 8 lanes.
KILN_AVX2 inline float v_hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
KILN_AVX2 inline float v_hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

KILN_AVX2 inline __m256 v_abs8(__m256 x) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x); }
KILN_AVX2 inline __m256 v_copysign8(__m256 mag, __m256 sign) {
  return _mm256_or_ps(v_abs8(mag), _mm256_and_ps(sign, _mm256_set1_ps(-0.0f)));
}

// erf(x) = x P(x^2) / Q(x^2) (erf_rational.hpp): at most 3.5e-7 absolute and relative error in
// float over the whole line, about half the cost of Abramowitz and Stegun 7.1.26 with its
// exponential (GELU's erf after the GEMM: BERT's FFN up-projection). Odd, so exact in sign and
// relative error near 0; NaN in, NaN out. v_erf8_n: U vectors in place, their chains (each
// about 40 cycles deep) interleaved.
template <int U>
KILN_AVX2 inline __attribute__((always_inline)) void v_erf8_n(__m256* v) {
  __m256 x[U], u[U], p[U], q[U];
#pragma GCC unroll 4
  for (int i = 0; i < U; ++i) {
    x[i] = _mm256_max_ps(_mm256_set1_ps(-kErfClamp), _mm256_min_ps(_mm256_set1_ps(kErfClamp), v[i]));  // NaN passes
    u[i] = _mm256_mul_ps(x[i], x[i]);
    p[i] = _mm256_set1_ps(kErfP[0]);
    q[i] = _mm256_set1_ps(kErfQ[0]);
  }
#pragma GCC unroll 5
  for (int k = 1; k < 6; ++k)
#pragma GCC unroll 4
    for (int i = 0; i < U; ++i) {
      p[i] = _mm256_fmadd_ps(p[i], u[i], _mm256_set1_ps(kErfP[k]));
      q[i] = _mm256_fmadd_ps(q[i], u[i], _mm256_set1_ps(kErfQ[k]));
    }
#pragma GCC unroll 4
  for (int i = 0; i < U; ++i) v[i] = _mm256_div_ps(_mm256_mul_ps(x[i], p[i]), q[i]);  // Q >= 1
}
KILN_AVX2 inline __m256 v_erf8(__m256 x) {
  v_erf8_n<1>(&x);
  return x;
}

// GELU(x) = x / 2 (1 + erf(x / sqrt 2)) on v_erf8_n, U vectors' chains interleaved (each about
// 50 cycles deep: on its own a vector waits on it), the last step x / 2 + x / 2 erf as one
// multiply-add. Zen 2, one thread, 12 vectors in L1: 15.3 cycles a vector one at a time, 12.5
// four at a time (BERT's FFN up-projection's epilogue).
template <int U>
KILN_AVX2 inline __attribute__((always_inline)) void v_gelu_erf8_n(__m256* v) {
  __m256 e[U];
#pragma GCC unroll 4
  for (int i = 0; i < U; ++i) e[i] = _mm256_mul_ps(v[i], _mm256_set1_ps(0.70710678f));
  v_erf8_n<U>(e);
#pragma GCC unroll 4
  for (int i = 0; i < U; ++i) {
    const __m256 h = _mm256_mul_ps(_mm256_set1_ps(0.5f), v[i]);
    v[i] = _mm256_fmadd_ps(h, e[i], h);
  }
}

// tanh(x): 1 - 2 / (e^2|x| + 1) with the sign of x; a short series below |x| = 1/16
KILN_AVX2 inline __m256 v_tanh8(__m256 x) {
  const __m256 ax = v_abs8(x);
  const __m256 e = v_exp8(_mm256_add_ps(ax, ax));
  const __m256 big = _mm256_sub_ps(_mm256_set1_ps(1.0f),
                                   _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
  const __m256 x2 = _mm256_mul_ps(ax, ax);
  __m256 s = _mm256_set1_ps(-17.0f / 315);
  s = _mm256_fmadd_ps(s, x2, _mm256_set1_ps(2.0f / 15));
  s = _mm256_fmadd_ps(s, x2, _mm256_set1_ps(-1.0f / 3));
  s = _mm256_fmadd_ps(_mm256_mul_ps(s, x2), ax, ax);
  const __m256 small = _mm256_cmp_ps(ax, _mm256_set1_ps(0.0625f), _CMP_LT_OQ);
  return v_copysign8(_mm256_blendv_ps(big, s, small), x);
}

KILN_AVX2 inline __m256 v_logistic8(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 r = _mm256_div_ps(one, _mm256_add_ps(one, v_exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
  return _mm256_and_ps(r, _mm256_cmp_ps(r, _mm256_set1_ps(1.17549435e-38f), _CMP_GE_OQ));  // no denormals
}

// Swish(x) = x / (1 + e^-x): v_swish_n (simd_avx512.hpp) on 8 lanes, U vectors' chains
// interleaved; e^-x's argument clamped at kSwishExpHighAvx2 so that n is in [-125, 126] and 2^n
// is built from its exponent bits. Its chain of dependent operations is what bounds it (with U =
// 4, about 60 cycles deep), so it takes the shorter forms: the polynomial by Estrin's scheme,
// 1 + p 2^n as one multiply-add, and a division where a reciprocal estimate and a Newton step
// took four operations one after another. Zen 2, one thread, 12 vectors in L1 taken afresh
// each round: 13.5 -> 11.1 cycles a vector (an EfficientNet expansion's epilogue is mostly
// this); the largest error against double from kSwishLow to 120, 2.7e-7 -> 2.6e-7 relative.
template <int U>
KILN_AVX2 inline __attribute__((always_inline)) void v_swish8_n(__m256* v) {
  __m256 xc[U], n[U], s[U], p[U];
#pragma GCC unroll 4
  for (int i = 0; i < U; ++i) {
    xc[i] = _mm256_max_ps(_mm256_set1_ps(kSwishLow), v[i]);
    s[i] = _mm256_min_ps(_mm256_set1_ps(kSwishExpHighAvx2), xc[i]);
    n[i] = _mm256_round_ps(_mm256_mul_ps(s[i], _mm256_set1_ps(-kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
#pragma GCC unroll 4
  for (int i = 0; i < U; ++i) s[i] = _mm256_fmadd_ps(n[i], _mm256_set1_ps(kLn2Hi), s[i]);
#pragma GCC unroll 4
  for (int i = 0; i < U; ++i) s[i] = _mm256_fmadd_ps(n[i], _mm256_set1_ps(kLn2Lo), s[i]);
  // Estrin's scheme: (a0 + a1 s) + s^2 ((a2 + a3 s) + s^2 (a4 + a5 s)), three multiply-adds
  // deep where Horner's is five
  static_assert(kExpDegree == 5, "Estrin's scheme below is written for degree 5");
#define KILN_A(d) _mm256_set1_ps(exp_poly_negated(kExpDegree - (d)))
#pragma GCC unroll 4
  for (int i = 0; i < U; ++i) {
    const __m256 s2 = _mm256_mul_ps(s[i], s[i]);
    const __m256 e45 = _mm256_fmadd_ps(KILN_A(5), s[i], KILN_A(4)), e23 = _mm256_fmadd_ps(KILN_A(3), s[i], KILN_A(2));
    const __m256 e01 = _mm256_fmadd_ps(KILN_A(1), s[i], KILN_A(0));
    p[i] = _mm256_fmadd_ps(_mm256_fmadd_ps(e45, s2, e23), s2, e01);
  }
#undef KILN_A
#pragma GCC unroll 4
  for (int i = 0; i < U; ++i) {
    const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n[i]), _mm256_set1_epi32(127)), 23);
    const __m256 q = _mm256_fmadd_ps(p[i], _mm256_castsi256_ps(bits), _mm256_set1_ps(1.0f));  // 1 + e^-x
    v[i] = _mm256_div_ps(xc[i], q);
  }
}

}  // namespace kiln::cpu::simd
