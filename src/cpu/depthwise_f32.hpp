#pragma once
// kiln's depthwise convolution (one filter per channel, group == channels), f32, channels-last,
// one output row at a time: the sizes are call arguments, so nothing is made per shape (oneDNN 2.6
// makes a brgemm depthwise primitive, a JIT kernel, for every new input shape). The caller picks
// the kernel rows of input (a null row is padding: zeros), so the vertical stride, padding and
// batch stay with it; the row kernel does the horizontal ones.
// A square k x k window, k 3 or 5, the same stride 1 or 2 both ways, undilated (MobileNet's,
// EfficientNet's). Channels 16 at a time (AVX-512) or 8 (AVX2), eight output pixels at once (four
// in a narrow row) so that each input vector loaded serves every output whose window holds it,
// their sums independent chains of FMAs, the weights of one kernel row in registers at a time.
// With "same" padding (K / 2 columns left, the common case) the row's ends go in those groups
// too, their columns outside the row skipped; other paddings take the ends a pixel at a time
// (5x5 at stride 1: four at a time, the columns outside the row read as zeros). Below AVX2
// (available()) the caller keeps oneDNN's convolution.
#include <cstdint>
#include <limits>

namespace kiln::cpu::depthwise_f32 {

// Whether the ISA in use (cpu/isa.hpp, with its cap) runs the kernel.
bool available();
// The implementation name profiles show.
const char* impl_name();
// Whether the row kernel computes a k x k window at this stride.
bool supports(int64_t k, int64_t stride);

// Floats of the packed weights of `channels` channels and a k x k window.
int64_t packed_size(int64_t channels, int64_t k);
int64_t weight_stride(int64_t channels);
// ONNX's depthwise weights [channels, 1, k, k] -> the kernel's layout: tap-major, each tap's
// channels padded with zeros to a multiple of 16 (weight_stride(channels) floats).
void pack_weights(const float* w, int64_t channels, int64_t k, float* out);

struct Row {
  int64_t channels = 0;     // computed per pixel ...
  int64_t pixel_stride = 0;  // ... of pixels this many floats apart in rows and output (0: channels)
  // floats between the packed weights of one tap and the next (0: those of `channels` channels;
  // a caller computing a slice of the channels passes the whole tensor's, pointers at the slice)
  int64_t weight_stride = 0;
  int64_t pixels_apart() const { return pixel_stride ? pixel_stride : channels; }
  int64_t in_width = 0, out_width = 0;
  int64_t k = 3, stride = 1;
  int64_t pad_left = 0;  // input columns left of column 0 (zeros)
  // hardswish: then v * clamp(hs_alpha * v + hs_beta, 0, 1) (a HardSwish after the convolution,
  // applied as the row is stored rather than in a pass of its own over it; ONNX's: 1/6, 1/2) ...
  bool hardswish = false;
  float hs_alpha = 1.0f / 6.0f, hs_beta = 0.5f;
  // ... then clamped to [lo, hi] (a ReLU or a Clip after the convolution; NaN stays NaN)
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
};

// out[x][c] = clamp(act(bias[c] + sum over i < k, j < k of rows[i][x * stride - pad_left + j][c] * w(c, i, j)), lo, hi)
// (act: the HardSwish where Row::hardswish, else none):
// `rows` holds k pointers to input rows ([in_width][channels]; null: a row of zeros), `packed`
// from pack_weights, `bias` [channels] or null. supports(k, stride) and available() must hold.
void row(const Row& g, const float* const* rows, const float* packed, const float* bias, float* out);

}  // namespace kiln::cpu::depthwise_f32
