#include "cpu/squeeze_excite_f32.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "cpu/isa.hpp"

namespace kiln::cpu::squeeze_excite_f32 {

namespace {

// Calls f(offset) for pixels [p0, p1) of an image in row order: the offset of each from the
// image's origin (h * h_stride + w * w_stride).
template <class F>
inline __attribute__((always_inline)) void for_pixels(const Geometry& g, int64_t p0, int64_t p1, F&& f) {
  for (int64_t h = p0 / g.width; h * g.width < p1; ++h) {
    const int64_t w0 = std::max<int64_t>(p0 - h * g.width, 0), w1 = std::min<int64_t>(p1 - h * g.width, g.width);
    for (int64_t w = w0; w < w1; ++w) f(h * g.h_stride + w * g.w_stride);
  }
}

inline float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

// bias + row . v over n values (a layer's output), vectorised for the caller's target.
inline __attribute__((always_inline)) float affine(const float* row, const float* v, int64_t n, float bias) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += row[i] * v[i];
  return sum + bias;
}

// The kernel for thread t of a team of nt (the barriers between its steps are the team's);
// inlined into a function per instruction set, whose target the loops are vectorised for (the
// parallel region stays in run(): OpenMP outlines a region's body into a function of its own,
// compiled for the baseline).
inline __attribute__((always_inline)) void body(const Geometry& g, int threads, int t, int nt, const float* w1,
                                                const float* b1, const float* w2, const float* b2, const float* x,
                                                float* y, float* scratch) {
  const int64_t padded = g.runs * g.lanes, pixels = g.height * g.width, C = g.channels, R = g.reduced;
  const bool plain = g.lanes == 1;  // a channel's pixels are a plane: split channels, not pixels
  float* part = scratch;                                              // [threads][batch][padded] sums
  float* s = part + static_cast<size_t>(threads) * g.batch * padded;  // [batch][padded] mean, then scale
  float* hidden = s + g.batch * padded;                               // [batch][R]
  const int64_t p0 = pixels * t / nt, p1 = pixels * (t + 1) / nt;
  const int64_t c0 = C * t / nt, c1 = C * (t + 1) / nt;
  const int64_t j0 = R * t / nt, j1 = R * (t + 1) / nt;
  // 1. sums: this thread's pixels of every channel (its channels' planes when plain)
  float* mine = part + static_cast<size_t>(t) * g.batch * padded;
  std::fill(mine, mine + g.batch * padded, 0.0f);
  for (int64_t n = 0; n < g.batch; ++n) {
    const float* xn = x + n * g.n_stride;
    float* acc = mine + n * padded;
    if (plain) {
      const bool contiguous = g.w_stride == 1 && g.h_stride == g.width;
      for (int64_t c = c0; c < c1; ++c) {
        const float* plane = xn + c * g.run_stride;
        float sum = 0.0f;
        if (contiguous) {
#pragma omp simd reduction(+ : sum)
          for (int64_t o = 0; o < pixels; ++o) sum += plane[o];
        } else {
          for_pixels(g, 0, pixels, [&](int64_t o) { sum += plane[o]; });
        }
        acc[c] = sum;
      }
      continue;
    }
    for (int64_t r = 0; r < g.runs; ++r) {
      const float* run = xn + r * g.run_stride;
      float* a = acc + r * g.lanes;
      for_pixels(g, p0, p1, [&](int64_t o) {
        const float* v = run + o;
#pragma omp simd
        for (int64_t l = 0; l < g.lanes; ++l) a[l] += v[l];
      });
    }
  }
#pragma omp barrier
  // 2. the means of this thread's channels, then its share of the first layer's outputs and of
  // the second's (the scale, over the means, which the first layer has read by then), every
  // image (the layers' weights split between the threads, not the images: batch 1 is the common
  // case)
  const float inv = pixels > 0 ? 1.0f / static_cast<float>(pixels) : 0.0f;
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t c = c0; c < c1; ++c) {
      float sum = 0.0f;
      for (int u = 0; u < nt; ++u) sum += part[(static_cast<size_t>(u) * g.batch + n) * padded + c];
      s[n * padded + c] = sum * inv;
    }
#pragma omp barrier
  for (int64_t n = 0; n < g.batch; ++n) {
    const float* m = s + n * padded;
    for (int64_t j = j0; j < j1; ++j) {
      const float v = affine(w1 + j * C, m, C, b1[j]);
      hidden[n * R + j] = g.swish ? v * sigmoid(v) : std::max(v, 0.0f);
    }
  }
#pragma omp barrier
  for (int64_t n = 0; n < g.batch; ++n) {
    const float* h = hidden + n * R;
    for (int64_t c = c0; c < c1; ++c) {
      const float v = affine(w2 + c * R, h, R, b2[c]);
      s[n * padded + c] = g.hard_gate ? std::max(0.0f, std::min(1.0f, g.gate_alpha * v + g.gate_beta)) : sigmoid(v);
    }
    if (t == 0) std::fill(s + n * padded + C, s + (n + 1) * padded, 0.0f);  // padded lanes stay zero
  }
#pragma omp barrier
  // 3. y = x * scale: the same pixels (channels when plain) as in 1
  for (int64_t n = 0; n < g.batch; ++n) {
    const float* xn = x + n * g.n_stride;
    float* yn = y + n * g.n_stride;
    const float* scale = s + n * padded;
    if (plain) {
      for (int64_t c = c0; c < c1; ++c) {
        const float k = scale[c];
        const float* src = xn + c * g.run_stride;
        float* dst = yn + c * g.run_stride;
        for_pixels(g, 0, pixels, [&](int64_t o) { dst[o] = src[o] * k; });
      }
      continue;
    }
    for (int64_t r = 0; r < g.runs; ++r) {
      const float* k = scale + r * g.lanes;
      for_pixels(g, p0, p1, [&](int64_t o) {
        const float* v = xn + r * g.run_stride + o;
        float* out = yn + r * g.run_stride + o;
#pragma omp simd
        for (int64_t l = 0; l < g.lanes; ++l) out[l] = v[l] * k[l];
      });
    }
  }
}

__attribute__((target("avx512f,avx512dq,fma"))) void body_avx512(const Geometry& g, int threads, int t, int nt,
                                                                  const float* w1, const float* b1, const float* w2,
                                                                  const float* b2, const float* x, float* y,
                                                                  float* scratch) {
  body(g, threads, t, nt, w1, b1, w2, b2, x, y, scratch);
}
__attribute__((target("avx2,fma"))) void body_avx2(const Geometry& g, int threads, int t, int nt, const float* w1,
                                                   const float* b1, const float* w2, const float* b2, const float* x,
                                                   float* y, float* scratch) {
  body(g, threads, t, nt, w1, b1, w2, b2, x, y, scratch);
}
void body_baseline(const Geometry& g, int threads, int t, int nt, const float* w1, const float* b1, const float* w2,
                   const float* b2, const float* x, float* y, float* scratch) {
  body(g, threads, t, nt, w1, b1, w2, b2, x, y, scratch);
}

}  // namespace

const char* impl_name() {
  if (isa_at_least(Isa::avx512_core)) return "kiln_squeeze_excite:avx512_f32";
  if (isa_at_least(Isa::avx2)) return "kiln_squeeze_excite:avx2_f32";
  return "kiln_squeeze_excite:sse_f32";  // the x86-64 baseline
}

size_t scratch_floats(const Geometry& g, int threads) {
  const size_t padded = static_cast<size_t>(g.runs * g.lanes), batch = static_cast<size_t>(g.batch);
  return (static_cast<size_t>(threads) + 1) * batch * padded + batch * static_cast<size_t>(g.reduced);
}

void run(const Geometry& g, int threads, const float* w1, const float* b1, const float* w2, const float* b2,
         const float* x, float* y, float* scratch) {
  auto* fn = isa_at_least(Isa::avx512_core) ? body_avx512 : isa_at_least(Isa::avx2) ? body_avx2 : body_baseline;
#pragma omp parallel num_threads(threads)
  fn(g, threads, omp_get_thread_num(), omp_get_num_threads(), w1, b1, w2, b2, x, y, scratch);
}

}  // namespace kiln::cpu::squeeze_excite_f32
