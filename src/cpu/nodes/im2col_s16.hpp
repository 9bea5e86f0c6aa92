#pragma once
// The im2col of kiln's exact int8 convolutions without VNNI (gemm_s16.hpp): QLinearConv
// (quantized_convolution.cpp) and ConvInteger (conv_integer.cpp) multiply its rows by their
// packed weights, 16-bit (run_widened) or u8 (run_u8s8).
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cpu/gemm_s16.hpp"
#include "cpu/nodes/conv_geometry.hpp"

namespace kiln::cpu {

// A 2-D window over one channels-last image [H, W, C] (u8 or s8) giving [OH, OW] positions.
struct Im2colShape {
  int64_t H = 0, W = 0, C = 0, KH = 0, KW = 0, OH = 0, OW = 0;
};

// Under each output position of the window, a row of `row_len` values of type Out ordered (kh,
// kw, c): copy(src, n, dst) puts the n values of x from `src` on, pad(dst, n) the n values of a
// position outside the image; 0 past K. On the calling thread's OpenMP team.
template <typename T, typename Out, typename Copy, typename Pad>
void im2col_rows(const T* x, const Im2colShape& s, const ConvGeometry& geo, int64_t row_len, Out* rows, Copy copy,
                 Pad pad) {
  const int64_t C = s.C, K = s.KH * s.KW * C;
#pragma omp parallel for schedule(static)
  for (int64_t oh = 0; oh < s.OH; ++oh)
    for (int64_t ow = 0; ow < s.OW; ++ow) {
      Out* row = rows + (oh * s.OW + ow) * row_len;
      for (int64_t kh = 0; kh < s.KH; ++kh) {
        const int64_t ih = oh * geo.strides[0] - geo.pad_l[0] + kh * (geo.dilations[0] + 1);
        const int64_t iw0 = ow * geo.strides[1] - geo.pad_l[1];
        Out* dst = row + kh * s.KW * C;
        if (ih >= 0 && ih < s.H && geo.dilations[1] == 0 && iw0 >= 0 && iw0 + s.KW <= s.W) {
          // the window's row inside the image: KW * C consecutive values (the stem's 7 x 3)
          copy(x + (ih * s.W + iw0) * C, s.KW * C, dst);
          continue;
        }
        for (int64_t kw = 0; kw < s.KW; ++kw, dst += C) {
          const int64_t iw = iw0 + kw * (geo.dilations[1] + 1);
          if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) {
            pad(dst, C);
          } else {
            copy(x + (ih * s.W + iw) * C, C, dst);
          }
        }
      }
      for (int64_t i = K; i < row_len; ++i) row[i] = 0;  // at most 3
    }
}

// The GEMM's A: under each output position, the window's values less `zx` as 16-bit, rows of
// gemm_s16::widened_row(KH * KW * C) values ordered (kh, kw, c), 0 in the padding (the operators
// pad x with its zero point, so x - zx is 0 there). On the calling thread's OpenMP team.
template <typename T>
void im2col_s16(const T* x, const Im2colShape& s, const ConvGeometry& geo, int32_t zx, int16_t* wide) {
  im2col_rows(
      x, s, geo, gemm_s16::widened_row(s.KH * s.KW * s.C), wide,
      [zx](const T* src, int64_t n, int16_t* dst) { gemm_s16::widen(src, n, zx, dst); },
      [](int16_t* dst, int64_t n) { std::fill(dst, dst + n, int16_t{0}); });
}

// The u8 im2col of gemm_s16::run_u8s8: under each output position the window's u8 values as
// they are, rows of gemm_s16::quad_row(KH * KW * C) bytes ordered (kh, kw, c), `zx` in the
// padding (the operators pad x with its zero point: the caller subtracts zx times the weights'
// column sums from every sum), 0 past K. On the calling thread's OpenMP team.
inline void im2col_u8(const uint8_t* x, const Im2colShape& s, const ConvGeometry& geo, uint8_t zx, uint8_t* rows) {
  im2col_rows(
      x, s, geo, gemm_s16::quad_row(s.KH * s.KW * s.C), rows,
      [](const uint8_t* src, int64_t n, uint8_t* dst) { std::copy_n(src, n, dst); },
      [zx](uint8_t* dst, int64_t n) {
        for (int64_t i = 0; i < n; ++i) dst[i] = zx;
      });
}

// The weights w [M, C, KH, KW] (8-bit, `w` raw bytes) as the GEMM's B [K, M] in the rows'
// order: B[(kh * KW + kw) * C + c][m] = w[m][c][kh][kw], for gemm_s16::pack_b.
inline std::vector<uint8_t> im2col_weights(const void* w, int64_t M, int64_t C, int64_t KH, int64_t KW) {
  const auto* src = static_cast<const uint8_t*>(w);
  const int64_t taps = KH * KW;
  std::vector<uint8_t> b(static_cast<size_t>(taps * C * M));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t k = 0; k < taps; ++k) b[static_cast<size_t>((k * C + c) * M + m)] = src[(m * C + c) * taps + k];
  return b;
}

}  // namespace kiln::cpu
