#pragma once
// erf over float arrays, vectorised (AVX-512 / AVX2 clones) and split across the
// OpenMP team for long arrays. Absolute error below 4e-7 against double-precision
// erf, relative error below 1e-6; NaN propagates, erf(+-inf) = +-1.
#include <cstdint>

namespace kiln::ops {

void erf_f32(const float* x, float* y, int64_t n);

}  // namespace kiln::ops
