// Swish in gemm_f32's epilogue (cpu/simd_avx2.hpp v_swish8_n, cpu/simd_avx512.hpp v_swish_n)
// against double precision, lane by lane, one vector at a time and several interleaved.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "cpu/isa.hpp"
#include "cpu/simd_avx2.hpp"
#include "cpu/simd_avx512.hpp"
#include "simd_groups_util.hpp"

namespace test_simd_swish {

using namespace kiln::cpu;

// Swish's U-vector form (kiln::test::by_groups8's Op)
struct Swish8 {
  template <int U>
  KILN_AVX2 static void apply8(__m256* v) {
    simd::v_swish8_n<U>(v);
  }
};
template <int U>
constexpr auto swish8 = kiln::test::by_groups8<U, Swish8>;
template <int U>
KILN_AVX512 void swish16(const float* x, float* y, size_t count) {
  __m512 v[U];
  size_t i = 0;
  for (; i + U * 16 <= count; i += U * 16) {
    for (int j = 0; j < U; ++j) v[j] = _mm512_loadu_ps(x + i + j * 16);
    simd::v_swish_n<U>(v);
    for (int j = 0; j < U; ++j) _mm512_storeu_ps(y + i + j * 16, v[j]);
  }
  for (; i < count; i += 16) {
    v[0] = _mm512_loadu_ps(x + i);
    simd::v_swish_n<1>(v);
    _mm512_storeu_ps(y + i, v[0]);
  }
}

// x / (1 + e^-x) within 4e-7 relative (and 1e-37 absolute, near 0) from kSwishLow on; below
// it the value at kSwishLow (-1.4e-36, against a true value smaller still); +inf and NaN through.
void expect_swish_across_the_line(void (*swish)(const float*, float*, size_t), size_t lanes) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x;
  for (float v = -120.0f; v <= 120.0f; v += 0.00731f) x.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, -87.0f, -86.99f, -87.01f, 88.0f, 104.0f, 1e30f, -1e30f, inf, -inf,
                  std::numeric_limits<float>::denorm_min()})
    x.push_back(v);
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  while (x.size() % lanes) x.push_back(0.5f);
  std::vector<float> y(x.size());
  swish(x.data(), y.data(), x.size());
  const double at_low = -87.0 / (1.0 + std::exp(87.0));
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(y[i]));
      continue;
    }
    if (x[i] == inf) {
      EXPECT_EQ(y[i], inf);
      continue;
    }
    const double xd = x[i];
    const double want = xd < -87.0 ? at_low : xd / (1.0 + std::exp(-xd));
    const double err = std::fabs(y[i] - want);
    ASSERT_LE(err, 4e-7 * std::fabs(want) + 1e-37) << "swish(" << x[i] << ") = " << y[i] << ", want " << want;
  }
}

TEST(SimdAvx2, SwishMatchesDoubleAcrossTheLine) {
  if (!isa_at_least(Isa::avx2)) GTEST_SKIP() << "no AVX2 in use";
  expect_swish_across_the_line(swish8<1>, 8);
  expect_swish_across_the_line(swish8<2>, 8);
  expect_swish_across_the_line(swish8<4>, 8);  // gemm_f32's epilogue: four at a time
}

TEST(SimdAvx512, SwishMatchesDoubleAcrossTheLine) {
  if (!isa_at_least(Isa::avx512_core)) GTEST_SKIP() << "no AVX-512 in use";
  expect_swish_across_the_line(swish16<1>, 16);
  expect_swish_across_the_line(swish16<4>, 16);
}

}  // namespace test_simd_swish
