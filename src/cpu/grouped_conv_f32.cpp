#include "cpu/grouped_conv_f32.hpp"

#include <algorithm>
#include <array>
#include <utility>
#include <cstring>
#include <vector>

#include <kiln/error.hpp>
#include "cpu/isa.hpp"
#include "cpu/simd_avx2.hpp"

namespace kiln::cpu::grouped_conv_f32 {

namespace {

using PixelsFn = void (*)(const Geometry&, const float* const*, const float*, int64_t, int64_t, float*);
using RowFn = void (*)(const Geometry&, const float* const*, const float*, float*, int64_t, int64_t);

namespace v256 {
#define KILN_GC_TARGET KILN_AVX2
constexpr int kAccumulators = 12;
#include "cpu/grouped_conv_f32_row.inc"
#undef KILN_GC_TARGET
}  // namespace v256

namespace v512 {
#define KILN_GC_TARGET __attribute__((target("avx512f,avx512dq,avx512vl,fma")))
constexpr int kAccumulators = 24;
#include "cpu/grouped_conv_f32_row.inc"
#include "cpu/grouped_conv_f32_zmm.inc"
#undef KILN_GC_TARGET
}  // namespace v512

// Input columns a row of the window spans, from -pad_l on: up to the last output pixel's last tap.
int64_t padded_width(const Geometry& g) { return (g.ow - 1) * g.stride_w + (g.kw - 1) * g.dil_w + 1; }

// Whether the 16-lane forms compute the groups (grouped_conv_f32_zmm.inc): 16 or 32 outputs a
// group, on AVX-512.
bool sixteen_lanes(const Geometry& g) {
  return isa_at_least(Isa::avx512_core) && (g.out_per_group() == 16 || g.out_per_group() == 32);
}

// Floats from one pixel to the next in rows() copies of the input rows: c, and a cache line more
// for the 16-lane forms' long runs where c is a multiple of 64 floats (256 bytes). Else a run's
// pixels and taps (ResNeXt's 512 channels: 2 KiB apart, 4 KiB at stride 2) all fall in one or
// two of L1's 64 sets, more lines than its 8 ways: at stride 2 a run of 14 pixels read 29 lines
// of one set, and went at half the speed of runs of 7 (BM_GroupedConvResNeXt/512/28/2/16, one
// thread: 49 -> 87 GFLOP/s). Not for the 8-lane forms (below AVX-512, or groups of 4, 8 or 24):
// their runs are short, and a copy a pixel instead of one a row cost groups of 4 and 8 a fifth of
// their time.
int64_t padded_pixel(const Geometry& g) { return sixteen_lanes(g) && g.c % 64 == 0 ? g.c + 16 : g.c; }

}  // namespace

bool available() { return isa_at_least(Isa::avx2); }

const char* impl_name() {
  return isa_at_least(Isa::avx512_core) ? "kiln_grouped_conv:avx512_core_f32" : "kiln_grouped_conv:avx2_f32";
}

namespace {
// Groups of 4 input and 4 output channels, taken two at a time (pair_row).
bool pairs(const Geometry& g) { return g.in_per_group() == 4 && g.out_per_group() == 4; }
}  // namespace

bool supports(int64_t in_per_group, int64_t out_per_group, int64_t groups) {
  if (in_per_group == 4 && out_per_group == 4) return groups % 2 == 0;
  return in_per_group > 0 && out_per_group > 0 && out_per_group % 8 == 0 && out_per_group <= 32;
}

int64_t packed_size(const Geometry& g) { return g.m * g.in_per_group() * g.kh * g.kw; }

void pack_weights(const Geometry& g, const float* w, float* out) {
  const int64_t cg = g.in_per_group(), og = g.out_per_group(), taps = g.kh * g.kw;
  if (pairs(g)) {  // [pair][tap][k][8 lanes (h, ci)]: group 2 pair + h's weight from ci to (ci + k) mod 4
    for (int64_t group = 0; group < g.groups; ++group)
      for (int64_t k = 0; k < 4; ++k)
        for (int64_t ci = 0; ci < 4; ++ci)
          for (int64_t t = 0; t < taps; ++t)
            out[(((group / 2) * taps + t) * 4 + k) * 8 + (group % 2) * 4 + ci] =
                w[((group * 4 + (ci + k) % 4) * 4 + ci) * taps + t];
    return;
  }
  for (int64_t group = 0; group < g.groups; ++group)
    for (int64_t o = 0; o < og; ++o)
      for (int64_t ci = 0; ci < cg; ++ci)
        for (int64_t t = 0; t < taps; ++t)
          out[((group * taps + t) * cg + ci) * og + o] = w[((group * og + o) * cg + ci) * taps + t];
}

namespace {

// Input rows a band of `b` output rows reads at most (its window rows, each copied once).
int64_t band_input_rows(const Geometry& g, int64_t b) {
  return std::min(b * g.kh, (b - 1) * g.stride_h + (g.kh - 1) * g.dil_h + 1);
}

// The bytes of a band's copied input rows rows() aims for: with a unit's weights, in L2 of every
// CPU kiln runs on (256 KiB and up).
constexpr int64_t kBandBytes = 160 << 10;

// The units a row is computed in (groups, or pairs of groups of 4) and their packed weights' floats.
int64_t units(const Geometry& g) { return pairs(g) ? g.m / 8 : g.groups; }
int64_t unit_floats(const Geometry& g) { return packed_size(g) / units(g); }

}  // namespace

int64_t band_rows(const Geometry& g) {
  const int64_t row = std::max<int64_t>(1, padded_width(g) * padded_pixel(g) * static_cast<int64_t>(sizeof(float)));
  int64_t b = 1;
  while (b < g.oh && band_input_rows(g, b + 1) * row <= kBandBytes) ++b;
  return b;
}

int64_t scratch_floats(const Geometry& g) { return band_input_rows(g, band_rows(g)) * padded_width(g) * padded_pixel(g); }

void rows(const Geometry& g, const float* x, const float* packed, int64_t oy0, int64_t oy1, float* y, float* scratch) {
  KILN_CHECK(available() && g.groups > 0 && g.c % g.groups == 0 && g.m % g.groups == 0 &&
                 supports(g.in_per_group(), g.out_per_group(), g.groups),
             "grouped_conv_f32::rows: no kernel for these channels a group on the ISA in use");
  const bool wide = isa_at_least(Isa::avx512_core);
  // stride 1, undilated, 3 columns a window: each input value broadcast once for its three taps
  const bool s1k3_window = g.stride_w == 1 && g.dil_w == 1 && g.kw == 3;
  const bool s1k3 = !pairs(g) && g.out_per_group() == 8 && s1k3_window;
  const RowFn fn = pairs(g) ? (wide ? v512::pair_row : v256::pair_row)
                   : sixteen_lanes(g)
                       ? (g.out_per_group() == 16 ? (s1k3_window ? v512::zrow<1, true> : v512::zrow<1, false>)
                                                  : (s1k3_window ? v512::zrow<2, true> : v512::zrow<2, false>))
                   : s1k3   ? (wide ? v512::row_s1k3 : v256::row_s1k3)
                            : (wide ? v512::kRows : v256::kRows)[g.out_per_group() / 8 - 1];
  // a window row's columns: `left` of padding, `inside` of the input, then padding (a crafted
  // padding may exceed the window: any of them may be 0)
  const int64_t wp = padded_width(g), left = std::min(g.pad_l, wp), inside = std::clamp<int64_t>(wp - g.pad_l, 0, g.w);
  // whether every window row reads only inside the input row: the input is read in place
  const bool in_place = g.pad_l == 0 && wp <= g.w;
  Geometry k = g;  // the kernels' view: the pixel stride of the rows they read
  k.xs = in_place ? g.c : padded_pixel(g);
  // Bands of output rows: each input row a band reads copied once (not once for each output row
  // that reads it), and per band, units of at most kUnitBytes of weights for every row of the
  // band (a unit's weights read from L1 for each row, not from L2 or beyond: ResNeXt's last
  // stage has 1.2 MiB of weights, a unit of 36 KiB).
  const int64_t band = band_rows(g);
  constexpr int64_t kUnitBytes = 16 << 10;
  const int64_t per_unit = unit_floats(g), n_units = units(g);
  const int64_t unit_step = std::max<int64_t>(1, kUnitBytes / std::max<int64_t>(1, per_unit * 4));
  // the band's window rows' pointers (kh an output row): on the stack up to 64, else on the heap
  const int64_t ptrs = band * g.kh;
  const float* stack_rows[64];
  std::vector<const float*> heap_rows(ptrs > 64 ? static_cast<size_t>(ptrs) : 0);
  const float** in = ptrs > 64 ? heap_rows.data() : stack_rows;
  // input row iy into `row` between its padding's zeros, k.xs floats a pixel
  auto copy_row = [&](int64_t iy, float* row) {
    const float* src = x + iy * g.w * g.c;
    std::fill(row, row + left * k.xs, 0.0f);
    if (k.xs == g.c) {
      std::memcpy(row + left * g.c, src, static_cast<size_t>(inside * g.c) * sizeof(float));
    } else {
      for (int64_t p = 0; p < inside; ++p)
        std::memcpy(row + (left + p) * k.xs, src + p * g.c, static_cast<size_t>(g.c) * sizeof(float));
    }
    std::fill(row + (left + inside) * k.xs, row + wp * k.xs, 0.0f);
  };
  for (int64_t b0 = oy0; b0 < oy1; b0 += band) {
    const int64_t b1 = std::min(oy1, b0 + band), first = b0 * g.stride_h - g.pad_t;
    // The band's input rows in scratch: where its windows span no more rows than they read
    // (band_input_rows), each row of the span once, at its offset from the first; else (windows
    // dilated apart) each window row in a slot of its own
    const int64_t span = (b1 - 1 - b0) * g.stride_h + (g.kh - 1) * g.dil_h + 1;
    const bool by_offset = span <= (b1 - b0) * g.kh;
    if (!in_place && by_offset)
      for (int64_t r = 0; r < span; ++r)
        if (first + r >= 0 && first + r < g.h) copy_row(first + r, scratch + r * wp * k.xs);
    for (int64_t oy = b0; oy < b1; ++oy)
      for (int64_t i = 0; i < g.kh; ++i) {
        const int64_t iy = oy * g.stride_h - g.pad_t + i * g.dil_h, slot = (oy - b0) * g.kh + i;
        const float* src = iy >= 0 && iy < g.h ? x + iy * g.w * g.c : nullptr;
        if (src && !in_place) {
          float* row = scratch + (by_offset ? iy - first : slot) * wp * k.xs;
          if (!by_offset) copy_row(iy, row);
          src = row;
        }
        in[slot] = src;
      }
    for (int64_t u0 = 0; u0 < n_units; u0 += unit_step) {
      const int64_t u1 = std::min(n_units, u0 + unit_step);
      for (int64_t oy = b0; oy < b1; ++oy) fn(k, in + (oy - b0) * g.kh, packed, y + oy * g.ow * g.m, u0, u1);
    }
  }
}

}  // namespace kiln::cpu::grouped_conv_f32
