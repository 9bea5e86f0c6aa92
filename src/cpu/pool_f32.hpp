#pragma once
// kiln's 2-D f32 pooling (max, average with or without the padding in the divisor) on layouts
// whose channels come in contiguous runs: channel blocks (nChw8c, nChw16c, what convolutions
// write) and channels-last (nhwc). oneDNN 2.6's AVX2 pooling ran the recogniser's MaxPools at
// 3-7 GB/s (0.72 ms for [1, 32, 48, 800] -> [1, 32, 24, 400] on nChw8c, ONNX Runtime 0.23 ms),
// and makes a primitive for every input shape; this kernel takes the sizes as arguments. AVX2
// (available()); below it oneDNN's primitive runs the node.
#include <cstdint>
#include <vector>

namespace kiln::cpu::pool_f32 {

enum class Alg { max, avg_include_padding, avg_exclude_padding };

// Where element (n, run r, h, w, lane l) lives: x + n * n_stride + r * run_stride + h * h_stride
// + w * w_stride + l, in floats. Channel blocks of B: runs = C / B rounded up, lanes = B (padded
// lanes are zero in, and stay zero out); channels-last: one run of lanes = C.
struct Layout {
  int64_t n_stride = 0, run_stride = 0, h_stride = 0, w_stride = 0;
};

struct Geometry {
  Alg alg = Alg::max;
  int64_t batch = 1, runs = 1, lanes = 1;
  int64_t ih = 1, iw = 1, oh = 1, ow = 1;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1;
  int64_t dh = 1, dw = 1;  // dilation factors (1: dense)
  int64_t ph = 0, pw = 0;  // top / left padding; windows past the bottom / right edge are cut
  Layout src, dst;
};

// Whether the ISA in use (cpu/isa.hpp, with its cap) runs the kernel.
bool available();
// The implementation name profiles show.
const char* impl_name();

// Every output column's taps inside the input along the width, [w0, w1) at [2 x], [2 x + 1]: shape
// work, made once with the geometry (two divisions a column cost more than the column's loads).
std::vector<int64_t> column_taps(const Geometry& g);

// Every window must hold at least one input element (pooling_supports checks it). The average
// with padding divides by kh * kw (oneDNN's include_padding), without by the taps inside the
// input. `columns` from column_taps(g). Runs on the calling thread's OpenMP team. available()
// must hold.
void run(const Geometry& g, const std::vector<int64_t>& columns, const float* src, float* dst);

}  // namespace kiln::cpu::pool_f32
