// ONNX Runtime's QOperator contrib ops (com.microsoft QLinearMul, QLinearSigmoid, QLinearLeakyRelu,
// QLinearSoftmax, QLinearGlobalAveragePool, QLinearAveragePool, QLinearConcat, QLinearWhere, QGemm)
// against their definition: dequantize, compute in floating point, quantize (round half to
// even, saturate). Within one step of the 8-bit type, since the definition's float arithmetic
// may round a tie the other way; QGemm's integer sums and QLinearConcat's copies exactly.
// (Checked outside the suite too: on 28 models built with these ops, u8 and s8, kiln's outputs
// equal ONNX Runtime 1.30's bit for bit.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <type_traits>

#include "op_test_util.hpp"

namespace test_ops_qlinear {

using namespace kiln;
using namespace kiln::test;

namespace {

// One com.microsoft node over graph inputs (the 8-bit data) and constants (scales, zero points).
struct MsNode {
  OneNode t{13};
  MsNode() { t.g->opset_imports["com.microsoft"] = 1; }
  MsNode& in(const Tensor& x) {
    t.input(x);
    return *this;
  }
  MsNode& c(const Tensor& x) {
    t.constant(x);
    return *this;
  }
  MsNode& none() {
    t.absent();
    return *this;
  }
  Tensor run(const std::string& op, const std::map<std::string, ir::Attribute>& attrs = {}) {
    t.node = t.g->add_node(op, t.node_inputs, 1, "n0", "com.microsoft");
    t.node->attrs = attrs;
    t.g->add_output(t.node->output(0));
    return t.run().at(0);
  }
};

template <typename Q>
Tensor random_q(Shape s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(std::numeric_limits<Q>::min(), std::numeric_limits<Q>::max());
  std::vector<Q> v(static_cast<size_t>(shape_size(s)));
  for (Q& x : v) x = static_cast<Q>(d(rng));
  return Tensor::from_vector<Q>(v, std::move(s));
}

template <typename Q>
Tensor q1(int v) { return Tensor::from_vector<Q>({static_cast<Q>(v)}, {}); }
Tensor s1(float v) { return f32({v}, {}); }

template <typename Q>
double quantize(double real, double scale, double zp) {
  const double r = std::nearbyint(real / scale) + zp;
  return std::clamp(r, double(std::numeric_limits<Q>::min()), double(std::numeric_limits<Q>::max()));
}

// Every element of `got` within one step of want(i).
template <typename Q>
void expect_within_one(const Tensor& got, const std::function<double(int64_t)>& want) {
  ASSERT_EQ(got.dtype(), dtype_of<Q>::value);
  int64_t off = 0;
  for (int64_t i = 0; i < got.size(); ++i) {
    const double d = std::abs(double(got.data<Q>()[i]) - want(i));
    EXPECT_LE(d, 1.0) << "element " << i;
    off += d > 0;
  }
  EXPECT_LE(off, std::max<int64_t>(1, got.size() / 20)) << "more than 5% of the elements one step off";
}

template <typename Q>
void mul_case() {
  const Tensor a = random_q<Q>({2, 3, 4}, 1), b = random_q<Q>({4}, 2);
  const Tensor c = MsNode().in(a).c(s1(0.05f)).c(q1<Q>(7)).in(b).c(s1(0.02f)).c(q1<Q>(3)).c(s1(0.04f)).c(q1<Q>(5)).run("QLinearMul");
  ASSERT_EQ(c.shape(), (Shape{2, 3, 4}));
  expect_within_one<Q>(c, [&](int64_t i) {
    const double ra = (a.data<Q>()[i] - 7) * 0.05, rb = (b.data<Q>()[i % 4] - 3) * 0.02;
    return quantize<Q>(ra * rb, 0.04, 5);
  });
}

template <typename Q>
void unary_case(const std::string& op, const std::function<double(double)>& f, float ys, int yz,
                const std::map<std::string, ir::Attribute>& attrs = {}) {
  const Tensor x = random_q<Q>({1, 4, 8, 8}, 3);
  const int xz = std::is_signed_v<Q> ? -3 : 120;
  const Tensor y = MsNode().in(x).c(s1(0.06f)).c(q1<Q>(xz)).c(s1(ys)).c(q1<Q>(yz)).run(op, attrs);
  expect_within_one<Q>(y, [&](int64_t i) { return quantize<Q>(f((x.data<Q>()[i] - xz) * 0.06), ys, yz); });
}

template <typename Q>
void softmax_case(int opset, int axis) {
  const Tensor x = random_q<Q>({2, 5, 7}, 4);
  const int yz = std::numeric_limits<Q>::min();
  const Tensor y = MsNode().in(x).c(s1(0.1f)).c(q1<Q>(2)).c(s1(1 / 256.f)).c(q1<Q>(yz))
                       .run("QLinearSoftmax", {{"opset", int64_t(opset)}, {"axis", int64_t(axis)}});
  // opset 13, axis -1: along the last dim (7); opset 11, axis 1: over the trailing 35 together
  const int64_t len = opset >= 13 ? 7 : 35;
  expect_within_one<Q>(y, [&](int64_t i) {
    const int64_t base = i / len * len;
    double mx = -1e30, sum = 0;
    for (int64_t k = 0; k < len; ++k) mx = std::max(mx, (x.data<Q>()[base + k] - 2) * 0.1);
    for (int64_t k = 0; k < len; ++k) sum += std::exp((x.data<Q>()[base + k] - 2) * 0.1 - mx);
    return quantize<Q>(std::exp((x.data<Q>()[i] - 2) * 0.1 - mx) / sum, 1 / 256., yz);
  });
}

}  // namespace

TEST(OpsQLinear, MulOfTwoQuantizedTensors) {
  mul_case<uint8_t>();
  mul_case<int8_t>();
}

TEST(OpsQLinear, SigmoidAndLeakyRelu) {
  auto sig = [](double x) { return 1 / (1 + std::exp(-x)); };
  auto leaky = [](double x) { return x >= 0 ? x : 0.1 * x; };
  unary_case<uint8_t>("QLinearSigmoid", sig, 1 / 256.f, 0);
  unary_case<int8_t>("QLinearSigmoid", sig, 1 / 256.f, -128);
  unary_case<uint8_t>("QLinearLeakyRelu", leaky, 0.05f, 10, {{"alpha", 0.1f}});
  unary_case<int8_t>("QLinearLeakyRelu", leaky, 0.05f, 10, {{"alpha", 0.1f}});
}

TEST(OpsQLinear, SoftmaxInBothOpsetForms) {
  softmax_case<uint8_t>(13, -1);
  softmax_case<int8_t>(13, -1);
  softmax_case<uint8_t>(11, 1);
  softmax_case<int8_t>(11, 1);
}

TEST(OpsQLinear, GlobalAveragePoolChannelsFirstAndLast) {
  const Tensor x = random_q<uint8_t>({2, 6, 5, 5}, 5);
  const Tensor y = MsNode().in(x).c(s1(0.05f)).c(q1<uint8_t>(4)).c(s1(0.01f)).c(q1<uint8_t>(2)).run("QLinearGlobalAveragePool");
  ASSERT_EQ(y.shape(), (Shape{2, 6, 1, 1}));
  expect_within_one<uint8_t>(y, [&](int64_t i) {
    double sum = 0;
    for (int64_t k = 0; k < 25; ++k) sum += (x.data<uint8_t>()[i * 25 + k] - 4) * 0.05;
    return quantize<uint8_t>(sum / 25, 0.01, 2);
  });
  const Tensor xl = random_q<int8_t>({2, 5, 5, 6}, 6);  // channels last
  const Tensor yl = MsNode().in(xl).c(s1(0.05f)).c(q1<int8_t>(4)).c(s1(0.01f)).c(q1<int8_t>(-2))
                        .run("QLinearGlobalAveragePool", {{"channels_last", int64_t(1)}});
  ASSERT_EQ(yl.shape(), (Shape{2, 1, 1, 6}));
  expect_within_one<int8_t>(yl, [&](int64_t i) {
    const int64_t n = i / 6, c = i % 6;
    double sum = 0;
    for (int64_t k = 0; k < 25; ++k) sum += (xl.data<int8_t>()[(n * 25 + k) * 6 + c] - 4) * 0.05;
    return quantize<int8_t>(sum / 25, 0.01, -2);
  });
}

TEST(OpsQLinear, AveragePoolIsTheFloatPoolOfTheDequantizedInput) {
  const Tensor x = random_q<uint8_t>({1, 3, 9, 9}, 7);
  std::vector<float> real(static_cast<size_t>(x.size()));
  for (int64_t i = 0; i < x.size(); ++i) real[static_cast<size_t>(i)] = (x.data<uint8_t>()[i] - 4) * 0.05f;
  for (int64_t include_pad : {0, 1}) {
    const std::map<std::string, ir::Attribute> attrs = {{"kernel_shape", std::vector<int64_t>{3, 3}},
                                                        {"strides", std::vector<int64_t>{2, 2}},
                                                        {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                                                        {"count_include_pad", include_pad}};
    const Tensor want = run_op("AveragePool", {f32(real, x.shape())}, attrs)[0];
    const Tensor y = MsNode().in(x).c(s1(0.05f)).c(q1<uint8_t>(4)).c(s1(0.03f)).c(q1<uint8_t>(1)).run("QLinearAveragePool", attrs);
    ASSERT_EQ(y.shape(), want.shape());
    expect_within_one<uint8_t>(y, [&](int64_t i) { return quantize<uint8_t>(want.data<float>()[i], 0.03, 1); });
  }
  expect_error([&] {
    MsNode().in(x).c(s1(0.05f)).c(q1<uint8_t>(4)).c(s1(0.03f)).c(q1<uint8_t>(1))
        .run("QLinearAveragePool", {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"channels_last", int64_t(1)}});
  }, "channels_last = 1");
}

TEST(OpsQLinear, ConcatRequantizesEachInput) {
  const Tensor a = random_q<int8_t>({2, 3, 4}, 8), b = random_q<int8_t>({2, 2, 4}, 9);
  // inputs: Y_scale, Y_zp, then (a, its params), (b, Y's own params: copied as they are)
  const Tensor y = MsNode().c(s1(0.07f)).c(q1<int8_t>(3)).in(a).c(s1(0.05f)).c(q1<int8_t>(-5)).in(b).c(s1(0.07f)).c(q1<int8_t>(3))
                       .run("QLinearConcat", {{"axis", int64_t(1)}});
  ASSERT_EQ(y.shape(), (Shape{2, 5, 4}));
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t r = 0; r < 5; ++r)
      for (int64_t k = 0; k < 4; ++k) {
        const int got = y.data<int8_t>()[(n * 5 + r) * 4 + k];
        if (r < 3) {
          EXPECT_NEAR(got, quantize<int8_t>((a.data<int8_t>()[(n * 3 + r) * 4 + k] + 5) * 0.05, 0.07, 3), 1.0);
        } else {
          EXPECT_EQ(got, b.data<int8_t>()[(n * 2 + r - 3) * 4 + k]);
        }
      }
  expect_error([&] {
    MsNode().c(s1(0.07f)).c(q1<int8_t>(3)).in(a).c(s1(0.05f)).c(q1<int8_t>(-5)).in(b).run("QLinearConcat", {{"axis", int64_t(1)}});
  }, "(X, X_scale, X_zero_point) triples, got 6");
}

TEST(OpsQLinear, WhereRequantizesTheChosenSide) {
  const Tensor x = random_q<uint8_t>({2, 3, 4}, 10), other = random_q<uint8_t>({4}, 11);
  const Tensor cond = Tensor::from_vector<bool>({true, false, true}, {3, 1});
  const Tensor z = MsNode().c(cond).in(x).c(s1(0.05f)).c(q1<uint8_t>(6)).in(other).c(s1(0.1f)).c(q1<uint8_t>(2))
                       .c(s1(0.08f)).c(q1<uint8_t>(4)).run("QLinearWhere");
  ASSERT_EQ(z.shape(), (Shape{2, 3, 4}));
  expect_within_one<uint8_t>(z, [&](int64_t i) {
    const bool pick_x = ((i / 4) % 3) != 1;
    const double real = pick_x ? (x.data<uint8_t>()[i] - 6) * 0.05 : (other.data<uint8_t>()[i % 4] - 2) * 0.1;
    return quantize<uint8_t>(real, 0.08, 4);
  });
}

TEST(OpsQLinear, GemmPerColumnScalesBiasAndBothOutputs) {
  const int64_t M = 4, K = 32, N = 16;
  const Tensor a = random_q<uint8_t>({M, K}, 12), b = random_q<int8_t>({N, K}, 13);  // B given transposed
  std::vector<float> sb(N);
  std::vector<int32_t> bias(N);
  for (int64_t j = 0; j < N; ++j) {
    sb[static_cast<size_t>(j)] = 0.002f + 0.0005f * static_cast<float>(j);
    bias[static_cast<size_t>(j)] = static_cast<int32_t>(37 * j - 300);
  }
  auto acc = [&](int64_t m, int64_t j) {  // exact, in integers
    int64_t s = bias[static_cast<size_t>(j)];
    for (int64_t k = 0; k < K; ++k) s += (a.data<uint8_t>()[m * K + k] - 9) * int64_t{b.data<int8_t>()[j * K + k]};
    return s;
  };
  auto node = [&] {
    MsNode n;
    n.in(a).c(s1(0.03f)).c(q1<uint8_t>(9)).c(b).c(f32(sb, {N})).c(Tensor::from_vector<int8_t>(std::vector<int8_t>(N, 0), {N}))
        .c(Tensor::from_vector<int32_t>(bias, {N}));
    return n;
  };
  const Tensor real = node().run("QGemm", {{"alpha", 0.5f}, {"transB", int64_t(1)}});
  ASSERT_EQ(real.dtype(), DType::f32);
  ASSERT_EQ(real.shape(), (Shape{M, N}));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t j = 0; j < N; ++j) {
      const double want = 0.5 * 0.03 * sb[static_cast<size_t>(j)] * static_cast<double>(acc(m, j));
      EXPECT_NEAR(real.data<float>()[m * N + j], want, 1e-5 * std::max(1.0, std::abs(want)));
    }
  MsNode q = node();
  q.c(s1(0.05f)).c(q1<uint8_t>(3));
  const Tensor y = q.run("QGemm", {{"transB", int64_t(1)}});
  expect_within_one<uint8_t>(y, [&](int64_t i) {
    return quantize<uint8_t>(0.03 * sb[static_cast<size_t>(i % N)] * static_cast<double>(acc(i / N, i % N)), 0.05, 3);
  });
  expect_error([&] {
    MsNode().in(a).c(s1(0.03f)).c(q1<uint8_t>(9)).c(b).c(f32({1, 2, 3}, {3})).none().run("QGemm", {{"transB", int64_t(1)}});
  }, "b_scale must hold 1 or N = 16 values, got 3");
}

TEST(OpsQLinear, ParametersAreChecked) {
  const Tensor x = random_q<uint8_t>({4}, 14);
  expect_error([&] { MsNode().in(x).c(s1(0.05f)).c(q1<int8_t>(1)).c(s1(0.01f)).c(q1<uint8_t>(0)).run("QLinearSigmoid"); },
               "X_zero_point must be u8 as X, got i8");
  expect_error([&] { MsNode().in(x).c(s1(0.0f)).c(q1<uint8_t>(1)).c(s1(0.01f)).c(q1<uint8_t>(0)).run("QLinearSigmoid"); },
               "X_scale must be a positive finite number");
  expect_error([&] { MsNode().in(f32({1, 2}, {2})).c(s1(0.05f)).none().c(s1(0.01f)).run("QLinearLeakyRelu"); },
               "X must be uint8 or int8, got f32");
  // zero points left out (empty names) count as 0
  const Tensor y = MsNode().in(x).c(s1(0.05f)).none().c(s1(0.05f)).run("QLinearLeakyRelu", {{"alpha", 0.5f}});
  EXPECT_EQ(vals<uint8_t>(y), vals<uint8_t>(x));
}

}  // namespace test_ops_qlinear
