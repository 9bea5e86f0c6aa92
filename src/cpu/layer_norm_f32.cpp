#include "cpu/layer_norm_f32.hpp"

#include <omp.h>

#include <cmath>

#include <kiln/error.hpp>

#include "cpu/isa.hpp"
#include "cpu/simd_avx512.hpp"

namespace kiln::cpu::layer_norm_f32 {

namespace {

using simd::tail_mask;

KILN_AVX512 void row(const float* src, const float* skip, const float* bias, const float* scale, const float* shift,
                     int64_t m, float eps, float* dst) {
  // x (with the residual and bias added, written out) and its sum
  const float* x = src;
  __m512 sum = _mm512_setzero_ps();
  if (skip) {
    for (int64_t j = 0; j < m; j += 16) {
      const __mmask16 k = tail_mask(m - j);
      __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(k, src + j), _mm512_maskz_loadu_ps(k, skip + j));
      if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, bias + j));
      _mm512_mask_storeu_ps(dst + j, k, v);
      sum = _mm512_add_ps(sum, v);
    }
    x = dst;
  } else {
    for (int64_t j = 0; j < m; j += 16) sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(tail_mask(m - j), src + j));
  }
  const float mean = _mm512_reduce_add_ps(sum) / static_cast<float>(m);
  const __m512 vmean = _mm512_set1_ps(mean);
  __m512 sq = _mm512_setzero_ps();
  for (int64_t j = 0; j < m; j += 16) {
    const __mmask16 k = tail_mask(m - j);
    const __m512 d = _mm512_maskz_sub_ps(k, _mm512_maskz_loadu_ps(k, x + j), vmean);
    sq = _mm512_fmadd_ps(d, d, sq);
  }
  const float var = _mm512_reduce_add_ps(sq) / static_cast<float>(m);
  const __m512 inv = _mm512_set1_ps(1.0f / std::sqrt(var + eps));
  for (int64_t j = 0; j < m; j += 16) {
    const __mmask16 k = tail_mask(m - j);
    const __m512 d = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), vmean), inv);
    _mm512_mask_storeu_ps(dst + j, k, _mm512_fmadd_ps(d, _mm512_maskz_loadu_ps(k, scale + j), _mm512_maskz_loadu_ps(k, shift + j)));
  }
}

}  // namespace

bool available() { return isa_at_least(Isa::avx512_core); }

const char* impl_name() { return "kiln_layer_norm:avx512_core_f32"; }

void run(const float* src, const float* skip, const float* bias, const float* scale, const float* shift, int64_t rows,
         int64_t m, float eps, float* dst) {
  KILN_CHECK(available(), "layer_norm_f32::run: the ISA in use has no AVX-512");
  if (rows <= 0 || m <= 0) return;
  // below a few microseconds of work, not worth starting the team
#pragma omp parallel for schedule(static) if (rows * m >= 16384)
  for (int64_t r = 0; r < rows; ++r) row(src + r * m, skip ? skip + r * m : nullptr, bias, scale, shift, m, eps, dst + r * m);
}

}  // namespace kiln::cpu::layer_norm_f32
