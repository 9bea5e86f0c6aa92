#pragma once
// kiln's GRU for GRU nodes wherever the CPU runs it (a speech or time-series model's recurrent
// layers): the sequence length and batch are call arguments, so nothing is made per shape, and
// the products run on gemm_f32 (the reference kernel, one scalar dot product per gate and step,
// ran a bidirectional [4, 300, 40] -> 2 x 64 model 24x slower than ONNX Runtime). The ONNX form
// kiln's GRU node takes: default activations (Sigmoid, Tanh), no clip, layout 0, full-length
// sequences; either linear_before_reset. Gates in ONNX order (z, r, h). Per direction:
//   G[T*N, 3H] = X W^T + (Wb + Rb for z and r; Wbh, and Rbh too unless linear_before_reset)
//   each step: Q[N, 2H] = h Rzr^T               (gemm_f32::run_serial, R packed once)
//              z = sigmoid(Gz + Qz), r = sigmoid(Gr + Qr)
//              linear_before_reset: n = tanh(Gh + r (h Rh^T + Rbh))
//              else:                n = tanh(Gh + (r h) Rh^T)
//              h = (1 - z) n + z h
// With two directions and two threads or more, one thread runs each. AVX-512, or AVX2 where the
// CPU has no AVX-512 (available()); below AVX2 the reference kernel runs the node.
#include <cstddef>
#include <cstdint>

namespace kiln::cpu::gru_f32 {

struct Geometry {
  int64_t T = 0, N = 0, C = 0, H = 0;
  int64_t D = 1;         // directions: 2 is forward then reverse
  bool reverse = false;  // with D = 1
  bool linear_before_reset = false;
};

// Per direction: W^T packed by gemm_f32::pack_b ([C, 3H]), R^T's z and r columns ([H, 2H]) and
// its h columns ([H, H]) packed apart; the input projection's bias [3H] (see above) and Rbh
// [H] (linear_before_reset only); null: zeros.
struct Weights {
  const float* w[2] = {nullptr, nullptr};
  const float* r_zr[2] = {nullptr, nullptr};
  const float* r_h[2] = {nullptr, nullptr};
  const float* bias[2] = {nullptr, nullptr};
  const float* rb_h[2] = {nullptr, nullptr};
};

// Whether the ISA in use (cpu/isa.hpp, with its cap) runs the kernel.
bool available();
// The implementation name profiles show.
const char* impl_name();

// Working memory (the input projections and states of every direction).
size_t scratch_bytes(const Geometry& g);

// x [T, N, C]; h0 [D, N, H] or null (zeros); y [T, D, N, H] and y_h [D, N, H] or null (not
// wanted). Runs on the calling thread's OpenMP team (`threads` of it at most).
void run(const Geometry& g, const Weights& w, const float* x, const float* h0, float* y, float* y_h, void* scratch,
         int threads);

}  // namespace kiln::cpu::gru_f32
