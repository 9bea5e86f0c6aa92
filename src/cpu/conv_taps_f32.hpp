#pragma once
// A stride-1 convolution whose window mostly reads padding, as a sum of 1x1 convolutions: one
// GEMM (gemm_f32) per tap of the window that reads the input anywhere, over the output pixels
// where it does. DeepLab's atrous pyramid is the case: a 3x3 window at dilation 12 over a map of
// 10 x 16 reads the input with 3 of its 9 taps, and those two besides the centre with 4 columns
// of 16. oneDNN has only brgconv there, made again for every new input shape (1.1-3.1 ms each);
// this makes nothing per shape: the weights are packed once, a B per tap.
//
// Channels-last in and out (x [N, H, W, C], y [N, H, W, M]), f32, group 1, the output the size
// of the input, and a centre tap that reads each output pixel's own input pixel (so the first
// GEMM writes every output pixel: the others add to it). A tap whose output columns are whole
// rows reads x in place; one that reads a part of each row has its pixels gathered first and
// its product added into y afterwards.
#include <cstdint>
#include <optional>
#include <vector>

#include "cpu/gemm_f32.hpp"
#include "cpu/im2col_f32.hpp"

namespace kiln::cpu::conv_taps_f32 {

// One tap that reads the input: its place in the window (row-major, kh * KW + kw), and the
// output rows [r0, r1) and columns [c0, c1) where it does, reading x[r + dh][c + dw].
struct Tap {
  int64_t index = 0;
  int64_t dh = 0, dw = 0;
  int64_t r0 = 0, r1 = 0, c0 = 0, c1 = 0;
  int64_t pixels() const { return (r1 - r0) * (c1 - c0); }
};

struct Plan {
  int64_t batch = 0, c = 0, h = 0, w = 0, m = 0;  // images, input channels, size (in = out), output channels
  int64_t window = 0;                              // taps in the window (kh * kw): packed B's
  int64_t center = 0;                              // the tap at each output pixel's own input pixel
  std::vector<Tap> others;                         // the other taps that read the input
  int64_t live_pixels = 0;                         // pixels all live taps read, centre's included
};

// The plan of geometry `g` (im2col_f32's, dilations as ONNX's) for `batch` images and `m` output
// channels: at stride 1 with the output the size of the input and a centre tap, when the live
// taps read at most kMaxLiveRatio times the output's pixels (a window that reads the input
// with most of its taps keeps the dense kernels); else nothing.
constexpr int64_t kMaxLiveRatio = 3;
std::optional<Plan> plan(const im2col_f32::Geometry& g, int64_t batch, int64_t m);

// Floats of working memory run() needs (gathered pixels and their products).
int64_t scratch_floats(const Plan& p);

// Floats of the packed weights: a gemm_f32 B of [c, m] for every tap of the window.
int64_t packed_floats(int64_t c, int64_t m, int64_t window);
// Packs w ([m][c][window], the ONNX layout) into `out` (packed_floats).
void pack(const float* w, int64_t c, int64_t m, int64_t window, float* out);

// A convolution's epilogue in the two parts run() applies: `first` with the centre's GEMM (the
// bias, any accumulation onto a summand already in y; the ops too when no other tap reads the
// input), `last` once every tap has added its part (the ops; empty when they went first).
// Split once, when the node is prepared: run() then copies nothing.
void split_epilogue(const Plan& p, const gemm_f32::Epilogue& epilogue, gemm_f32::Epilogue* first,
                    gemm_f32::Epilogue* last);

// y = the convolution of x with the epilogue split_epilogue() gave. On the calling thread's
// OpenMP team (`threads` of it for the gathers and sums). gemm_f32::available() must hold.
void run(const Plan& p, const float* x, const float* packed, float* y, const gemm_f32::Epilogue& first,
         const gemm_f32::Epilogue& last, float* scratch, int threads);

}  // namespace kiln::cpu::conv_taps_f32
