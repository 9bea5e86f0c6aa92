#pragma once
// kiln's f32 Resize of the two last dims of plain NCHW tensors, nearest or linear, from taps
// computed per output coordinate with ONNX's formulas (cpu/nodes/resize.cpp makes them): every
// coordinate_transformation_mode but tf_crop_and_resize, where oneDNN 2.6's resampling has one
// mapping (half-pixel) and makes a primitive for every new shape. Each output row blends its
// one or two input rows into a row of the thread's (linear), then gathers its columns from
// that row: AVX2 gathers of 8 columns. A row kernel that takes the sizes as arguments: nothing
// is made per shape. AVX2 (available()); below it the node keeps oneDNN or the reference.
#include <cstdint>
#include <vector>

namespace kiln::cpu::resize_f32 {

// Whether the ISA in use (cpu/isa.hpp, with its cap) runs the kernel.
bool available();
// The implementation name profiles show.
const char* impl_name();

// One axis: for output coordinate o, w0[o] * in[i0[o]] + w1[o] * in[i1[o]]; nearest: in[i0[o]]
// (i1, w0 and w1 unused).
struct Axis {
  std::vector<int32_t> i0, i1;
  std::vector<float> w0, w1;
};

struct Geometry {
  int64_t planes = 0;  // N * C
  int64_t ih = 0, iw = 0, oh = 0, ow = 0;
  bool linear = false;
  Axis h, w;  // oh and ow coordinates
};

// Floats of working memory run() needs for `threads` threads (a blended row each).
int64_t scratch_floats(const Geometry& g, int threads);

// y [planes][oh][ow] from x [planes][ih][iw], on `threads` of the calling thread's OpenMP team.
void run(const Geometry& g, const float* x, float* y, float* scratch, int threads);

}  // namespace kiln::cpu::resize_f32
