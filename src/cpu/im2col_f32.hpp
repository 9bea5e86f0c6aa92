#pragma once
// kiln's im2col, for a convolution computed as a GEMM (ConvolutionNode's kiln path where input
// shapes vary): each output pixel a row, each (channel, kernel row, kernel column) a column, in
// the order of the weights' [out, in, kh, kw]; zeros where the window leaves the image. From plain
// NCHW, sizes as arguments (nothing made per shape).
#include <cstdint>

namespace kiln::cpu::im2col_f32 {

// The most columns (Cin * kh * kw) kiln computes a window convolution for as im2col and GEMM:
// an image stem (3 x 3 x 3, 3 x 7 x 7 is 147: oneDNN's direct kernels), where a row of A is
// short enough that the copies cost little next to the products.
constexpr int64_t kMaxColumns = 64;

struct Geometry {
  int64_t c = 0, h = 0, w = 0;    // input channels and size
  int64_t kh = 1, kw = 1;         // window
  int64_t oh = 0, ow = 0;         // output size
  int64_t stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  int64_t pad_t = 0, pad_l = 0;   // input rows above row 0 / columns left of column 0
  int64_t columns() const { return c * kh * kw; }
  // Whether each output pixel is the input pixel at its place (1x1, stride 1, unpadded): the
  // GEMM then reads x itself, channels-last, and no im2col is made.
  bool pointwise() const {
    return kh == 1 && kw == 1 && stride_h == 1 && stride_w == 1 && pad_t == 0 && pad_l == 0 && oh == h && ow == w;
  }
  // Whether each output pixel is the input pixel at (oy * stride_h, ox * stride_w) (1x1, strided,
  // unpadded: a ResNet's downsampling shortcut): the GEMM reads those pixels gathered from x
  // channels-last (strided_pixels), K = c.
  bool strided_pointwise() const {
    return kh == 1 && kw == 1 && (stride_h > 1 || stride_w > 1) && pad_t == 0 && pad_l == 0 &&
           oh == (h - 1) / stride_h + 1 && ow == (w - 1) / stride_w + 1;
  }
  // Floats from one pixel's row of `out` to the next: columns(), and room for a 4-float move's
  // extra floats after the last window row (never read as columns).
  int64_t row_stride() const;
};

// Output rows [oh0, oh0 + rows) of one image `x` ([c][h][w]) into `out` ([rows * ow][row_stride()]).
void rows(const Geometry& g, const float* x, int64_t oh0, int64_t rows, float* out);

// A window over many channels (columns() > kMaxColumns, c a multiple of 8) from an input in
// channel blocks of `block` floats ([c / block][h][w][block]; block == c: channels-last
// [h][w][c]), block a multiple of 8 dividing c: output pixels [p0, p0 + rows) of one image `x`
// (row-major over oh x ow) into `out` ([rows][columns()]), pixel p's column (ky * kw + kx) * c
// + ch its window's tap (ky, kx) at channel ch, zeros where the tap reads padding. The weights
// are packed in that order (window_weights). Every copy is a whole 8-float vector: AVX2, the
// caller checks.
void window_rows(const Geometry& g, int64_t block, const float* x, int64_t p0, int64_t rows, float* out);

// The weights [m][c][kh][kw] as window_rows orders the columns: out[n][(ky * kw + kx) * c + ch]
// (m x columns() floats), for gemm_f32::pack_b with stride_k 1 and stride_n columns().
void window_weights(const Geometry& g, int64_t m, const float* w, float* out);

// strided_pointwise(): the input pixels of output rows [oh0, oh0 + rows) of one image `x`,
// channels-last ([h][w][c]), into `out` ([rows * ow][c]).
void strided_pixels(const Geometry& g, const float* x, int64_t oh0, int64_t rows, float* out);

}  // namespace kiln::cpu::im2col_f32
