#pragma once
// kiln's Winograd F(4x4, 3x3) f32 convolution for CPUs with AVX2 and no AVX-512, where oneDNN 2.6
// has no Winograd kernel (its `jit:avx2` direct kernel ran the recogniser's 3x3 layers at about
// 75% of the FMA peak, ONNX Runtime's MLAS 90%), and with AVX-512 for the graphs of a model whose
// input shapes vary, where oneDNN's Winograd makes a JIT kernel for every new shape (the
// recogniser: four per new width). A dense 3x3 stride-1 convolution computed on
// 6x6 input tiles: each tile transformed (B^T d B), 36 GEMMs over the channels on kiln's GEMM
// (gemm_f32) against the transformed weights (G g G^T, packed once per model), each 6x6 product
// transformed back (A^T m A) into a 4x4 output tile with the bias, a residual sum (what dst holds
// on entry: a ResNet block's shortcut) and a ReLU. A quarter of the
// direct kernel's multiplies. Activations in channel blocks of 8 or 16 (nChw8c, what AVX2
// convolutions write, or nChw16c, what AVX-512 ones write), padded lanes zero (written so). The
// sizes are call arguments: nothing is made per shape.
#include <cstddef>
#include <cstdint>

namespace kiln::cpu::winograd_f32 {

// Whether the ISA in use (cpu/isa.hpp, with its cap) runs the kernel: AVX2 and kiln's GEMM.
bool available();
// The implementation name profiles show ("kiln_wino_4x3:avx2_f32", or avx512_core_f32 by the ISA
// in use).
const char* impl_name();

struct Geometry {
  int64_t batch = 1, ic = 1, oc = 1;  // channels (the layout pads them to 8)
  int64_t ih = 1, iw = 1, oh = 1, ow = 1;
  int64_t pad_t = 0, pad_l = 0;  // output (y, x) reads input rows y - pad_t .. y - pad_t + 2
  bool sum = false;              // + dst as it is on entry, after the bias
  bool relu = false;             // max(x, 0) + alpha min(x, 0) after the bias and the sum
  float relu_alpha = 0.0f;
  int64_t block = 8;             // channels per block of src and dst: 8 (nChw8c) or 16 (nChw16c)
  int64_t dst_image = 0;         // floats from one image of dst to the next (a Concat's slice); 0: dst's own size
};

// Whether the kernel runs this convolution faster than oneDNN's direct kernel, or with
// `against_im2col` than kiln's im2col GEMM (what a window takes in a new shape's graph), from
// the channels and the number of 4x4 output tiles (measured per layer, winograd_f32.cpp).
bool pays(const Geometry& g, bool against_im2col = false);

// Floats of the transformed, packed weights of an oc x ic x 3 x 3 convolution.
size_t weights_floats(int64_t ic, int64_t oc);
// w [oc][ic][3][3] (ONNX's layout) -> `out` (weights_floats floats).
void transform_weights(const float* w, int64_t ic, int64_t oc, float* out);

// Bytes of working memory run() needs for `threads` threads.
size_t scratch_bytes(const Geometry& g, int threads);

// dst = relu(conv(src, w) + bias [+ dst]); src / dst in nChw8c or nChw16c (g.block; distinct buffers), bias [oc] or null, `weights` from
// transform_weights, `scratch` scratch_bytes(g, threads) bytes (64-byte aligned). Runs on at most
// `threads` threads of the calling thread's OpenMP team. available() must hold.
void run(const Geometry& g, const float* src, const float* weights, const float* bias, float* dst, void* scratch,
         int threads);

}  // namespace kiln::cpu::winograd_f32
