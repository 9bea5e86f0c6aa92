#pragma once
// y = x * scale[c] + shift[c] per channel c (then max(y, 0), NaN kept, with `relu`), f32: a
// BatchNormalization (and its ReLU) computed by the node before it while that node writes its
// output anyway (FuseConcatAndBatchNorm: a Concat's copy). AVX-512 or AVX2 as the ISA in use
// has them, else a loop the compiler vectorises.
#include <cstdint>

namespace kiln::cpu::channel_affine {

// `rows` rows of `width` consecutive channels (channels-last pixels, or the lanes of one channel
// block): dst[r * width + j] = f(src[r * width + j] * scale[j] + shift[j]).
void rows(const float* src, float* dst, int64_t rows, int64_t width, const float* scale, const float* shift, bool relu);

// n values of one channel (a plain run): dst[j] = f(src[j] * a + b).
void one_channel(const float* src, float* dst, int64_t n, float a, float b, bool relu);

}  // namespace kiln::cpu::channel_affine
