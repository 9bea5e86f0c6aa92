// kiln's f32 GEMM (cpu/gemm_f32.hpp): blocks and tails against a double reference, the packing
// of transposed and scaled weights (and where packed_offset says each element went), every
// epilogue op against its definition, and the same bits on one thread and on two. Below AVX2 the
// kernel does not run: run() says so.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <random>
#include <vector>

#include "cpu/gemm_f32.hpp"
#include "cpu/isa.hpp"
#include <kiln/error.hpp>

#include "tensor_test_util.hpp"

namespace test_gemm_f32 {

using namespace kiln;
using kiln::test::random_floats;
namespace gemm = kiln::cpu::gemm_f32;

namespace {

struct Problem {
  int64_t M, K, N, lda, ldc;
  std::vector<float> a, b, bias;  // b: [K, N] row-major
  Problem(int64_t m, int64_t k, int64_t n, uint32_t seed) : M(m), K(k), N(n), lda(k + 3), ldc(n + 5) {
    a = random_floats(static_cast<size_t>(M * lda), seed);
    b = random_floats(static_cast<size_t>(std::max<int64_t>(K * N, 1)), seed + 1);
    bias = random_floats(static_cast<size_t>(N), seed + 2);
  }
  // A x B in double, and the scale of each sum (sum of |a b|) for the tolerance
  void reference(std::vector<double>& want, std::vector<double>& scale) const {
    want.assign(static_cast<size_t>(M * N), 0.0);
    scale.assign(want.size(), 0.0);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j)
        for (int64_t k = 0; k < K; ++k) {
          const double p = static_cast<double>(a[i * lda + k]) * b[k * N + j];
          want[i * N + j] += p;
          scale[i * N + j] += std::fabs(p);
        }
  }
  std::vector<float> packed() const {
    std::vector<float> p(static_cast<size_t>(gemm::packed_size(K, N)));
    gemm::pack_b(b.data(), K, N, N, 1, 1.0f, p.data());
    return p;
  }
};

double gelu_erf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) { return 0.5 * x * (1.0 + std::tanh(0.7978845608 * (x + 0.044715 * x * x * x))); }
double logistic(double x) { return 1.0 / (1.0 + std::exp(-x)); }

}  // namespace

TEST(GemmF32, BlocksAndTailsMatchADoubleReference) {
  if (!gemm::available()) {  // below AVX2: an error, never an illegal instruction
    Problem p(2, 3, 4, 1);
    std::vector<float> c(static_cast<size_t>(p.M * p.ldc));
    EXPECT_THROW(gemm::run(p.a.data(), p.M, p.K, p.lda, p.b.data(), p.N, c.data(), p.ldc, {}), Error);
    return;
  }
  uint32_t seed = 10;
  for (int64_t M : {1, 5, 6, 7, 13})
    for (int64_t K : {0, 1, 17, 600, 2100})  // two slices of K, the second added to C: 600 with AVX-512, 2100 with AVX2
      for (int64_t N : {1, 15, 16, 17, 64, 65, 130})
        for (bool with_bias : {false, true}) {
          SCOPED_TRACE(testing::Message() << "M " << M << " K " << K << " N " << N << " bias " << with_bias);
          Problem p(M, K, N, seed += 3);
          const std::vector<float> packed = p.packed();
          std::vector<float> c(static_cast<size_t>(M * p.ldc), 1234.5f);  // padding columns must stay
          gemm::Epilogue ep;
          if (with_bias) ep.bias = p.bias.data();
          gemm::run(p.a.data(), M, K, p.lda, packed.data(), N, c.data(), p.ldc, ep);
          std::vector<double> want, scale;
          p.reference(want, scale);
          for (int64_t i = 0; i < M; ++i) {
            for (int64_t j = 0; j < N; ++j) {
              const double w = want[i * N + j] + (with_bias ? p.bias[j] : 0.0);
              ASSERT_NEAR(c[i * p.ldc + j], w, 1e-6 * scale[i * N + j] + 1e-6) << "at " << i << ", " << j;
            }
            for (int64_t j = N; j < p.ldc; ++j) ASSERT_EQ(c[i * p.ldc + j], 1234.5f) << "wrote past N at " << i;
          }
        }
}

// The block stores through one of several epilogue paths, chosen per call: C added or not
// (accumulate, or a second slice of K), a bias or not, ReLU / Clip chains as one clamp in
// registers, or ops through memory (GELU after a clamp). Each path, over short K (B not fetched
// ahead), one slice and two, last panels of 8, 16, 24, 40 and 56 columns (those of 8, 24, 40 and
// 56 with their last vector 8 lanes wide on AVX-512) and row tails, against the definition:
// ops(C + A B + bias).
TEST(GemmF32, EveryEpiloguePathWithAndWithoutCMatchesTheReference) {
  if (!gemm::available()) GTEST_SKIP() << "below AVX2: no kernel (BlocksAndTailsMatchADoubleReference checks the error)";
  using A = dnnl::algorithm;
  auto op = [](A alg, float alpha, float beta) {
    gemm::EpilogueOp o;
    o.alg = alg;
    o.alpha = alpha;
    o.beta = beta;
    return o;
  };
  struct Ops {
    const char* name;
    std::vector<gemm::EpilogueOp> ops;
    double (*f)(double);
  };
  const std::vector<Ops> chains = {
      {"none", {}, [](double x) { return x; }},
      {"relu", {op(A::eltwise_relu, 0, 0)}, [](double x) { return std::max(x, 0.0); }},
      {"relu, clip", {op(A::eltwise_relu, 0, 0), op(A::eltwise_clip, -1.0f, 0.75f)},
       [](double x) { return std::min(std::max(x, 0.0), 0.75); }},
      {"clip, gelu", {op(A::eltwise_clip_v2, -0.5f, 1.0f), op(A::eltwise_gelu_erf, 0, 0)},
       [](double x) { return gelu_erf(std::min(std::max(x, -0.5), 1.0)); }},
      // lone ops in the block's registers
      {"gelu", {op(A::eltwise_gelu_erf, 0, 0)}, [](double x) { return gelu_erf(x); }},
      {"hardswish", {op(A::eltwise_hardswish, 1.0f / 6, 0.5f)},
       [](double x) { return x * std::min(std::max(x / 6 + 0.5, 0.0), 1.0); }}};
  uint32_t seed = 500;
  for (int64_t M : {1, 6, 7})
    // short (B not fetched ahead; 19: steps past the last 4), one slice, two (530 with AVX-512, 2100 with AVX2)
    for (int64_t K : {16, 19, 40, 530, 2100})
      for (int64_t N : {8, 16, 24, 40, 56, 64, 88, 120})
        for (bool accumulate : {false, true})
          for (bool with_bias : {false, true})
            for (const Ops& chain : chains) {
              SCOPED_TRACE(testing::Message() << "M " << M << " K " << K << " N " << N << " accumulate " << accumulate
                                              << " bias " << with_bias << " ops " << chain.name);
              Problem p(M, K, N, seed += 3);
              const std::vector<float> packed = p.packed();
              const std::vector<float> c0 = random_floats(static_cast<size_t>(M * p.ldc), seed + 7);
              std::vector<float> c = c0;
              gemm::Epilogue ep;
              ep.accumulate = accumulate;
              if (with_bias) ep.bias = p.bias.data();
              ep.ops = chain.ops;
              gemm::run(p.a.data(), M, K, p.lda, packed.data(), N, c.data(), p.ldc, ep);
              std::vector<double> want, scale;
              p.reference(want, scale);
              for (int64_t i = 0; i < M; ++i) {
                for (int64_t j = 0; j < N; ++j) {
                  const double before = accumulate ? c0[i * p.ldc + j] : 0.0;
                  const double w = chain.f(want[i * N + j] + before + (with_bias ? p.bias[j] : 0.0));
                  ASSERT_NEAR(c[i * p.ldc + j], w, 1e-5 * (scale[i * N + j] + std::fabs(before)) + 1e-5)
                      << "at " << i << ", " << j;
                }
                for (int64_t j = N; j < p.ldc; ++j) ASSERT_EQ(c[i * p.ldc + j], c0[i * p.ldc + j]) << "wrote past N at " << i;
              }
            }
}

// Where A has at least as many rows as B has columns, the rows go in bands, one per thread, the
// panels within each band; otherwise the panels are split. Both ways over teams of 2 and 3 (bands
// of unequal row blocks, a last band with the 6-row block's tail), K of one and two slices; and
// on one thread, which also takes row blocks first at (2000, 100) where B has more than a panel.
TEST(GemmF32, RowBandsAndPanelSplitsCoverEveryBlockOnceOverATeam) {
  if (!gemm::available()) GTEST_SKIP() << "below AVX2 the GEMM is not available (BlocksAndTails tests the error)";
  const int before = omp_get_max_threads();
  uint32_t seed = 70;
  // (2000, 100): bands of 667-1000 rows of A past 256 KiB with B within it, which the AVX2 block
  // takes row block first (every panel of a row block before the next row block)
  // K 600: two slices with AVX-512, 2100 with AVX2
  const std::pair<int64_t, int64_t> sizes[] = {{37, 40}, {37, 600}, {37, 2100}, {200, 40}, {200, 600}, {2000, 100}};
  for (int threads : {1, 2, 3})
    for (const auto& [M, K] : sizes)
      for (int64_t N : {15, 64, 130, 300}) {
        SCOPED_TRACE(testing::Message() << threads << " threads, M " << M << " K " << K << " N " << N);
        omp_set_num_threads(threads);
        Problem p(M, K, N, seed += 5);
        const std::vector<float> packed = p.packed();
        std::vector<float> c(static_cast<size_t>(M * p.ldc), 1234.5f);
        gemm::Epilogue ep;
        ep.bias = p.bias.data();
        gemm::run(p.a.data(), M, K, p.lda, packed.data(), N, c.data(), p.ldc, ep);
        omp_set_num_threads(before);
        std::vector<double> want, scale;
        p.reference(want, scale);
        for (int64_t i = 0; i < M; ++i) {
          for (int64_t j = 0; j < N; ++j)
            ASSERT_NEAR(c[i * p.ldc + j], want[i * N + j] + p.bias[j], 1e-6 * scale[i * N + j] + 1e-6) << "at " << i << ", " << j;
          for (int64_t j = N; j < p.ldc; ++j) ASSERT_EQ(c[i * p.ldc + j], 1234.5f) << "wrote past N at " << i;
        }
      }
}

// The packed layout is the ISA's (64-column groups on AVX-512, 16 on AVX2), and packed_offset,
// which the attention kernel writes K^T by, names where pack_b put each element; the padding
// of the last panel is zeros.
TEST(GemmF32, PackedOffsetNamesWherePackBPutsEachElement) {
  if (!gemm::available()) GTEST_SKIP() << "no AVX2: the kernel does not run (see BlocksAndTails...)";
  const int64_t width = gemm::group_width();
  EXPECT_TRUE(width == 16 || width == gemm::kPanel) << width;
  for (int64_t N : {5, 16, 64, 70, 130}) {
    const int64_t K = 11;
    std::vector<float> b(static_cast<size_t>(K * N));
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i + 1);
    std::vector<float> packed(static_cast<size_t>(gemm::packed_size(K, N)), -1.0f);
    gemm::pack_b(b.data(), K, N, N, 1, 1.0f, packed.data());
    std::vector<bool> seen(packed.size(), false);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) {
        const auto at = static_cast<size_t>(gemm::packed_offset(K, k, n, width));
        ASSERT_LT(at, packed.size());
        EXPECT_EQ(packed[at], b[static_cast<size_t>(k * N + n)]) << "k " << k << " n " << n << " N " << N;
        seen[at] = true;
      }
    for (size_t i = 0; i < packed.size(); ++i) {
      if (!seen[i]) {
        ASSERT_EQ(packed[i], 0.0f) << "padding at " << i << ", N " << N;
      }
    }
  }
}

// Rows of B further apart than N (attention packs V from [T, heads * Dv] by its head's columns)
// and an alpha: every whole group of contiguous columns (the AVX2 path copies them by vectors)
// and a partial one hold alpha * B, the padding zeros.
TEST(GemmF32, PackBScalesRowsReadWithARowStride) {
  if (!gemm::available()) GTEST_SKIP() << "no AVX2: the kernel does not run (see BlocksAndTails...)";
  const int64_t width = gemm::group_width(), K = 13, N = 40, stride_k = 57;
  std::vector<float> b(static_cast<size_t>(K * stride_k));
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 97) - 48.0f;
  std::vector<float> packed(static_cast<size_t>(gemm::packed_size(K, N)), -1.0f);
  gemm::pack_b(b.data() + 3, K, N, stride_k, 1, -0.25f, packed.data());
  std::vector<bool> seen(packed.size(), false);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) {
      const auto at = static_cast<size_t>(gemm::packed_offset(K, k, n, width));
      ASSERT_EQ(packed[at], -0.25f * b[static_cast<size_t>(3 + k * stride_k + n)]) << "k " << k << " n " << n;
      seen[at] = true;
    }
  for (size_t i = 0; i < packed.size(); ++i) {
    if (!seen[i]) {
      ASSERT_EQ(packed[i], 0.0f) << "padding at " << i;
    }
  }
}

TEST(GemmF32, TransposedAndScaledWeightsArePackedAsTheirProduct) {
  if (!gemm::available()) GTEST_SKIP() << "no AVX2: the kernel does not run (see BlocksAndTails...)";
  const int64_t M = 9, K = 37, N = 70;
  Problem p(M, K, N, 3);
  // the same B stored transposed ([N, K]) and packed with alpha 0.5
  std::vector<float> bt(static_cast<size_t>(N * K));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) bt[n * K + k] = 2.0f * p.b[k * N + n];
  std::vector<float> packed(static_cast<size_t>(gemm::packed_size(K, N)));
  gemm::pack_b(bt.data(), K, N, 1, K, 0.5f, packed.data());
  std::vector<float> c(static_cast<size_t>(M * p.ldc));
  gemm::run(p.a.data(), M, K, p.lda, packed.data(), N, c.data(), p.ldc, {});
  std::vector<double> want, scale;
  p.reference(want, scale);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) ASSERT_NEAR(c[i * p.ldc + j], want[i * N + j], 1e-6 * scale[i * N + j] + 1e-6);
}

TEST(GemmF32, EveryEpilogueOpMatchesItsDefinition) {
  if (!gemm::available()) GTEST_SKIP() << "no AVX2: the kernel does not run (see BlocksAndTails...)";
  using A = dnnl::algorithm;
  struct Case {
    A alg;
    float alpha, beta;
    double (*f)(double x, double alpha, double beta);
  };
  const std::vector<Case> eltwise = {
      {A::eltwise_relu, 0.1f, 0, [](double x, double a, double) { return x < 0 ? a * x : x; }},
      {A::eltwise_linear, 1.5f, -0.25f, [](double x, double a, double b) { return a * x + b; }},
      {A::eltwise_clip, -1.0f, 2.0f, [](double x, double a, double b) { return std::min(std::max(x, a), b); }},
      {A::eltwise_clip_v2, 0.0f, 6.0f, [](double x, double a, double b) { return std::min(std::max(x, a), b); }},
      {A::eltwise_gelu_erf, 0, 0, [](double x, double, double) { return gelu_erf(x); }},
      {A::eltwise_gelu_tanh, 0, 0, [](double x, double, double) { return gelu_tanh(x); }},
      {A::eltwise_logistic, 0, 0, [](double x, double, double) { return logistic(x); }},
      {A::eltwise_tanh, 0, 0, [](double x, double, double) { return std::tanh(x); }},
      {A::eltwise_swish, 1.7f, 0, [](double x, double a, double) { return x * logistic(a * x); }},
      {A::eltwise_swish, 1.0f, 0, [](double x, double, double) { return x * logistic(x); }},  // simd v_swish_n
      {A::eltwise_abs, 0, 0, [](double x, double, double) { return std::fabs(x); }},
      {A::eltwise_square, 0, 0, [](double x, double, double) { return x * x; }},
      {A::eltwise_exp, 0, 0, [](double x, double, double) { return std::exp(x); }},
      {A::eltwise_elu, 0.8f, 0, [](double x, double a, double) { return x > 0 ? x : a * (std::exp(x) - 1); }},
      {A::eltwise_hardswish, 1.0f / 6, 0.5f,  // ONNX HardSwish (MobileNet-v3): both bends within -12..12
       [](double x, double a, double b) { return x * std::min(std::max(a * x + b, 0.0), 1.0); }},
  };
  // a one-column identity B: C = A's first column + bias, values from -12 to 12 through 0
  const int64_t M = 7, K = 1, N = 33;
  std::vector<float> a(static_cast<size_t>(M)), b(static_cast<size_t>(N), 1.0f), bias(static_cast<size_t>(N));
  for (int64_t i = 0; i < M; ++i) a[i] = -12.0f + 4.0f * static_cast<float>(i);
  for (int64_t j = 0; j < N; ++j) bias[j] = -2.0f + 4.0f * static_cast<float>(j) / (N - 1) + (j == 16 ? 1e-3f : 0.0f);
  std::vector<float> packed(static_cast<size_t>(gemm::packed_size(K, N)));
  gemm::pack_b(b.data(), K, N, N, 1, 1.0f, packed.data());
  // through the GEMM, through apply_epilogue on C already holding the products, and through it
  // without a bias on C holding the sums (the ops alone: some go by a loop of their own)
  auto check = [&](const gemm::Epilogue& ep, const std::function<double(double, int64_t)>& f) {
    std::vector<float> c(static_cast<size_t>(M * N)), applied(static_cast<size_t>(M * N)), ops_only(applied);
    gemm::run(a.data(), M, K, K, packed.data(), N, c.data(), N, ep);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) applied[i * N + j] = a[i], ops_only[i * N + j] = a[i] + bias[j];
    gemm::apply_epilogue(applied.data(), M, N, N, ep);
    gemm::Epilogue no_bias = ep;
    no_bias.bias = nullptr;
    gemm::apply_epilogue(ops_only.data(), M, N, N, no_bias);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        const double x = static_cast<double>(a[i]) + bias[j];
        const double want = f(x, j);
        ASSERT_NEAR(c[i * N + j], want, 2e-6 * (1.0 + std::fabs(want))) << "x = " << x;
        ASSERT_NEAR(applied[i * N + j], want, 2e-6 * (1.0 + std::fabs(want))) << "apply_epilogue, x = " << x;
        ASSERT_NEAR(ops_only[i * N + j], want, 2e-6 * (1.0 + std::fabs(want))) << "apply_epilogue, no bias, x = " << x;
      }
  };
  for (const Case& k : eltwise) {
    SCOPED_TRACE(testing::Message() << "eltwise alg " << static_cast<int>(k.alg));
    ASSERT_TRUE(gemm::supports_eltwise(k.alg));
    gemm::Epilogue ep;
    ep.bias = bias.data();
    gemm::EpilogueOp op;
    op.alg = k.alg;
    op.alpha = k.alpha;
    op.beta = k.beta;
    ep.ops.push_back(op);
    check(ep, [&](double x, int64_t) { return k.f(x, k.alpha, k.beta); });
  }
  // binary ops with a per-column and a scalar operand, then an activation after them
  const std::vector<float> col = random_floats(static_cast<size_t>(N), 5, 0.5f, 2.0f);
  const std::vector<std::pair<A, double (*)(double, double)>> binary = {
      {A::binary_add, [](double x, double y) { return x + y; }}, {A::binary_sub, [](double x, double y) { return x - y; }},
      {A::binary_mul, [](double x, double y) { return x * y; }}, {A::binary_div, [](double x, double y) { return x / y; }},
      {A::binary_max, [](double x, double y) { return std::max(x, y); }},
      {A::binary_min, [](double x, double y) { return std::min(x, y); }}};
  for (const auto& [alg, fn] : binary)
    for (bool scalar : {false, true}) {
      const auto f = fn;  // clang 14 cannot capture a structured binding
      SCOPED_TRACE(testing::Message() << "binary alg " << static_cast<int>(alg) << (scalar ? " scalar" : " per column"));
      ASSERT_TRUE(gemm::supports_binary(alg));
      gemm::Epilogue ep;
      ep.bias = bias.data();
      gemm::EpilogueOp op;
      op.kind = gemm::EpilogueOp::Kind::binary;
      op.alg = alg;
      op.set_operand(scalar ? Tensor::from_vector<float>({1.25f}, {1}) : Tensor::from_vector<float>(col, {N}));
      ep.ops.push_back(op);
      gemm::EpilogueOp relu;
      relu.alg = A::eltwise_relu;
      ep.ops.push_back(relu);
      check(ep, [&](double x, int64_t j) { return std::max(0.0, f(x, scalar ? 1.25 : col[j])); });
    }
  EXPECT_FALSE(gemm::supports_eltwise(dnnl::algorithm::eltwise_log));
  EXPECT_FALSE(gemm::supports_binary(dnnl::algorithm::binary_ge));
}

// apply_epilogue over rows wider than the vectors it takes at a time (16 of 16 or 8 lanes),
// rows apart by more than their width: every column once, with its own bias and operand, and
// the floats between the rows left as they were. Also a lone Swish without a bias (a depthwise
// block's: on AVX2 its own loop, swish_rows_avx2), and rows with no gap (ldc = ncols), which a
// lone Swish takes as one long row (AVX-512): a last vector across rows, a tail past the last.
TEST(GemmF32, ApplyEpilogueTakesWideRowsAChunkAtATimeAndLeavesTheGapsBetweenRows) {
  if (!gemm::available()) GTEST_SKIP() << "no AVX2: the kernel does not run (see BlocksAndTails...)";
  using A = dnnl::algorithm;
  for (const int64_t gap : {11, 0})
  for (const bool lone_swish : {false, true})
  for (const int64_t ncols : {1, 15, 16, 17, 20, 129, 256, 300}) {
    SCOPED_TRACE(testing::Message() << ncols << " columns, gap " << gap << (lone_swish ? " lone Swish" : ""));
    const int64_t rows = 3, ldc = ncols + gap;
    const std::vector<float> bias = random_floats(static_cast<size_t>(ncols), 11, -1.0f, 1.0f);
    const std::vector<float> scale = random_floats(static_cast<size_t>(ncols), 12, 0.5f, 2.0f);
    std::vector<float> c = random_floats(static_cast<size_t>(rows * ldc), 13, -8.0f, 8.0f);
    const std::vector<float> before = c;
    gemm::Epilogue ep;
    if (!lone_swish) ep.bias = bias.data();
    gemm::EpilogueOp swish;
    swish.alg = A::eltwise_swish;
    swish.alpha = 1.0f;
    ep.ops.push_back(swish);
    gemm::EpilogueOp mul;
    mul.kind = gemm::EpilogueOp::Kind::binary;
    mul.alg = A::binary_mul;
    mul.set_operand(Tensor::from_vector<float>(scale, {ncols}));
    if (!lone_swish) ep.ops.push_back(mul);
    gemm::apply_epilogue(c.data(), rows, ncols, ldc, ep);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < ldc; ++j) {
        const size_t i = static_cast<size_t>(r * ldc + j);
        if (j >= ncols) {
          ASSERT_EQ(c[i], before[i]) << "row " << r << ", gap column " << j;
          continue;
        }
        const double x = static_cast<double>(before[i]) + (lone_swish ? 0.0 : bias[j]);
        const double want = x * logistic(x) * (lone_swish ? 1.0 : scale[j]);
        ASSERT_NEAR(c[i], want, 2e-6 * (1.0 + std::fabs(want))) << "row " << r << ", column " << j;
      }
  }
}

TEST(GemmF32, TwoThreadsGiveTheBitsOfOne) {
  if (!gemm::available()) GTEST_SKIP() << "no AVX2: the kernel does not run (see BlocksAndTails...)";
  Problem p(50, 700, 200, 7);  // enough work to split; K in two slices
  const std::vector<float> packed = p.packed();
  gemm::Epilogue ep;
  ep.bias = p.bias.data();
  std::vector<float> one(static_cast<size_t>(p.M * p.ldc)), two(one.size());
  const int before = omp_get_max_threads();
  omp_set_num_threads(1);
  gemm::run(p.a.data(), p.M, p.K, p.lda, packed.data(), p.N, one.data(), p.ldc, ep);
  omp_set_num_threads(2);
  gemm::run(p.a.data(), p.M, p.K, p.lda, packed.data(), p.N, two.data(), p.ldc, ep);
  omp_set_num_threads(before);
  for (int64_t i = 0; i < p.M; ++i)
    for (int64_t j = 0; j < p.N; ++j) ASSERT_EQ(one[i * p.ldc + j], two[i * p.ldc + j]) << i << ", " << j;
}

TEST(GemmF32, ExpBelowTheNormalRangeIsZero) {
  // e^x for x < -87.3 is below the smallest normal float: the kernels' exp gives 0, never a
  // denormal that later arithmetic would run on the CPU's slow path
  if (!gemm::available()) GTEST_SKIP() << "no AVX2: the kernel does not run (see BlocksAndTails...)";
  std::vector<float> a = {-100.0f, -87.0f, -1e30f}, b(1, 1.0f), packed(static_cast<size_t>(gemm::packed_size(1, 1)));
  gemm::pack_b(b.data(), 1, 1, 1, 1, 1.0f, packed.data());
  gemm::Epilogue ep;
  gemm::EpilogueOp op;
  op.alg = dnnl::algorithm::eltwise_exp;
  ep.ops.push_back(op);
  std::vector<float> c(3);
  gemm::run(a.data(), 3, 1, 1, packed.data(), 1, c.data(), 1, ep);
  EXPECT_EQ(c[0], 0.0f);
  EXPECT_NEAR(c[1], std::exp(-87.0), 1e-6 * std::exp(-87.0));  // still normal: kept
  EXPECT_EQ(c[2], 0.0f);
}

}  // namespace test_gemm_f32

namespace test_gemm_f32 {

TEST(GemmF32, ChannelBlocksOfEightInAndOutMatchADoubleReference) {
  // run_serial_blocked8: A and C in channel blocks of 8 (a 1x1 convolution over nChw8c), read
  // and written in place; planes wider than the rows computed (the rest of C stays as it was),
  // a bias and a clamp, then C added (a residual sum) with a ReLU. Where the kernel is not
  // there (AVX-512 packs B otherwise, below AVX2 nothing) blocked8_supports says so.
  const int64_t M = 18, K = 40, plane = 26;  // 3 blocks of 6 pixels of a 26-pixel plane
  for (int64_t N : {int64_t{48}, int64_t{40}, int64_t{8}}) {  // (40, 8: a last group of 8 columns)
    SCOPED_TRACE(cat("N ", N));
    gemm::Epilogue clamp;
    gemm::EpilogueOp op;
    op.alg = dnnl::algorithm::eltwise_clip;
    op.alpha = -0.5f, op.beta = 0.75f;
    clamp.ops = {op};
    if (!gemm::blocked8_supports(clamp, K, N)) {
      EXPECT_TRUE(!gemm::available() || kiln::cpu::isa_at_least(kiln::cpu::Isa::avx512_core));
      return;
    }
    EXPECT_FALSE(gemm::blocked8_supports(clamp, 36, N));  // K not whole blocks
    EXPECT_FALSE(gemm::blocked8_supports(clamp, K, 36));  // N not whole blocks
    gemm::Epilogue swish;
    gemm::EpilogueOp s;
    s.alg = dnnl::algorithm::eltwise_swish, s.alpha = 1.0f;
    swish.ops = {s};
    EXPECT_FALSE(gemm::blocked8_supports(swish, K, N));  // not a clamp
    Problem p(M, K, N, 41);
    std::vector<double> want, scale;
    p.reference(want, scale);
    // A(m, k) at (k / 8) * plane * 8 + m * 8 + k % 8
    std::vector<float> a(static_cast<size_t>(K * plane), 0.0f);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) a[static_cast<size_t>((k / 8 * plane + m) * 8 + k % 8)] = p.a[m * p.lda + k];
    const std::vector<float> packed = p.packed();
    auto at = [&](int64_t m, int64_t n) { return static_cast<size_t>((n / 8 * plane + m) * 8 + n % 8); };
    const std::vector<float> before = random_floats(static_cast<size_t>(N * plane), 43);
    for (bool accumulate : {false, true}) {
      SCOPED_TRACE(accumulate ? "C added, then a ReLU" : "bias, clip");
      gemm::Epilogue ep;
      ep.bias = accumulate ? nullptr : p.bias.data();
      ep.accumulate = accumulate;
      if (accumulate) {
        gemm::EpilogueOp relu;
        relu.alg = dnnl::algorithm::eltwise_relu;
        ep.ops = {relu};
      } else {
        ep.ops = clamp.ops;
      }
      std::vector<float> c = before;
      gemm::run_serial_blocked8(a.data(), M, K, plane * 8, packed.data(), N, c.data(), plane * 8, ep);
      for (int64_t m = 0; m < plane; ++m)
        for (int64_t n = 0; n < N; ++n) {
          const float got = c[at(m, n)];
          if (m >= M) {  // past the rows computed: untouched
            EXPECT_EQ(got, before[at(m, n)]) << m << "," << n;
            continue;
          }
          double v = want[static_cast<size_t>(m * N + n)];
          v = accumulate ? std::max(0.0, v + before[at(m, n)]) : std::clamp(v + p.bias[static_cast<size_t>(n)], -0.5, 0.75);
          EXPECT_NEAR(got, v, 1e-5 * (scale[static_cast<size_t>(m * N + n)] + 2.0)) << m << "," << n;
        }
    }
    EXPECT_THROW(gemm::run_serial_blocked8(a.data(), 5, K, plane * 8, packed.data(), N, nullptr, plane * 8, clamp), Error);
  }
}

}  // namespace test_gemm_f32

namespace test_gemm_f32 {

TEST(GemmF32, RowsIntoChannelBlocksOfEightMatchADoubleReference) {
  // run_serial_to_blocked8: A in rows (an im2col's), C in channel blocks of 8 written in place,
  // K within one slice and over three of 2048 (the bias from the first, C added from the second, the
  // clamp at the last); columns [16, N) alone leave the others as they were; N 40 ends in a group of 8.
  gemm::Epilogue relu;
  gemm::EpilogueOp op;
  op.alg = dnnl::algorithm::eltwise_relu;
  relu.ops = {op};
  if (!gemm::blocked8_supports(relu, 8, 48)) {
    EXPECT_TRUE(!gemm::available() || kiln::cpu::isa_at_least(kiln::cpu::Isa::avx512_core));
    return;
  }
  const int64_t M = 12, plane = 14;
  for (int64_t N : {int64_t{48}, int64_t{40}})  // (40: a last group of 8 columns)
  for (int64_t K : {int64_t{27}, int64_t{1100}, int64_t{4200}}) {
    for (bool accumulate : {false, true}) {
      for (bool part : {false, true}) {
        SCOPED_TRACE(cat("N ", N, ", K ", K, accumulate ? ", C added" : ", bias", part ? ", columns [16, N)" : ""));
        Problem p(M, K, N, 51);
        std::vector<double> want, scale;
        p.reference(want, scale);
        const std::vector<float> packed = p.packed();
        auto at = [&](int64_t m, int64_t n) { return static_cast<size_t>((n / 8 * plane + m) * 8 + n % 8); };
        const std::vector<float> before = random_floats(static_cast<size_t>(N * plane), 53);
        std::vector<float> c = before;
        gemm::Epilogue ep = relu;
        ep.bias = p.bias.data();
        ep.accumulate = accumulate;
        gemm::run_serial_to_blocked8(p.a.data(), M, K, p.lda, packed.data(), N, c.data(), plane * 8, ep, part ? 16 : 0,
                                     N);
        for (int64_t m = 0; m < plane; ++m)
          for (int64_t n = 0; n < N; ++n) {
            const float got = c[at(m, n)];
            if (m >= M || (part && n < 16)) {
              EXPECT_EQ(got, before[at(m, n)]) << m << "," << n;
              continue;
            }
            const double v = want[static_cast<size_t>(m * N + n)] + p.bias[static_cast<size_t>(n)] +
                             (accumulate ? before[at(m, n)] : 0.0);
            EXPECT_NEAR(got, std::max(0.0, v), 1e-5 * (scale[static_cast<size_t>(m * N + n)] + 2.0)) << m << "," << n;
          }
      }
    }
  }
  std::vector<float> a(64), b(64);
  EXPECT_THROW(gemm::run_serial_to_blocked8(a.data(), 6, 8, 8, b.data(), 36, b.data(), 8, relu), Error);  // N % 8
  EXPECT_THROW(gemm::run_serial_to_blocked8(a.data(), 6, 8, 8, b.data(), 40, b.data(), 8, relu, 0, 24), Error);  // 16s
}

}  // namespace test_gemm_f32

namespace test_gemm_f32 {

TEST(GemmF32, ChannelBlocksOfSixteenMatchADoubleReference) {
  // run_serial_blocked16 (AVX-512): A in channel blocks of 16 (a 1x1 convolution over nChw16c)
  // or in rows (an im2col's, lda past K), C in channel blocks of 16 or in rows (ldc past N),
  // written in place; planes and rows wider than what is computed, whose other floats stay as they
  // were; M 13 (a last block of 1 row); N 80 (a last panel of 16 columns; 72 into rows: a last
  // vector of 8); K within one slice and over two of 512; epilogues in registers (bias and clip),
  // through memory (a Swish, a per-column multiply), C added (a residual sum, then a ReLU), and a
  // lone Swish in registers after the bias or after C added; columns [64, N) alone. Elsewhere
  // blocked16_supports says no.
  const int64_t M = 13, plane = 17;
  if (!gemm::blocked16_supports(true, true, 32, 80)) {
    EXPECT_FALSE(kiln::cpu::isa_at_least(kiln::cpu::Isa::avx512_core));
    return;
  }
  EXPECT_FALSE(gemm::blocked16_supports(true, true, 40, 80));   // K not whole blocks, A in blocks
  EXPECT_TRUE(gemm::blocked16_supports(false, true, 27, 80));   // any K from rows
  EXPECT_FALSE(gemm::blocked16_supports(false, true, 27, 40));  // N not whole blocks, C in blocks
  EXPECT_TRUE(gemm::blocked16_supports(true, false, 32, 40));   // any N into rows
  using A = dnnl::algorithm;
  for (int64_t K : {int64_t{48}, int64_t{1040}})
  for (int layout = 0; layout < 3; ++layout)  // A and C in blocks; A in rows; C in rows
  for (int form = 0; form < 5; ++form)
  for (bool part : {false, true}) {
    const bool a_blocks = layout != 1, c_blocks = layout != 2;
    const int64_t N = c_blocks ? 80 : 72, ldc = N + 5;
    SCOPED_TRACE(cat("K ", K, a_blocks ? ", A in blocks" : ", A in rows", c_blocks ? ", C in blocks" : ", C in rows",
                     ", epilogue ", form, part ? ", columns [64, N)" : ""));
    const std::vector<float> scale_col = random_floats(static_cast<size_t>(N), 61, 0.5f, 2.0f);
    Problem p(M, K, N, 57);
    std::vector<double> want, scale;
    p.reference(want, scale);
    const std::vector<float> packed = p.packed();
    std::vector<float> a(static_cast<size_t>(K * plane), 0.0f);  // A(m, k) at (k / 16) * plane * 16 + m * 16 + k % 16
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) a[static_cast<size_t>((k / 16 * plane + m) * 16 + k % 16)] = p.a[m * p.lda + k];
    auto at = [&](int64_t m, int64_t n) {
      return static_cast<size_t>(c_blocks ? (n / 16 * plane + m) * 16 + n % 16 : m * ldc + n);
    };
    const int64_t c_floats = c_blocks ? (N + 15) / 16 * 16 * plane : plane * ldc;
    const std::vector<float> before = random_floats(static_cast<size_t>(c_floats), 59);
    std::vector<float> c = before;
    gemm::Epilogue ep;
    gemm::EpilogueOp op;
    if (form == 0) {  // bias, clip: in registers
      ep.bias = p.bias.data();
      op.alg = A::eltwise_clip, op.alpha = -0.5f, op.beta = 0.75f;
      ep.ops = {op};
    } else if (form == 1) {  // bias, Swish, a per-column multiply: through memory
      ep.bias = p.bias.data();
      op.alg = A::eltwise_swish, op.alpha = 1.0f;
      gemm::EpilogueOp mul;
      mul.kind = gemm::EpilogueOp::Kind::binary;
      mul.alg = A::binary_mul;
      mul.set_operand(Tensor::from_vector<float>(scale_col, {N}));
      ep.ops = {op, mul};
    } else if (form == 2) {  // C added, then a ReLU
      ep.accumulate = true;
      op.alg = A::eltwise_relu;
      ep.ops = {op};
    } else {  // a lone Swish, in registers: after the bias (3), after C added (4)
      ep.bias = form == 3 ? p.bias.data() : nullptr;
      ep.accumulate = form == 4;
      op.alg = A::eltwise_swish, op.alpha = 1.0f;
      ep.ops = {op};
    }
    gemm::run_serial_blocked16(a_blocks ? a.data() : p.a.data(), M, K, a_blocks ? 0 : p.lda, a_blocks ? plane * 16 : 0,
                               packed.data(), N, c.data(), c_blocks ? 0 : ldc, c_blocks ? plane * 16 : 0, ep,
                               part ? 64 : 0);
    for (int64_t m = 0; m < plane; ++m)
      for (int64_t n = 0; n < (c_blocks ? N : ldc); ++n) {
        const float got = c[at(m, n)];
        if (m >= M || n >= N || (part && n < 64)) {
          ASSERT_EQ(got, before[at(m, n)]) << m << "," << n;
          continue;
        }
        double v = want[static_cast<size_t>(m * N + n)];
        if (form == 0) v = std::clamp(v + p.bias[static_cast<size_t>(n)], -0.5, 0.75);
        if (form == 1) {
          v += p.bias[static_cast<size_t>(n)];
          v = v / (1.0 + std::exp(-v)) * scale_col[static_cast<size_t>(n)];
        }
        if (form == 2) v = std::max(0.0, v + before[at(m, n)]);
        if (form >= 3) {
          v += form == 3 ? p.bias[static_cast<size_t>(n)] : before[at(m, n)];
          v = v / (1.0 + std::exp(-v));
        }
        ASSERT_NEAR(got, v, 1e-5 * (scale[static_cast<size_t>(m * N + n)] + 2.0)) << m << "," << n;
      }
  }
  std::vector<float> x(64 * 64), b(64 * 64);
  EXPECT_THROW(gemm::run_serial_blocked16(x.data(), 6, 40, 0, 64, b.data(), 64, b.data(), 0, 64, {}), Error);  // K % 16
  EXPECT_THROW(gemm::run_serial_blocked16(x.data(), 6, 16, 16, 0, b.data(), 80, b.data(), 0, 96, {}, 16), Error);  // 64s
  EXPECT_THROW(gemm::run_serial_blocked16(x.data(), 6, 16, 16, 0, b.data(), 40, b.data(), 0, 96, {}), Error);  // N % 16
}

}  // namespace test_gemm_f32
