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
using RowFn = void (*)(const Geometry&, const float* const*, const float*, float*);

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
#undef KILN_GC_TARGET
}  // namespace v512

// Input columns a row of the window spans, from -pad_l on: up to the last output pixel's last tap.
int64_t padded_width(const Geometry& g) { return (g.ow - 1) * g.stride_w + (g.kw - 1) * g.dil_w + 1; }

}  // namespace

bool available() { return isa_at_least(Isa::avx2); }

const char* impl_name() { return "kiln_grouped_conv:avx2_f32"; }

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

int64_t scratch_floats(const Geometry& g) { return g.kh * padded_width(g) * g.c; }

void rows(const Geometry& g, const float* x, const float* packed, int64_t oy0, int64_t oy1, float* y, float* scratch) {
  KILN_CHECK(available() && g.groups > 0 && g.c % g.groups == 0 && g.m % g.groups == 0 &&
                 supports(g.in_per_group(), g.out_per_group(), g.groups),
             "grouped_conv_f32::rows: no kernel for these channels a group on the ISA in use");
  const bool wide = isa_at_least(Isa::avx512_core);
  const bool s1k3 = !pairs(g) && g.out_per_group() == 8 && g.stride_w == 1 && g.dil_w == 1 && g.kw == 3;
  const RowFn fn = pairs(g) ? (wide ? v512::pair_row : v256::pair_row)
                   : s1k3   ? (wide ? v512::row_s1k3 : v256::row_s1k3)
                            : (wide ? v512::kRows : v256::kRows)[g.out_per_group() / 8 - 1];
  // a window row's columns: `left` of padding, `inside` of the input, then padding (a crafted
  // padding may exceed the window: any of them may be 0)
  const int64_t wp = padded_width(g), left = std::min(g.pad_l, wp), inside = std::clamp<int64_t>(wp - g.pad_l, 0, g.w);
  // whether every window row reads only inside the input row: the input is read in place
  const bool in_place = g.pad_l == 0 && wp <= g.w;
  // the window rows' pointers: on the stack for windows of up to 16 rows (the node calls this
  // once per output row), else on the heap
  const float* stack_rows[16];
  std::vector<const float*> heap_rows(g.kh > 16 ? static_cast<size_t>(g.kh) : 0);
  const float** in = g.kh > 16 ? heap_rows.data() : stack_rows;
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
      in[i] = src;
    }
    fn(g, in, packed, y + oy * g.ow * g.m);
  }
}

}  // namespace kiln::cpu::grouped_conv_f32
