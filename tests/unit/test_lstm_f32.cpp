// kiln's LSTM kernel (cpu/lstm_f32.hpp) against a double reference of the ONNX definition
// (gates i, o, f, c; default activations): forward, reverse and both directions, one row and
// several, with and without initial states and biases, hidden sizes off the vector width, on
// one thread and two, at the ISA in use (AVX-512 or AVX2). Below AVX2 the kernel does not run:
// run() says so.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <random>
#include <vector>

#include "cpu/gemm_f32.hpp"
#include "cpu/lstm_f32.hpp"
#include <kiln/error.hpp>

#include "tensor_test_util.hpp"

namespace test_lstm_f32 {

using namespace kiln;
using kiln::test::random_floats;
namespace lstm = kiln::cpu::lstm_f32;
namespace gemm = kiln::cpu::gemm_f32;

namespace {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

void check(int64_t T, int64_t N, int64_t C, int64_t H, int64_t D, bool reverse, bool states, bool bias, int threads) {
  SCOPED_TRACE(testing::Message() << "T " << T << " N " << N << " C " << C << " H " << H << " D " << D << " reverse "
                                  << reverse << " states " << states << " bias " << bias << " threads " << threads);
  const int64_t G4 = 4 * H;
  const auto x = random_floats(static_cast<size_t>(T * N * C), 1), W = random_floats(static_cast<size_t>(D * G4 * C), 2, -0.5f, 0.5f),
             R = random_floats(static_cast<size_t>(D * G4 * H), 3, -0.5f, 0.5f), B = random_floats(static_cast<size_t>(D * 2 * G4), 4),
             h0 = random_floats(static_cast<size_t>(D * N * H), 5), c0 = random_floats(static_cast<size_t>(D * N * H), 6);
  std::vector<std::vector<float>> wp(D), rp(D), bs(D);
  lstm::Weights w;
  for (int64_t d = 0; d < D; ++d) {
    wp[d].resize(static_cast<size_t>(gemm::packed_size(C, G4)));
    rp[d].resize(static_cast<size_t>(gemm::packed_size(H, G4)));
    gemm::pack_b(W.data() + d * G4 * C, C, G4, 1, C, 1.0f, wp[d].data());
    gemm::pack_b(R.data() + d * G4 * H, H, G4, 1, H, 1.0f, rp[d].data());
    w.w[d] = wp[d].data();
    w.r[d] = rp[d].data();
    if (bias) {
      for (int64_t j = 0; j < G4; ++j) bs[d].push_back(B[d * 2 * G4 + j] + B[d * 2 * G4 + G4 + j]);
      w.bias[d] = bs[d].data();
    }
  }
  const lstm::Geometry g{T, N, C, H, D, reverse};
  std::vector<float> y(static_cast<size_t>(T * D * N * H)), yh(static_cast<size_t>(D * N * H)), yc(yh.size());
  std::vector<char> scratch(lstm::scratch_bytes(g));
  lstm::run(g, w, x.data(), states ? h0.data() : nullptr, states ? c0.data() : nullptr, y.data(), yh.data(), yc.data(),
            scratch.data(), threads);
  for (int64_t d = 0; d < D; ++d) {
    const bool rev = D == 2 ? d == 1 : reverse;
    for (int64_t n = 0; n < N; ++n) {
      std::vector<double> h(static_cast<size_t>(H)), c(static_cast<size_t>(H));
      for (int64_t j = 0; j < H; ++j) {
        h[j] = states ? h0[(d * N + n) * H + j] : 0.0;
        c[j] = states ? c0[(d * N + n) * H + j] : 0.0;
      }
      for (int64_t s = 0; s < T; ++s) {
        const int64_t t = rev ? T - 1 - s : s;
        std::vector<double> gate(static_cast<size_t>(G4));
        for (int64_t r = 0; r < G4; ++r) {
          double v = bias ? static_cast<double>(B[d * 2 * G4 + r]) + B[d * 2 * G4 + G4 + r] : 0.0;
          for (int64_t k = 0; k < C; ++k) v += static_cast<double>(x[(t * N + n) * C + k]) * W[(d * G4 + r) * C + k];
          for (int64_t k = 0; k < H; ++k) v += h[k] * R[(d * G4 + r) * H + k];
          gate[r] = v;
        }
        for (int64_t j = 0; j < H; ++j) {
          const double i = sigmoid(gate[j]), o = sigmoid(gate[H + j]), f = sigmoid(gate[2 * H + j]),
                       z = std::tanh(gate[3 * H + j]);
          c[j] = f * c[j] + i * z;
          h[j] = o * std::tanh(c[j]);
        }
        for (int64_t j = 0; j < H; ++j)
          ASSERT_NEAR(y[((t * D + d) * N + n) * H + j], h[j], 1e-5) << "Y at t " << t << " d " << d << " n " << n;
      }
      for (int64_t j = 0; j < H; ++j) {
        ASSERT_NEAR(yh[(d * N + n) * H + j], h[j], 1e-5) << "Y_h";
        ASSERT_NEAR(yc[(d * N + n) * H + j], c[j], 1e-5) << "Y_c";
      }
    }
  }
}

}  // namespace

TEST(LstmF32, StepsMatchADoubleReference) {
  if (!lstm::available()) {  // below AVX2: an error, never an illegal instruction
    const lstm::Geometry g{2, 1, 3, 4, 1, false};
    std::vector<float> x(6), y(8);
    std::vector<char> scratch(lstm::scratch_bytes(g));
    EXPECT_THROW(lstm::run(g, {}, x.data(), nullptr, nullptr, y.data(), nullptr, nullptr, scratch.data(), 1), Error);
    return;
  }
  const int before = omp_get_max_threads();
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    check(7, 1, 5, 17, 1, false, true, true, threads);
    check(7, 3, 5, 17, 1, true, false, true, threads);
    check(9, 2, 20, 16, 2, false, true, false, threads);
    check(30, 1, 33, 40, 2, false, false, true, threads);
  }
  omp_set_num_threads(before);
}

}  // namespace test_lstm_f32
