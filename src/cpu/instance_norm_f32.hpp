#pragma once
// kiln's instance normalisation, for InstanceNormalization nodes (and with them PyTorch's
// GroupNorm, which exports as Reshape [N, groups, -1] -> InstanceNormalization -> Reshape -> Mul ->
// Add: wav2vec2's feature extractor, diffusion UNets): each row of `m` floats (one (n, c) of
// [N, C, spatial...]) becomes (x - mean) / sqrt(var + eps) * scale[c] + bias[c]. Rows are shared
// by the calling thread's OpenMP team; within a row, a pass for the mean, one for the squared
// deviations (two-pass variance, as the reference) and one that writes; the sums in 16 partial
// sums of doubles, which the compiler keeps in vector registers. Plain C++ for the baseline ISA: the passes are
// bound by memory, not by the vector width. Nothing made per shape. The reference kernel, one
// thread in double precision, ran a [4, 64, 6399] GroupNorm in 3.8 ms.
#include <cstdint>

namespace kiln::cpu::instance_norm_f32 {

// The implementation name profiles show.
const char* impl_name();

// x, y [N * C rows, m]; scale / bias [C] (row r takes channel r % C). y may be x.
void run(const float* x, int64_t N, int64_t C, int64_t m, const float* scale, const float* bias, float eps, float* y);

}  // namespace kiln::cpu::instance_norm_f32
