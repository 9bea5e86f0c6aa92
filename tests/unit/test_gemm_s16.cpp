// kiln's exact 8-bit GEMM for CPUs without VNNI (cpu/gemm_s16.hpp) against int32 arithmetic:
// u8 and s8 operands, zero points at the ends of their ranges (products of 255 x 255 that a
// saturating 16-bit pair sum gets wrong), every row count of a block and partial ones, odd K,
// partial column panels, a leading dimension wider than K, and the float output (scale per
// column or one, bias) rounded as a Cast, a Mul and an Add.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "cpu/gemm_s16.hpp"

namespace test_gemm_s16 {

using namespace kiln::cpu;

namespace {

struct Case {
  int64_t M, K, N, lda;
  bool a_signed, b_signed;
  int32_t za;
  std::vector<int32_t> zb;  // N values
};

std::vector<uint8_t> random_bytes(int64_t n, uint32_t seed, bool extremes) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(0, 255), pick(0, 1);
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<uint8_t>(extremes ? (pick(rng) ? 255 : 0) : d(rng));
  return v;
}

int32_t value(const uint8_t* p, int64_t i, bool is_signed) {
  return is_signed ? static_cast<int32_t>(static_cast<int8_t>(p[i])) : static_cast<int32_t>(p[i]);
}

void check(const Case& c, bool extremes, uint32_t seed) {
  ASSERT_GE(c.lda, c.K);
  const auto a = random_bytes(c.M * c.lda, seed, extremes), b = random_bytes(c.K * c.N, seed + 1, extremes);
  std::vector<int16_t> packed(static_cast<size_t>(gemm_s16::packed_size(c.K, c.N)));
  gemm_s16::pack_b(b.data(), c.b_signed, c.K, c.N, c.zb.data(), packed.data());
  std::vector<int32_t> scratch(gemm_s16::scratch_bytes(c.M, c.K) / 4 + 8);
  const int64_t ldc = c.N + 3;
  std::vector<int32_t> got(static_cast<size_t>(c.M * ldc), 7), want(static_cast<size_t>(c.M * c.N));
  gemm_s16::run(a.data(), c.a_signed, c.za, c.M, c.K, c.lda, packed.data(), c.N, got.data(), ldc, scratch.data());
  for (int64_t m = 0; m < c.M; ++m)
    for (int64_t n = 0; n < c.N; ++n) {
      int64_t s = 0;
      for (int64_t k = 0; k < c.K; ++k)
        s += static_cast<int64_t>(value(a.data(), m * c.lda + k, c.a_signed) - c.za) *
             (value(b.data(), k * c.N + n, c.b_signed) - c.zb[static_cast<size_t>(n)]);
      want[static_cast<size_t>(m * c.N + n)] = static_cast<int32_t>(s);
      ASSERT_EQ(got[static_cast<size_t>(m * ldc + n)], s) << "M " << c.M << " K " << c.K << " N " << c.N << " at " << m
                                                          << ", " << n;
    }
  for (int64_t m = 0; m < c.M; ++m)  // the columns between N and ldc are not written
    for (int64_t n = c.N; n < ldc; ++n) ASSERT_EQ(got[static_cast<size_t>(m * ldc + n)], 7);

  // float output: float(acc) * scale[n] + bias[n], and with one scale and no bias
  std::vector<float> scale(static_cast<size_t>(c.N)), bias(static_cast<size_t>(c.N));
  for (int64_t n = 0; n < c.N; ++n) scale[static_cast<size_t>(n)] = 0.001f * static_cast<float>(n + 1), bias[static_cast<size_t>(n)] = 0.5f - 0.1f * static_cast<float>(n);
  std::vector<float> f(static_cast<size_t>(c.M * c.N));
  gemm_s16::run(a.data(), c.a_signed, c.za, c.M, c.K, c.lda, packed.data(), c.N, f.data(), c.N, scratch.data(),
                {scale.data(), c.N, bias.data()});
  for (size_t i = 0; i < f.size(); ++i) {
    const size_t n = i % static_cast<size_t>(c.N);
    const float prod = static_cast<float>(want[i]) * scale[n];
    ASSERT_EQ(f[i], prod + bias[n]) << i;
  }
  gemm_s16::run(a.data(), c.a_signed, c.za, c.M, c.K, c.lda, packed.data(), c.N, f.data(), c.N, scratch.data(),
                {scale.data() + c.N / 2, 1, nullptr});
  for (size_t i = 0; i < f.size(); ++i) ASSERT_EQ(f[i], static_cast<float>(want[i]) * scale[static_cast<size_t>(c.N / 2)]) << i;
}

}  // namespace

TEST(GemmS16, EqualsInt32ArithmeticOnEveryShapeAndOperandType) {
  if (!gemm_s16::available()) GTEST_SKIP() << "the ISA in use has no AVX2: oneDNN's kernels run instead";
  uint32_t seed = 1;
  for (int64_t M : {1, 5, 6, 7, 13, 64})
    for (int64_t K : {1, 2, 33, 256})
      for (int64_t N : {1, 16, 17, 40}) {
        const bool as = (M + K) % 2 == 1, bs = (K + N) % 2 == 0;
        std::vector<int32_t> zb(static_cast<size_t>(N));
        for (int64_t n = 0; n < N; ++n) zb[static_cast<size_t>(n)] = bs ? static_cast<int32_t>(n * 37 % 256) - 128 : static_cast<int32_t>(n * 53 % 256);
        check({M, K, N, K + (M % 3), as, bs, as ? -7 : 131, zb}, false, seed++);
      }
}

TEST(GemmS16, ProductsAtTheEndsOfTheRangesAreExact) {
  if (!gemm_s16::available()) GTEST_SKIP() << "the ISA in use has no AVX2: oneDNN's kernels run instead";
  // (0 - 255) * (0 - 255) and 255 * 255 pairs: 2 x 65025 per pair, past 16 bits
  check({7, 513, 33, 513, false, false, 255, std::vector<int32_t>(33, 255)}, true, 90);
  check({7, 513, 33, 513, false, false, 0, std::vector<int32_t>(33, 0)}, true, 91);
  check({6, 64, 16, 64, true, true, 127, std::vector<int32_t>(16, -128)}, true, 92);
}

}  // namespace test_gemm_s16
