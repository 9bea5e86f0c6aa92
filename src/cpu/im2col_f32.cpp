#include "cpu/im2col_f32.hpp"

#include <algorithm>

namespace kiln::cpu::im2col_f32 {

void rows(const Geometry& g, const float* x, int64_t oh0, int64_t rows, float* out) {
  const int64_t K = g.columns();
  for (int64_t r = 0; r < rows; ++r) {
    float* row = out + r * g.ow * K;  // [ow][K]
    const int64_t oy = oh0 + r;
    for (int64_t c = 0; c < g.c; ++c)
      for (int64_t i = 0; i < g.kh; ++i) {
        const int64_t iy = oy * g.stride_h - g.pad_t + i * g.dil_h;
        const bool inside = iy >= 0 && iy < g.h;
        const float* src = x + (c * g.h + (inside ? iy : 0)) * g.w;
        for (int64_t j = 0; j < g.kw; ++j) {
          float* dst = row + (c * g.kh + i) * g.kw + j;  // column k of pixel 0; pixels K apart
          if (!inside) {
            for (int64_t ox = 0; ox < g.ow; ++ox) dst[ox * K] = 0.0f;
            continue;
          }
          // the output columns whose input column lies inside: ix = ox * stride - pad + j * dil in [0, w)
          const int64_t off = j * g.dil_w - g.pad_l;
          const int64_t first = std::clamp<int64_t>(off >= 0 ? 0 : (-off + g.stride_w - 1) / g.stride_w, 0, g.ow);
          const int64_t last =
              g.w - 1 - off < 0 ? 0 : std::clamp<int64_t>((g.w - 1 - off) / g.stride_w + 1, first, g.ow);
          for (int64_t ox = 0; ox < first; ++ox) dst[ox * K] = 0.0f;
          for (int64_t ox = first; ox < last; ++ox) dst[ox * K] = src[ox * g.stride_w + off];
          for (int64_t ox = std::max(first, last); ox < g.ow; ++ox) dst[ox * K] = 0.0f;
        }
      }
  }
}

}  // namespace kiln::cpu::im2col_f32
