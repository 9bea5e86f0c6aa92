#include "cpu/resize_f32.hpp"

#include <omp.h>

#include <algorithm>

#include "cpu/isa.hpp"
#include "cpu/simd_avx2.hpp"

namespace kiln::cpu::resize_f32 {

bool available() { return isa_at_least(Isa::avx2); }

const char* impl_name() { return "kiln_resize:avx2_f32"; }

int64_t scratch_floats(const Geometry& g, int threads) {
  // a blended row per thread, 16 floats apart (no two threads on one cache line)
  return static_cast<int64_t>(std::max(threads, 1)) * ((g.iw + 15) / 16 * 16);
}

namespace {

// out[x] = row[i0[x]] (nearest) or w0[x] * row[i0[x]] + w1[x] * row[i1[x]], 8 columns a step.
KILN_AVX2 void gather_row(const Axis& a, bool linear, const float* row, int64_t ow, float* out) {
  int64_t x = 0;
  for (; x + 8 <= ow; x += 8) {
    const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.i0.data() + x));
    __m256 v = _mm256_i32gather_ps(row, a0, 4);
    if (linear) {
      const __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.i1.data() + x));
      const __m256 v1 = _mm256_i32gather_ps(row, a1, 4), w1 = _mm256_loadu_ps(a.w1.data() + x);
      // as the reference sums the taps, w0 * v0 + w1 * v1, a tap of weight 0 left out (an
      // infinity there gives no NaN)
      const __m256 second = _mm256_and_ps(_mm256_mul_ps(w1, v1), _mm256_cmp_ps(w1, _mm256_setzero_ps(), _CMP_NEQ_OQ));
      v = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(a.w0.data() + x), v), second);
    }
    _mm256_storeu_ps(out + x, v);
  }
  for (; x < ow; ++x) {
    const size_t k = static_cast<size_t>(x);
    out[x] = !linear ? row[a.i0[k]] : a.w1[k] == 0 ? a.w0[k] * row[a.i0[k]] : a.w0[k] * row[a.i0[k]] + a.w1[k] * row[a.i1[k]];
  }
}

// t = w0 * r0 + w1 * r1 over n columns.
KILN_AVX2 void blend_rows(const float* r0, const float* r1, float w0, float w1, int64_t n, float* t) {
  const __m256 a = _mm256_set1_ps(w0), b = _mm256_set1_ps(w1);
  int64_t x = 0;
  for (; x + 8 <= n; x += 8)
    _mm256_storeu_ps(t + x, _mm256_add_ps(_mm256_mul_ps(a, _mm256_loadu_ps(r0 + x)), _mm256_mul_ps(b, _mm256_loadu_ps(r1 + x))));
  for (; x < n; ++x) t[x] = w0 * r0[x] + w1 * r1[x];
}

}  // namespace

void run(const Geometry& g, const float* x, float* y, float* scratch, int threads) {
  const int64_t rows = g.planes * g.oh, stride = (g.iw + 15) / 16 * 16;
#pragma omp parallel num_threads(std::max(threads, 1))
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    float* blended = scratch + t * stride;
    for (int64_t r = rows * t / nt; r < rows * (t + 1) / nt; ++r) {
      const int64_t plane = r / g.oh, oy = r % g.oh;
      const size_t k = static_cast<size_t>(oy);
      const float* in = x + plane * g.ih * g.iw;
      const float* src = in + static_cast<int64_t>(g.h.i0[k]) * g.iw;
      // the reference resizes the rows first (the axes in order), then the columns, leaving out
      // a tap of weight 0: w1 = t is 0 where w0 = 1 - t is 1, the row itself
      if (g.linear && g.h.w1[k] != 0) {
        blend_rows(src, in + static_cast<int64_t>(g.h.i1[k]) * g.iw, g.h.w0[k], g.h.w1[k], g.iw, blended);
        src = blended;
      }
      gather_row(g.w, g.linear, src, g.ow, y + r * g.ow);
    }
  }
}

}  // namespace kiln::cpu::resize_f32
