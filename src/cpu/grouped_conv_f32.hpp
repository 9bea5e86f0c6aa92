#pragma once
// kiln's grouped convolution (group > 1, more than one input channel a group: RegNet's and
// ResNeXt's 3x3 layers), f32, channels-last, for graphs whose input shapes vary: the sizes are
// call arguments, so nothing is made per shape (oneDNN 2.6 makes a JIT kernel for every new
// input shape: RegNet-Y-400MF, 91 of them over 12 shapes, 12.7 ms), and for groups of 4 channels
// below AVX-512 whatever the shapes, where oneDNN 2.6 has no JIT kernel.
//
// The kernel: for each output row, group and run of P output pixels, the accumulators hold the
// group's output channels (8 lanes a vector, 1 to 4 vectors) of P pixels; for each tap and
// input channel of the group, the weights' vectors are loaded once and each pixel's input value
// broadcast into them (one load and one multiply-add a lane-vector). Where the window reaches
// into the padding, each input row it reads is copied between zeros first, so that no pixel
// takes a checked path. Groups of 4 channels go two to a vector of input channels, as loaded:
// four sums per pixel, each pairing input ci with output (ci + k) mod 4, turned into place once
// per run (pair_pixels). Groups of 8 at stride 1 over 3 columns broadcast each input value once
// for the three taps that read it (pixels_s1k3). 8-lane vectors, on AVX-512 CPUs too (Zen 4 runs two 8-lane
// multiply-adds a cycle, as many lanes as one of 16), there in AVX-512's 32 registers: runs of
// up to 24 pixels (groups of 4: 6), against 12 (3) with AVX2 (grouped_conv_f32_row.inc); but
// groups of 16 or 32 outputs on AVX-512 in 16-lane vectors, runs of up to 28 pixels (half the
// instructions a pixel: grouped_conv_f32_zmm.inc). Output rows go in bands (band_rows): each
// input row a band reads copied once, each group's weights read once for all its rows. Below
// AVX2 (available()) the caller keeps oneDNN's convolution.
#include <cstdint>

namespace kiln::cpu::grouped_conv_f32 {

// Whether the ISA in use (cpu/isa.hpp, with its cap) runs the kernel.
bool available();
// The implementation name profiles show.
const char* impl_name();
// Whether the kernel computes `groups` groups of `in_per_group` input channels and `out_per_group`
// output channels: a multiple of 8 outputs, at most 32; or 4 inputs and 4 outputs, an even number
// of groups (two to a vector: ResNeXt-50 32x4d's first stage).
bool supports(int64_t in_per_group, int64_t out_per_group, int64_t groups);

struct Geometry {
  int64_t c = 0, h = 0, w = 0;  // input channels and size
  int64_t m = 0;                // output channels
  int64_t groups = 1;
  int64_t kh = 1, kw = 1;       // window
  int64_t oh = 0, ow = 0;       // output size
  int64_t stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  int64_t pad_t = 0, pad_l = 0;  // input rows above row 0 / columns left of column 0
  // Set by rows(), not by callers: floats from one input pixel to the next in the rows the
  // kernels read (c in the input itself; more in rows() copies, see padded_pixel)
  int64_t xs = 0;
  int64_t in_per_group() const { return c / groups; }
  int64_t out_per_group() const { return m / groups; }
};

// Floats of the packed weights.
int64_t packed_size(const Geometry& g);
// ONNX's weights [m][c / groups][kh][kw] -> the kernel's layout [group][kh][kw][in channel][out channel]
// (groups of 4: [pair of groups][kh][kw][k][the pair's 8 in channels], from in channel ci to out
// channel (ci + k) mod 4).
void pack_weights(const Geometry& g, const float* w, float* out);

// Output rows rows() computes together: each input row they read copied once, each group's
// weights read once for all of them. The caller's work items are best this many rows.
int64_t band_rows(const Geometry& g);

// Floats of working memory rows() needs (a band's input rows with their padding).
int64_t scratch_floats(const Geometry& g);

// Output rows [oy0, oy1) of one image: y[oy][ox][o] (channels-last, m channels) = the sum over
// the window and the group's input channels of x[iy][ix][c] (channels-last, c channels) times
// the weights; no bias (the caller's epilogue adds it). `scratch`: scratch_floats(g), the
// caller's. available() and supports() must hold.
void rows(const Geometry& g, const float* x, const float* packed, int64_t oy0, int64_t oy1, float* y, float* scratch);

}  // namespace kiln::cpu::grouped_conv_f32
