#include "cpu/pool_f32.hpp"

#include <omp.h>

#include <algorithm>
#include <limits>
#include <vector>

#include <kiln/error.hpp>
#include "cpu/isa.hpp"
#include "cpu/work_share.hpp"
#include "cpu/simd_avx2.hpp"

namespace kiln::cpu::pool_f32 {

namespace {

using namespace simd;

// The taps t in [0, k) whose input index o * s - p + t * d lies in [0, in): [*t0, *t1).
void tap_range(int64_t o, int64_t s, int64_t p, int64_t d, int64_t k, int64_t in, int64_t* t0, int64_t* t1) {
  const int64_t start = o * s - p;
  *t0 = start >= 0 ? 0 : (-start + d - 1) / d;
  const int64_t past = in - start;  // taps with start + t * d < in: t < past / d rounded up
  *t1 = past <= 0 ? 0 : std::min(k, (past + d - 1) / d);
}

template <bool Max>
KILN_AVX2 inline __m256 combine(__m256 acc, __m256 v) {
  return Max ? _mm256_max_ps(acc, v) : _mm256_add_ps(acc, v);
}

template <bool Max>
KILN_AVX2 inline __m256 start_value() {
  return Max ? _mm256_set1_ps(-std::numeric_limits<float>::infinity()) : _mm256_setzero_ps();
}

// 1 / the divisor of an average over `taps` taps inside the input.
inline float inverse_divisor(const Geometry& g, int64_t taps) {
  return 1.0f / static_cast<float>(g.alg == Alg::avg_include_padding ? g.kh * g.kw : taps);
}

// Four windows at once, the i-th `i * step` floats past the one at offset `win` (the next lanes
// of a column, or the next columns): taps [h0, h1) x [w0, w1) of 8 whole lanes each, in four
// accumulators, so that their max / add chains overlap (one window at a time waits on each
// chain: 2x slower). Averages are scaled by `scale`.
template <bool Max>
KILN_AVX2 void four_windows(const Geometry& g, const float* src, int64_t win, int64_t step, int64_t h0, int64_t h1,
                            int64_t w0, int64_t w1, float scale, __m256 a[4]) {
  a[0] = a[1] = a[2] = a[3] = start_value<Max>();
  for (int64_t i = h0; i < h1; ++i) {
    const float* row = src + win + i * g.dh * g.src.h_stride;
    for (int64_t j = w0; j < w1; ++j) {
      const float* p = row + j * g.dw * g.src.w_stride;
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) a[k] = combine<Max>(a[k], _mm256_loadu_ps(p + k * step));
    }
  }
  if (!Max)
    for (int k = 0; k < 4; ++k) a[k] = _mm256_mul_ps(a[k], _mm256_set1_ps(scale));
}

// Output column at offset `o` whose window starts at input offset `win`: taps [h0, h1) x [w0, w1),
// lanes [l, le): four vectors at a time while whole (channels-last rows of many lanes), then one
// at a time, the last one partial.
template <bool Max>
KILN_AVX2 void one_column(const Geometry& g, const float* src, int64_t win, int64_t h0, int64_t h1, int64_t w0,
                          int64_t w1, float* o, int64_t l, int64_t le) {
  const float scale = inverse_divisor(g, (h1 - h0) * (w1 - w0));
  for (; l + 32 <= le; l += 32) {
    __m256 a[4];
    four_windows<Max>(g, src, win + l, 8, h0, h1, w0, w1, scale, a);
    for (int k = 0; k < 4; ++k) _mm256_storeu_ps(o + l + 8 * k, a[k]);
  }
  for (; l < le; l += 8) {
    const int64_t left = le - l;
    __m256 acc = start_value<Max>();
    for (int64_t i = h0; i < h1; ++i) {
      const int64_t row = win + i * g.dh * g.src.h_stride + l;
      for (int64_t j = w0; j < w1; ++j) acc = combine<Max>(acc, v_load8(src + row + j * g.dw * g.src.w_stride, left));
    }
    v_store8(o + l, left, Max ? acc : _mm256_mul_ps(acc, _mm256_set1_ps(scale)));
  }
}

// Four neighbouring output columns whose windows are whole along the width (taps [0, kw)), the
// whole vectors of their lanes [l, le). Returns the first lane it left.
template <bool Max>
KILN_AVX2 int64_t four_columns(const Geometry& g, const float* src, int64_t win, int64_t h0, int64_t h1, float* o,
                               int64_t l, int64_t le) {
  const float scale = inverse_divisor(g, (h1 - h0) * g.kw);
  for (; l + 8 <= le; l += 8) {
    __m256 a[4];
    four_windows<Max>(g, src, win + l, g.sw * g.src.w_stride, h0, h1, 0, g.kw, scale, a);
    for (int k = 0; k < 4; ++k) _mm256_storeu_ps(o + k * g.dst.w_stride + l, a[k]);
  }
  return l;
}

// One output row (image n, run r, output row y), lanes [lb, le); `cols` from column_taps.
template <bool Max>
KILN_AVX2 void pool_row(const Geometry& g, const int64_t* cols, const float* src, float* dst, int64_t n, int64_t r,
                        int64_t y, int64_t lb, int64_t le) {
  int64_t h0, h1;
  tap_range(y, g.sh, g.ph, g.dh, g.kh, g.ih, &h0, &h1);
  // offsets, not pointers, until a tap is known to be inside the input
  const int64_t in = n * g.src.n_stride + r * g.src.run_stride + (y * g.sh - g.ph) * g.src.h_stride;
  float* out = dst + n * g.dst.n_stride + r * g.dst.run_stride + y * g.dst.h_stride;
  for (int64_t x = 0; x < g.ow;) {
    const int64_t win = in + (x * g.sw - g.pw) * g.src.w_stride;
    float* o = out + x * g.dst.w_stride;
    // windows whole along the width form one run of columns: its first and fourth say
    if (x + 4 <= g.ow && cols[2 * x] == 0 && cols[2 * (x + 3) + 1] == g.kw) {
      const int64_t l = four_columns<Max>(g, src, win, h0, h1, o, lb, le);
      if (l < le)
        for (int64_t c = 0; c < 4; ++c)
          one_column<Max>(g, src, win + c * g.sw * g.src.w_stride, h0, h1, 0, g.kw, o + c * g.dst.w_stride, l, le);
      x += 4;
    } else {
      one_column<Max>(g, src, win, h0, h1, cols[2 * x], cols[2 * x + 1], o, lb, le);
      x += 1;
    }
  }
}

// Max pooling of one output row separably (where `separable`): each input column's max over the
// window's rows, then each output's max over its window's columns of those. One window as kh x kw
// taps was one chain of kh * kw dependent maxima per vector (four windows at a time:
// latency-bound, GoogLeNet's 3x3 pools at stride 1 about 18 cycles a vector); separably the chains
// are kh - 1 and kw - 1 long and independent from column to column. Output columns in chunks
// whose input columns' maxima fit kSpan vectors on the stack; columns outside the input are -inf
// (a window keeps at least one tap inside: pooling_supports).
constexpr int64_t kSpan = 128;

bool separable(const Geometry& g) {
  return g.alg == Alg::max && g.dh == 1 && g.dw == 1 && g.lanes % 8 == 0 && g.sw <= 3 && g.kw <= 32;
}

KILN_AVX2 void max_row_separable(const Geometry& g, const float* src, float* dst, int64_t n, int64_t r, int64_t y,
                                 int64_t lb, int64_t le) {
  int64_t h0, h1;
  tap_range(y, g.sh, g.ph, g.dh, g.kh, g.ih, &h0, &h1);
  const float* base = src + n * g.src.n_stride + r * g.src.run_stride + (y * g.sh - g.ph + h0) * g.src.h_stride;
  float* out = dst + n * g.dst.n_stride + r * g.dst.run_stride + y * g.dst.h_stride;
  const int64_t rows = h1 - h0, hs = g.src.h_stride, ws = g.src.w_stride, kw = g.kw, sw = g.sw;
  const int64_t chunk = (kSpan - kw) / sw + 1;
  const bool ahead = y * g.sh - g.ph + h1 < g.ih;  // a row past the window's inside the input
  const __m256 lowest = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 col[kSpan];
  for (int64_t l = lb; l < le; l += 8)
    for (int64_t ox0 = 0; ox0 < g.ow; ox0 += chunk) {
      const int64_t ox1 = std::min(g.ow, ox0 + chunk);
      const int64_t first = ox0 * sw - g.pw, span = (ox1 - 1 - ox0) * sw + kw;  // input columns [first, first + span)
      const int64_t in0 = std::clamp<int64_t>(-first, 0, span), in1 = std::clamp<int64_t>(g.iw - first, in0, span);
      for (int64_t i = 0; i < in0; ++i) col[i] = lowest;
      for (int64_t i = in1; i < span; ++i) col[i] = lowest;
      const float* p = base + (first + in0) * ws + l;
      for (int64_t i = in0; i < in1; ++i, p += ws) {
        // the row past the window's: the next output row's first new one (SqueezeNet's first
        // pool, [2, 64, 99, 103] from L3: 0.151-0.157 -> 0.136-0.138 ms; a row further level)
        if (ahead) _mm_prefetch(reinterpret_cast<const char*>(p + rows * hs), _MM_HINT_T0);
        __m256 m = _mm256_loadu_ps(p);
        for (int64_t k = 1; k < rows; ++k) m = _mm256_max_ps(m, _mm256_loadu_ps(p + k * hs));
        col[i] = m;
      }
      float* o = out + ox0 * g.dst.w_stride + l;
      for (int64_t ox = ox0; ox < ox1; ++ox, o += g.dst.w_stride) {
        const __m256* c = col + (ox - ox0) * sw;
        __m256 m = c[0];
        for (int64_t j = 1; j < kw; ++j) m = _mm256_max_ps(m, c[j]);
        _mm256_storeu_ps(o, m);
      }
    }
}

}  // namespace

bool available() { return isa_at_least(Isa::avx2); }

const char* impl_name() { return "kiln_pool:avx2_f32"; }

std::vector<int64_t> column_taps(const Geometry& g) {
  std::vector<int64_t> cols(static_cast<size_t>(2 * g.ow));
  for (int64_t x = 0; x < g.ow; ++x) tap_range(x, g.sw, g.pw, g.dw, g.kw, g.iw, &cols[2 * x], &cols[2 * x + 1]);
  return cols;
}

void run(const Geometry& g, const std::vector<int64_t>& cols, const float* src, float* dst) {
  KILN_CHECK(static_cast<int64_t>(cols.size()) == 2 * g.ow, "pool_f32::run: column taps of another geometry");
  const int64_t rows = g.batch * g.runs * g.oh;
  // few rows of many lanes (a global pool over channels-last): the lanes in pieces of 64 as well
  const int64_t piece = rows < 2 * omp_get_max_threads() && g.lanes >= 128 ? 64 : g.lanes;
  const int64_t pieces = (g.lanes + piece - 1) / piece, items = rows * pieces;
  // below about 16 K loads starting the team costs more than it saves
  const bool parallel = items > 1 && rows * g.ow * g.lanes * g.kh * g.kw >= 16384;
  const bool sep = separable(g);
  auto item = [&](int64_t t) {
    const int64_t row = t / pieces, lb = t % pieces * piece, le = std::min(g.lanes, lb + piece);
    const int64_t y = row % g.oh, r = row / g.oh % g.runs, n = row / g.oh / g.runs;
    if (sep)
      max_row_separable(g, src, dst, n, r, y, lb, le);
    else if (g.alg == Alg::max)
      pool_row<true>(g, cols.data(), src, dst, n, r, y, lb, le);
    else
      pool_row<false>(g, cols.data(), src, dst, n, r, y, lb, le);
  };
  parallel_share(items, item, parallel);
}

}  // namespace kiln::cpu::pool_f32
