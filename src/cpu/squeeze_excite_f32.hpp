#pragma once
// kiln's squeeze-and-excitation kernel (the kiln SqueezeExcite op, ops/nn_squeeze_excite.cpp):
// per image, each channel's mean over the pixels, two small fully connected layers (R x C, then
// C x R, with their activation and gate), and the input scaled by the result per channel, in
// one pass of the OpenMP team: the pixels split between the threads for the sums and again,
// the same way, for the scaling, so that each thread scales the part of the image it has just
// read. On the layouts convolutions write: channels-last, channel blocks (nChw8c, nChw16c) and
// plain nchw. The loops are compiled for AVX-512, AVX2 and the baseline instruction set (the ISA
// in use picks), so every CPU runs it; nothing is made per shape.
#include <cstddef>
#include <cstdint>

namespace kiln::cpu::squeeze_excite_f32 {

struct Geometry {
  int64_t batch = 1, channels = 0, reduced = 0;  // N, C, R
  // Element (n, c, h, w) at n * n_stride + (c / lanes) * run_stride + h * h_stride + w * w_stride +
  // c % lanes floats: channels-last one run of lanes = C; blocks of 8 or 16 channels runs of
  // that many lanes (padded lanes are zero in, and stay zero out); plain nchw runs of 1 lane.
  int64_t runs = 1, lanes = 1;
  int64_t height = 1, width = 1;
  int64_t n_stride = 0, run_stride = 0, h_stride = 0, w_stride = 0;
  bool swish = false;      // the activation: x * sigmoid(x), else max(x, 0)
  bool hard_gate = false;  // the gate: max(0, min(1, gate_alpha x + gate_beta)), else sigmoid(x)
  float gate_alpha = 0.2f, gate_beta = 0.5f;
};

// The implementation name profiles show (by the ISA in use).
const char* impl_name();
// Floats of working memory run() needs on a team of `threads`.
size_t scratch_floats(const Geometry& g, int threads);

// y = x * gate(b2 + w2 act(b1 + w1 mean(x))) per image and channel; w1 [R, C], w2 [C, R] row-major;
// y may be x. Runs on the calling thread's OpenMP team (at most `threads` of it, the count
// scratch_floats was asked for).
void run(const Geometry& g, int threads, const float* w1, const float* b1, const float* w2, const float* b2,
         const float* x, float* y, float* scratch);

}  // namespace kiln::cpu::squeeze_excite_f32
