#include "cpu/channel_affine.hpp"

#include <immintrin.h>

#include "cpu/isa.hpp"
#include "cpu/simd_avx2.hpp"
#include "cpu/simd_avx512.hpp"

namespace kiln::cpu::channel_affine {

namespace {

KILN_AVX512 inline __m512 finish512(__m512 y, bool relu) {
  return relu ? _mm512_max_ps(_mm512_setzero_ps(), y) : y;  // max(0, NaN) is NaN
}
KILN_AVX2 inline __m256 finish256(__m256 y, bool relu) { return relu ? _mm256_max_ps(_mm256_setzero_ps(), y) : y; }
inline float finish(float y, bool relu) { return relu && y < 0.0f ? 0.0f : y; }

KILN_AVX512 void rows_avx512(const float* src, float* dst, int64_t rows, int64_t width, const float* scale,
                             const float* shift, bool relu) {
  if (width <= 16) {  // a channel block (or a narrow row): its scale and shift stay in registers
    const __mmask16 m = simd::tail_mask(width);
    const __m512 a = _mm512_maskz_loadu_ps(m, scale), b = _mm512_maskz_loadu_ps(m, shift);
    for (int64_t r = 0; r < rows; ++r)
      _mm512_mask_storeu_ps(dst + r * width, m,
                            finish512(_mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, src + r * width), a, b), relu));
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = src + r * width;
    float* d = dst + r * width;
    int64_t j = 0;
    for (; j + 16 <= width; j += 16)
      _mm512_storeu_ps(d + j, finish512(_mm512_fmadd_ps(_mm512_loadu_ps(s + j), _mm512_loadu_ps(scale + j),
                                                        _mm512_loadu_ps(shift + j)),
                                        relu));
    if (j < width) {
      const __mmask16 m = simd::tail_mask(width - j);
      _mm512_mask_storeu_ps(d + j, m,
                            finish512(_mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, s + j), _mm512_maskz_loadu_ps(m, scale + j),
                                                      _mm512_maskz_loadu_ps(m, shift + j)),
                                      relu));
    }
  }
}

KILN_AVX512 void one_channel_avx512(const float* src, float* dst, int64_t n, float a, float b, bool relu) {
  const __m512 va = _mm512_set1_ps(a), vb = _mm512_set1_ps(b);
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) _mm512_storeu_ps(dst + j, finish512(_mm512_fmadd_ps(_mm512_loadu_ps(src + j), va, vb), relu));
  if (j < n) {
    const __mmask16 m = simd::tail_mask(n - j);
    _mm512_mask_storeu_ps(dst + j, m, finish512(_mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, src + j), va, vb), relu));
  }
}

KILN_AVX2 void rows_avx2(const float* src, float* dst, int64_t rows, int64_t width, const float* scale,
                         const float* shift, bool relu) {
  if (width == 8) {  // an AVX2 channel block
    const __m256 a = _mm256_loadu_ps(scale), b = _mm256_loadu_ps(shift);
    for (int64_t r = 0; r < rows; ++r)
      _mm256_storeu_ps(dst + r * 8, finish256(_mm256_fmadd_ps(_mm256_loadu_ps(src + r * 8), a, b), relu));
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = src + r * width;
    float* d = dst + r * width;
    int64_t j = 0;
    for (; j + 8 <= width; j += 8)
      _mm256_storeu_ps(d + j, finish256(_mm256_fmadd_ps(_mm256_loadu_ps(s + j), _mm256_loadu_ps(scale + j),
                                                        _mm256_loadu_ps(shift + j)),
                                        relu));
    for (; j < width; ++j) d[j] = finish(s[j] * scale[j] + shift[j], relu);
  }
}

KILN_AVX2 void one_channel_avx2(const float* src, float* dst, int64_t n, float a, float b, bool relu) {
  const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(dst + j, finish256(_mm256_fmadd_ps(_mm256_loadu_ps(src + j), va, vb), relu));
  for (; j < n; ++j) dst[j] = finish(src[j] * a + b, relu);
}

enum class Level { avx512, avx2, other };
Level level() {
  static const Level l = isa_at_least(Isa::avx512_core) ? Level::avx512 : isa_at_least(Isa::avx2) ? Level::avx2 : Level::other;
  return l;
}

}  // namespace

void rows(const float* src, float* dst, int64_t rows, int64_t width, const float* scale, const float* shift, bool relu) {
  switch (level()) {
    case Level::avx512: return rows_avx512(src, dst, rows, width, scale, shift, relu);
    case Level::avx2: return rows_avx2(src, dst, rows, width, scale, shift, relu);
    case Level::other: break;
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < width; ++j) dst[r * width + j] = finish(src[r * width + j] * scale[j] + shift[j], relu);
}

void one_channel(const float* src, float* dst, int64_t n, float a, float b, bool relu) {
  switch (level()) {
    case Level::avx512: return one_channel_avx512(src, dst, n, a, b, relu);
    case Level::avx2: return one_channel_avx2(src, dst, n, a, b, relu);
    case Level::other: break;
  }
  for (int64_t j = 0; j < n; ++j) dst[j] = finish(src[j] * a + b, relu);
}

}  // namespace kiln::cpu::channel_affine
