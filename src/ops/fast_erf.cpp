#include "ops/fast_erf.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

namespace kiln::ops {

namespace {

// e^z for z in [-87, 0] (clamped below; a NaN, whose result the caller discards, too, so that
// no NaN reaches the float -> int conversion): z = k ln2 + r with |r| <= ln2/2, e^r by its
// degree-6 Taylor polynomial, 2^k built in the exponent bits.
inline float exp_nonpositive(float z) {
  z = z >= -87.0f ? z : -87.0f;
  const float k = std::nearbyint(z * 1.44269504088896341f);
  float r = z - k * 0.693145751953125f;  // ln2 split in a part exact in float ...
  r -= k * 1.428606765330187e-06f;       // ... and the rest
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return p * std::bit_cast<float>((static_cast<int32_t>(k) + 127) << 23);
}

// |x| < 0.5: the odd Maclaurin series to x^13 (relative error < 1e-9 there).
// Otherwise 1 - t P(t) e^{-x^2} with t = 1 / (1 + p|x|) (Abramowitz & Stegun 7.1.26,
// absolute error < 1.5e-7). Both are computed and one selected, so the loop vectorises.
inline float erf_one(float x) {
  const float a = std::fabs(x);
  const float s = a * a;
  float q = -1.0f / 1320.0f + s * (1.0f / 9360.0f);
  q = 1.0f / 216.0f + s * q;
  q = -1.0f / 42.0f + s * q;
  q = 1.0f / 10.0f + s * q;
  q = -1.0f / 3.0f + s * q;
  q = 1.0f + s * q;
  const float small = 1.1283791670955126f * a * q;  // 2/sqrt(pi) * series

  const float ac = a > 10.0f ? 10.0f : a;
  const float t = 1.0f / (1.0f + 0.3275911f * ac);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  const float large = 1.0f - p * t * exp_nonpositive(-ac * ac);

  float y = a < 0.5f ? small : large;
  y = a != a ? a : y;  // NaN in, NaN out
  return std::copysign(y, x);
}

// One clone per ISA, chosen when the program loads (an ifunc). Not under ThreadSanitizer: its
// instrumented resolver would run before the sanitizer's runtime is up.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)  // clang's spelling
#define KILN_TSAN_BUILD 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) || defined(KILN_TSAN_BUILD)
#define KILN_ERF_CLONES
#else
#define KILN_ERF_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
KILN_ERF_CLONES void erf_block(const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = erf_one(x[i]);
}

}  // namespace

void erf_f32(const float* x, float* y, int64_t n) {
  constexpr int64_t kBlock = 16384;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for if (blocks > 1) schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t lo = b * kBlock;
    erf_block(x + lo, y + lo, std::min(kBlock, n - lo));
  }
}

}  // namespace kiln::ops
