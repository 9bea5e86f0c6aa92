#include "cpu/im2col_f32.hpp"

#include "cpu/simd_avx2.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

namespace kiln::cpu::im2col_f32 {

namespace {
// A window row of up to 4 columns, undilated, is copied as one 4-float move where all 4 lie in
// the input row (an image stem's 3 x 3 x 3: 9 moves a pixel instead of 27 copies); the move's
// extra floats land on the next window row's place, written after it, or on the pixel's padding.
bool moves(const Geometry& g) { return g.kw <= 4 && g.dil_w == 1; }
}  // namespace

int64_t Geometry::row_stride() const { return columns() + (moves(*this) ? 4 - kw : 0); }

void rows(const Geometry& g, const float* x, int64_t oh0, int64_t rows, float* out) {
  const int64_t lda = g.row_stride();
  // the output columns whose 4-float move stays inside the input row: ix0 = ox * stride - pad in [0, w - 4]
  int64_t first = g.ow, last = g.ow;
  if (moves(g) && g.w >= 4) {
    first = std::min<int64_t>(g.ow, (g.pad_l + g.stride_w - 1) / g.stride_w);
    last = std::clamp<int64_t>((g.w - 4 + g.pad_l) / g.stride_w + 1, first, g.ow);
  }
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t oy = oh0 + r;
    float* row = out + r * g.ow * lda;
    for (int64_t c = 0; c < g.c; ++c)
      for (int64_t i = 0; i < g.kh; ++i) {
        float* col = row + (c * g.kh + i) * g.kw;  // this window row's place in pixel 0
        const int64_t iy = oy * g.stride_h - g.pad_t + i * g.dil_h;
        if (iy < 0 || iy >= g.h) {
          for (int64_t ox = 0; ox < g.ow; ++ox) std::fill(col + ox * lda, col + ox * lda + g.kw, 0.0f);
          continue;
        }
        const float* src = x + (c * g.h + iy) * g.w;
        auto copy = [&](int64_t ox) {  // checked, column by column
          for (int64_t j = 0; j < g.kw; ++j) {
            const int64_t ix = ox * g.stride_w - g.pad_l + j * g.dil_w;
            col[ox * lda + j] = ix >= 0 && ix < g.w ? src[ix] : 0.0f;
          }
        };
        for (int64_t ox = 0; ox < first; ++ox) copy(ox);
        // pointers stepped (the geometry, read through `g`, is reloaded after every store otherwise)
        const int64_t step = g.stride_w;
        const float* s = src + first * step - g.pad_l;
        float* d = col + first * lda;
        for (int64_t ox = first; ox < last; ++ox, s += step, d += lda) _mm_storeu_ps(d, _mm_loadu_ps(s));
        for (int64_t ox = last; ox < g.ow; ++ox) copy(ox);
      }
  }
}

namespace {
// One block of a tap: `block` floats, 8 at a time.
KILN_AVX2 inline void copy_block(const float* s, float* d, int64_t block) {
  for (int64_t v = 0; v < block; v += 8) _mm256_storeu_ps(d + v, _mm256_loadu_ps(s + v));
}

// window_rows for blocks of B floats (8: nChw8c), or of `block` (B == 0: channels-last, block ==
// c). A window row inside the image on both sides (the pixels away from the left and right
// edges) is copied block by block, its taps' vectors one after another; the rest tap by tap.
template <int64_t B>
KILN_AVX2 void window_rows_of(const Geometry& g, int64_t block_arg, const float* x, int64_t p0, int64_t rows, float* out) {
  const int64_t block = B ? B : block_arg;
  const int64_t columns = g.columns(), plane = g.h * g.w * block, blocks = g.c / block;
  const int64_t tap_step = g.dil_w * block, span = (g.kw - 1) * g.dil_w;
  const __m256 zero = _mm256_setzero_ps();
  int64_t oy = p0 / g.ow, ox = p0 % g.ow;
  for (int64_t r = 0; r < rows; ++r, out += columns) {
    const int64_t ix0 = ox * g.stride_w - g.pad_l;
    const bool inside = ix0 >= 0 && ix0 + span < g.w;
    for (int64_t i = 0; i < g.kh; ++i) {
      float* d = out + i * g.kw * g.c;
      const int64_t iy = oy * g.stride_h - g.pad_t + i * g.dil_h;
      if (iy < 0 || iy >= g.h) {
        for (int64_t v = 0; v < g.kw * g.c; v += 8) _mm256_storeu_ps(d + v, zero);
        continue;
      }
      const float* s = x + (iy * g.w + ix0) * block;
      if (inside) {
        for (int64_t cb = 0; cb < blocks; ++cb)
          for (int64_t j = 0; j < g.kw; ++j) copy_block(s + cb * plane + j * tap_step, d + j * g.c + cb * block, block);
        continue;
      }
      for (int64_t j = 0; j < g.kw; ++j, d += g.c) {
        const int64_t ix = ix0 + j * g.dil_w;
        if (ix < 0 || ix >= g.w) {
          for (int64_t v = 0; v < g.c; v += 8) _mm256_storeu_ps(d + v, zero);
          continue;
        }
        for (int64_t cb = 0; cb < blocks; ++cb) copy_block(s + cb * plane + j * tap_step, d + cb * block, block);
      }
    }
    if (++ox == g.ow) ox = 0, ++oy;
  }
}
}  // namespace

void window_rows(const Geometry& g, int64_t block, const float* x, int64_t p0, int64_t rows, float* out) {
  if (block == 8)
    window_rows_of<8>(g, 8, x, p0, rows, out);
  else
    window_rows_of<0>(g, block, x, p0, rows, out);
}

void window_weights(const Geometry& g, int64_t m, const float* w, float* out) {
  const int64_t taps = g.kh * g.kw, columns = g.columns();
  for (int64_t n = 0; n < m; ++n)
    for (int64_t ch = 0; ch < g.c; ++ch)
      for (int64_t t = 0; t < taps; ++t) out[n * columns + t * g.c + ch] = w[(n * g.c + ch) * taps + t];
}

void strided_pixels(const Geometry& g, const float* x, int64_t oh0, int64_t rows, float* out) {
  const size_t bytes = static_cast<size_t>(g.c) * sizeof(float);
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = x + (oh0 + r) * g.stride_h * g.w * g.c;
    for (int64_t ox = 0; ox < g.ow; ++ox, out += g.c) std::memcpy(out, src + ox * g.stride_w * g.c, bytes);
  }
}

}  // namespace kiln::cpu::im2col_f32
