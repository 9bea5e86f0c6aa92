// GELU's erf in gemm_f32's epilogue (cpu/simd_avx2.hpp v_erf8, cpu/simd_avx512.hpp v_erf)
// against double-precision libm, lane by lane; and AVX2's GELU on it (v_gelu_erf8_n), one vector
// at a time and several interleaved.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "cpu/isa.hpp"
#include "cpu/simd_avx2.hpp"
#include "cpu/simd_avx512.hpp"
#include "simd_groups_util.hpp"

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

// GELU's U-vector form (kiln::test::by_groups8's Op)
struct Gelu8 {
  template <int U>
  KILN_AVX2 static void apply8(__m256* v) {
    simd::v_gelu_erf8_n<U>(v);
  }
};
template <int U>
constexpr auto gelu8 = kiln::test::by_groups8<U, Gelu8>;

// x / 2 (1 + erf(x / sqrt 2)) within erf's 4e-7 times |x| and a rounding of the result; 0 far
// below 0, x far above; NaN through. (Where 1 + erf cancels, near x = -5, the relative error of
// the result is large: the bound is on the absolute error, as erf's.)
void expect_gelu_across_the_line(void (*gelu)(const float*, float*, size_t)) {
  std::vector<float> x;
  for (float v = -12.0f; v <= 12.0f; v += 0.000731f) x.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 5.586f, -5.586f, 1e30f, -1e30f, std::numeric_limits<float>::denorm_min()})
    x.push_back(v);
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  while (x.size() % 8) x.push_back(0.5f);
  std::vector<float> y(x.size());
  gelu(x.data(), y.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double xd = x[i];
    if (std::isnan(xd)) {
      EXPECT_TRUE(std::isnan(y[i]));
      continue;
    }
    const double want = 0.5 * xd * (1.0 + std::erf(xd / std::sqrt(2.0)));
    const double err = std::fabs(y[i] - want);
    ASSERT_LE(err, 4e-7 * std::fabs(xd) + 2.4e-7 * std::fabs(want) + 1e-37)
        << "gelu(" << x[i] << ") = " << y[i] << ", want " << want;
  }
}

TEST(SimdAvx2, GeluErfMatchesDoubleInEveryGrouping) {
  if (!isa_at_least(Isa::avx2)) GTEST_SKIP() << "no AVX2 in use";
  expect_gelu_across_the_line(gelu8<1>);
  expect_gelu_across_the_line(gelu8<2>);
  expect_gelu_across_the_line(gelu8<4>);  // gemm_f32's epilogue: four at a time
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
