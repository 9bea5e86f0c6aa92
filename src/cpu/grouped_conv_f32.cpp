#include "cpu/grouped_conv_f32.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include <kiln/error.hpp>
#include "cpu/isa.hpp"
#include "cpu/simd_avx2.hpp"

namespace kiln::cpu::grouped_conv_f32 {

namespace {

// P output pixels from ox0 on of one output row and group, V vectors of 8 output channels each
// (the group's), `y` the row's output; `in` the kh input rows of the window, each from input
// column -pad_l on with the padding's zeros in place (null: a row of padding). P independent
// sums (V each) keep the multiply-adds from waiting on one another.
template <int V, int P>
KILN_AVX2 void pixels(const Geometry& g, const float* const* in, const float* wg, int64_t ox0, int64_t group, float* y) {
  __m256 acc[P][V];
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p)
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) acc[p][v] = _mm256_setzero_ps();
  const int64_t cg = g.in_per_group(), og = 8 * V, step = g.stride_w * g.c;
  for (int64_t i = 0; i < g.kh; ++i) {
    if (!in[i]) continue;
    const float* xr = in[i] + ox0 * step + group * cg;
    for (int64_t j = 0; j < g.kw; ++j) {
      const float* xp = xr + j * g.dil_w * g.c;
      const float* wt = wg + (i * g.kw + j) * cg * og;
      for (int64_t ci = 0; ci < cg; ++ci, wt += og) {
        __m256 wv[V];
#pragma GCC unroll 8
        for (int v = 0; v < V; ++v) wv[v] = _mm256_loadu_ps(wt + 8 * v);
#pragma GCC unroll 8
        for (int p = 0; p < P; ++p) {
          const __m256 xv = _mm256_broadcast_ss(xp + p * step + ci);
#pragma GCC unroll 8
          for (int v = 0; v < V; ++v) acc[p][v] = _mm256_fmadd_ps(xv, wv[v], acc[p][v]);
        }
      }
    }
  }
  float* out = y + ox0 * g.m + group * og;
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p)
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) _mm256_storeu_ps(out + p * g.m + 8 * v, acc[p][v]);
}

using PixelsFn = void (*)(const Geometry&, const float* const*, const float*, int64_t, int64_t, float*);

// pixels<V, n> for n = 1 .. 8.
template <int V>
constexpr PixelsFn kPixels[8] = {pixels<V, 1>, pixels<V, 2>, pixels<V, 3>, pixels<V, 4>,
                                 pixels<V, 5>, pixels<V, 6>, pixels<V, 7>, pixels<V, 8>};

// One output row: per group, runs of pixels of nearly equal length, at most P (a run of few
// pixels has too few sums to keep the multiply-adds busy: 28 pixels are 4 runs of 7, not 3 of
// 8 and one of 4).
template <int V, int P>
KILN_AVX2 void row(const Geometry& g, const float* const* in, const float* packed, float* y) {
  const int64_t per_group = g.kh * g.kw * g.in_per_group() * 8 * V;
  const int64_t runs = (g.ow + P - 1) / P;
  for (int64_t group = 0; group < g.groups; ++group) {
    const float* wg = packed + group * per_group;
    for (int64_t r = 0; r < runs; ++r) {
      const int64_t ox = g.ow * r / runs, n = g.ow * (r + 1) / runs - ox;  // 1 <= n <= P
      kPixels<V>[n - 1](g, in, wg, ox, group, y);
    }
  }
}

using RowFn = void (*)(const Geometry&, const float* const*, const float*, float*);
// By out_per_group / 8 - 1: as many pixels as keep the accumulators in 8-12 of AVX2's 16 registers.
constexpr RowFn kRows[4] = {row<1, 8>, row<2, 6>, row<3, 4>, row<4, 3>};

// Input columns a row of the window spans, from -pad_l on: up to the last output pixel's last tap.
int64_t padded_width(const Geometry& g) { return (g.ow - 1) * g.stride_w + (g.kw - 1) * g.dil_w + 1; }

}  // namespace

bool available() { return isa_at_least(Isa::avx2); }

const char* impl_name() { return "kiln_grouped_conv:avx2_f32"; }

bool supports(int64_t in_per_group, int64_t out_per_group) {
  return in_per_group > 0 && out_per_group > 0 && out_per_group % 8 == 0 && out_per_group <= 32;
}

int64_t packed_size(const Geometry& g) { return g.m * g.in_per_group() * g.kh * g.kw; }

void pack_weights(const Geometry& g, const float* w, float* out) {
  const int64_t cg = g.in_per_group(), og = g.out_per_group(), taps = g.kh * g.kw;
  for (int64_t group = 0; group < g.groups; ++group)
    for (int64_t o = 0; o < og; ++o)
      for (int64_t ci = 0; ci < cg; ++ci)
        for (int64_t t = 0; t < taps; ++t)
          out[((group * taps + t) * cg + ci) * og + o] = w[((group * og + o) * cg + ci) * taps + t];
}

int64_t scratch_floats(const Geometry& g) { return g.kh * padded_width(g) * g.c; }

void rows(const Geometry& g, const float* x, const float* packed, int64_t oy0, int64_t oy1, float* y, float* scratch) {
  KILN_CHECK(available() && supports(g.in_per_group(), g.out_per_group()) && g.groups > 0 && g.c % g.groups == 0,
             "grouped_conv_f32::rows: no kernel for these channels a group on the ISA in use");
  const RowFn fn = kRows[g.out_per_group() / 8 - 1];
  // a window row's columns: `left` of padding, `inside` of the input, then padding (a crafted
  // padding may exceed the window: any of them may be 0)
  const int64_t wp = padded_width(g), left = std::min(g.pad_l, wp), inside = std::clamp<int64_t>(wp - g.pad_l, 0, g.w);
  // whether every window row reads only inside the input row: the input is read in place
  const bool in_place = g.pad_l == 0 && wp <= g.w;
  std::vector<const float*> in(static_cast<size_t>(g.kh));
  for (int64_t oy = oy0; oy < oy1; ++oy) {
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t iy = oy * g.stride_h - g.pad_t + i * g.dil_h;
      const float* src = iy >= 0 && iy < g.h ? x + iy * g.w * g.c : nullptr;
      if (src && !in_place) {  // the row between its padding's zeros
        float* row = scratch + i * wp * g.c;
        std::fill(row, row + left * g.c, 0.0f);
        std::memcpy(row + left * g.c, src, static_cast<size_t>(inside * g.c) * sizeof(float));
        std::fill(row + (left + inside) * g.c, row + wp * g.c, 0.0f);
        src = row;
      }
      in[static_cast<size_t>(i)] = src;
    }
    fn(g, in.data(), packed, y + oy * g.ow * g.m);
  }
}

}  // namespace kiln::cpu::grouped_conv_f32
