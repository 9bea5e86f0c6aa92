#pragma once
// kiln's layer normalisation over rows, for LayerNorm / SkipLayerNorm nodes (without the Mean /
// InvStdDev outputs) wherever the CPU runs it: the row count is a call argument, so nothing is
// made per shape (oneDNN 2.6 makes a layer_normalization primitive, and for SkipLayerNorm a
// binary one, for every row count: BERT-6 paid 0.39 ms per new sequence length for them), and
// SkipLayerNorm is one pass where oneDNN runs two primitives (3x faster at BERT-6, L = 64).
// One pass adds the skip and bias and sums, a second the squared deviations (two-pass variance,
// as oneDNN), a third writes (x - mean) / sqrt(var + eps) * scale + shift. AVX-512, or AVX2 where
// the CPU has no AVX-512 (available()); below AVX2 oneDNN's primitives run the node.
#include <cstdint>

namespace kiln::cpu::layer_norm_f32 {

// Whether the ISA in use (cpu/isa.hpp, with its cap) runs the kernel.
bool available();
// The implementation name profiles show.
const char* impl_name();

// `rows` rows of `m` floats: x = src (+ skip when non-null) (+ bias[m] when non-null), written
// to dst when skip is given (dst may be src), then normalised in dst with scale[m] / shift[m].
// Runs on the calling thread's OpenMP team. available() must hold.
void run(const float* src, const float* skip, const float* bias, const float* scale, const float* shift, int64_t rows,
         int64_t m, float eps, float* dst);

}  // namespace kiln::cpu::layer_norm_f32
