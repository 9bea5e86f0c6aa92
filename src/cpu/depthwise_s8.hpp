#pragma once
// kiln's exact 8-bit depthwise convolution for CPUs without VNNI (AVX2): one 2-D window per
// channel over channels-last u8 / s8 data, stored as gemm_s16's Output says: requantized to 8
// bits (a QLinearConv with group = channels, MobileNet's 3x3 layers), scaled to float (a
// dynamically quantized one, ConvIntegerToFloat) or as the int32 sums (ConvInteger).
//   s[oh][ow][c] = sum over the window (x[ih][iw][c] - x_zp) * w[kh][kw][c]
//   y = requant(s + bias[c]) | float(s) * scale[c] (+ bias[c]) | s
// Each thread converts the input rows its output rows need once, to floats less x_zp inside a
// border of zeros (the padding, where x - x_zp is 0), into a ring of rows that stays in L2, so
// the window loop has no bounds; the products and their sums are integers below 2^24
// (exact_taps), so f32 FMAs compute them exactly, 4 pixels x 8 channels at a time, requantized
// from the registers.
#include <algorithm>
#include <cstdint>

#include "cpu/gemm_s16.hpp"

namespace kiln::cpu::depthwise_s8 {

// Whether the ISA in use (cpu/isa.hpp, with its cap) runs the kernel: AVX2.
bool available();
// Whether a window of `taps` values keeps every sum exact in f32: taps * 255 * max|w| < 2^24
// (|x - x_zp| <= 255; s8 weights without a zero point: |w| <= 128).
inline bool exact_taps(int64_t taps, int64_t max_abs_w = 128) {
  return taps > 0 && max_abs_w >= 0 && taps * 255 * std::max<int64_t>(max_abs_w, 1) < (int64_t{1} << 24);
}

struct Geometry {
  int64_t H = 0, W = 0, C = 0, KH = 0, KW = 0, OH = 0, OW = 0;
  int64_t stride_h = 1, stride_w = 1, pad_t = 0, pad_l = 0, dilation_h = 1, dilation_w = 1;  // ONNX's dilations
};

// Bytes of working memory run() needs on a team of `threads`: a ring of rows per thread.
size_t scratch_bytes(const Geometry& g, int threads);

// One image: x [H, W, C] (s8 when `x_signed`, else u8) with zero point zx, w [KH][KW][C] as
// floats (less their zero points), y [OH, OW, C] as `out` says: 8 bits requantized by
// out.requant (its sum: y holds the other operand before), float (out.scale per channel or one,
// out.bias), else int32. Runs on the calling thread's OpenMP team, at most `threads` of it
// (scratch_bytes). available() and exact_taps(KH * KW, max |w|) must hold.
void run(const uint8_t* x, bool x_signed, int32_t zx, const float* w, const Geometry& g, void* y,
         const gemm_s16::Output& out, void* scratch, int threads);

}  // namespace kiln::cpu::depthwise_s8
