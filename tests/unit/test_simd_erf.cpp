// GELU's erf in gemm_f32's epilogue (cpu/simd_avx2.hpp v_erf8, cpu/simd_avx512.hpp v_erf)
// against double-precision libm, lane by lane.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "cpu/isa.hpp"
#include "cpu/simd_avx2.hpp"
#include "cpu/simd_avx512.hpp"

namespace test_simd_erf {

using namespace kiln::cpu;

KILN_AVX2 void erf8(const float* x, float* y) { _mm256_storeu_ps(y, simd::v_erf8(_mm256_loadu_ps(x))); }
KILN_AVX512 void erf16(const float* x, float* y) { _mm512_storeu_ps(y, simd::v_erf(_mm512_loadu_ps(x))); }

// Absolute and relative error at most 4e-7 everywhere, the sign of x kept (odd), 1 in float
// from the clamp on, NaN through. `lanes` floats at a time through `erf`.
void expect_erf_across_the_line(void (*erf)(const float*, float*), size_t lanes) {
  std::vector<float> x;
  for (float v = -9.0f; v <= 9.0f; v += 0.000731f) x.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-8f, 3.95f, -3.95f, 3.9500001f, 1e30f, std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::denorm_min()})
    x.push_back(v);
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  while (x.size() % lanes) x.push_back(0.5f);
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); i += lanes) erf(&x[i], &y[i]);
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::erf(static_cast<double>(x[i]));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(y[i]));
      continue;
    }
    const double err = std::fabs(y[i] - want);
    ASSERT_LE(err, 4e-7) << "erf(" << x[i] << ") = " << y[i] << ", want " << want;
    if (std::fabs(want) >= std::numeric_limits<float>::min()) {
      ASSERT_LE(err / std::fabs(want), 4e-7) << "erf(" << x[i] << ")";
    }
    ASSERT_EQ(std::signbit(y[i]), std::signbit(x[i])) << "erf(" << x[i] << ")";
  }
}

TEST(SimdAvx2, ErfMatchesDoubleErfAcrossTheLine) {
  if (!isa_at_least(Isa::avx2)) GTEST_SKIP() << "no AVX2 in use";
  expect_erf_across_the_line(erf8, 8);
}

TEST(SimdAvx512, ErfMatchesDoubleErfAcrossTheLine) {
  if (!isa_at_least(Isa::avx512_core)) GTEST_SKIP() << "no AVX-512 in use";
  expect_erf_across_the_line(erf16, 16);
}

}  // namespace test_simd_erf
