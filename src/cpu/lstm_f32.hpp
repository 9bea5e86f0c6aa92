#pragma once
// kiln's LSTM for LSTM nodes wherever the CPU runs it: the sequence length and batch are call
// arguments, so nothing is made per shape (oneDNN 2.6 makes an lstm_forward primitive per
// direction for every new length: 1 ms per new width for the recogniser's two BiLSTMs), and it
// runs about twice as fast as that primitive (T = 200, H = 128, bidirectional). The
// ONNX form kiln's LSTM node takes (default activations, no clip, peepholes or input_forget,
// full-length sequences), gates in ONNX order (i, o, f, c). Per direction:
//   G[T*N, 4H] = X W^T + (Wb + Rb)                 (gemm_f32, W packed once per model)
//   each step: G[t] += h R^T (gemm_f32::run_serial, R packed once; h from the step before)
//              c = sigmoid(f) c + sigmoid(i) tanh(g); h = sigmoid(o) tanh(c)
// With two directions and two threads or more, one thread runs each. AVX-512, or AVX2 where the
// CPU has no AVX-512 (available()); below AVX2 oneDNN's primitive runs the node.
#include <cstddef>
#include <cstdint>

namespace kiln::cpu::lstm_f32 {

struct Geometry {
  int64_t T = 0, N = 0, C = 0, H = 0;
  int64_t D = 1;         // directions: 2 is forward then reverse
  bool reverse = false;  // with D = 1
};

// Per direction: W^T and R^T packed by gemm_f32::pack_b ([C, 4H] and [H, 4H]) and the bias
// Wb + Rb [4H] (null: none).
struct Weights {
  const float* w[2] = {nullptr, nullptr};
  const float* r[2] = {nullptr, nullptr};
  const float* bias[2] = {nullptr, nullptr};
};

// Whether the ISA in use (cpu/isa.hpp, with its cap) runs the kernel.
bool available();
// The implementation name profiles show.
const char* impl_name();

// Working memory (the input projections and states of every direction).
size_t scratch_bytes(const Geometry& g);

// x [T, N, C]; h0 / c0 [D, N, H] or null (zeros); y [T, D, N, H], y_h / y_c [D, N, H] or null
// (not wanted). Runs on the calling thread's OpenMP team (`threads` of it at most).
void run(const Geometry& g, const Weights& w, const float* x, const float* h0, const float* c0, float* y, float* y_h,
         float* y_c, void* scratch, int threads);

}  // namespace kiln::cpu::lstm_f32
