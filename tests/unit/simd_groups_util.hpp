#pragma once
// The AVX2 element-wise tests' harness (test_simd_erf, test_simd_swish): an op's multi-vector
// form (v_gelu_erf8_n<U>, v_swish8_n<U>) run over an array U vectors at a time, so that each
// grouping a kernel uses is checked against the same reference.
#include <cstddef>

#include "cpu/simd_avx2.hpp"

namespace kiln::test {

// `count` floats at x into y through `Op::apply8<U>` (a struct whose static member template
// takes U vectors in place: the AVX2 target attribute goes on it, which a lambda cannot carry),
// then the rest one vector at a time. count is a multiple of 8.
template <int U, class Op>
KILN_AVX2 void by_groups8(const float* x, float* y, size_t count) {
  __m256 v[U];
  size_t i = 0;
  for (; i + U * 8 <= count; i += U * 8) {
    for (int j = 0; j < U; ++j) v[j] = _mm256_loadu_ps(x + i + j * 8);
    Op::template apply8<U>(v);
    for (int j = 0; j < U; ++j) _mm256_storeu_ps(y + i + j * 8, v[j]);
  }
  for (; i < count; i += 8) {
    v[0] = _mm256_loadu_ps(x + i);
    Op::template apply8<1>(v);
    _mm256_storeu_ps(y + i, v[0]);
  }
}

}  // namespace kiln::test
