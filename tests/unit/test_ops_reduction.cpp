// Unit tests of the reduction family: Reduce*, ArgMax/Min, Softmax family,
// LayerNormalization, TopK, CumSum, NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "op_test_util.hpp"

namespace test_ops_reduction {

using namespace kiln;
using namespace kiln::test;

namespace {

void expect_near(const Tensor& t, const std::vector<double>& want, double tol = 1e-5) {
  auto got = t.to_f64();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isinf(want[i])) EXPECT_EQ(got[i], want[i]) << "at " << i;
    else EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
  }
}

}  // namespace

TEST(OpsReduction, ReduceSumAxesInputKeepdims) {
  OneNode t;
  t.input(f32({1, 2, 3, 4, 5, 6}, {2, 3})).constant(i64({1}, {1}));
  t.make("ReduceSum");
  auto out = t.run();
  EXPECT_EQ(out[0].shape(), (Shape{2, 1}));
  expect_near(out[0], {6, 15});
  EXPECT_EQ(t.node->output(0)->type.shape.to_string(), "[2,1]");
}

TEST(OpsReduction, ReduceSumAllAndNoop) {
  {
    OneNode t;
    t.input(f32({1, 2, 3, 4}, {2, 2}));
    t.make("ReduceSum")->attrs["keepdims"] = 0;
    auto out = t.run();
    EXPECT_EQ(out[0].shape(), Shape{});
    expect_near(out[0], {10});
  }
  {
    OneNode t;
    t.input(f32({1, 2, 3, 4}, {2, 2})).constant(i64({}, {0}));
    t.make("ReduceSum")->attrs["noop_with_empty_axes"] = 1;
    auto out = t.run();
    EXPECT_EQ(out[0].shape(), (Shape{2, 2}));
    expect_near(out[0], {1, 2, 3, 4});
  }
}

TEST(OpsReduction, ReduceVariantsAttrAxes) {
  // x = [[1,-2],[3,4]] over axis 0 (negative axis -2), no keepdims
  struct Case {
    const char* op;
    std::vector<double> want;
  } cases[] = {
      {"ReduceMean", {2, 1}},
      {"ReduceMax", {3, 4}},
      {"ReduceMin", {1, -2}},
      {"ReduceProd", {3, -8}},
      {"ReduceL1", {4, 6}},
      {"ReduceL2", {std::sqrt(10.0), std::sqrt(20.0)}},
      {"ReduceSumSquare", {10, 20}},
      {"ReduceLogSumExp", {std::log(std::exp(1.0) + std::exp(3.0)), std::log(std::exp(-2.0) + std::exp(4.0))}},
  };
  for (auto& c : cases) {
    OneNode t(13);
    t.input(f32({1, -2, 3, 4}, {2, 2}));
    ir::Node* n = t.make(c.op);
    n->attrs["axes"] = std::vector<int64_t>{-2};
    n->attrs["keepdims"] = 0;
    auto out = t.run();
    EXPECT_EQ(out[0].shape(), (Shape{2})) << c.op;
    expect_near(out[0], c.want);
  }
  OneNode t(13);
  t.input(f32({1, 2, 3, 4}, {2, 2}));
  t.make("ReduceLogSum")->attrs["axes"] = std::vector<int64_t>{1};
  expect_near(t.run()[0], {std::log(3.0), std::log(7.0)});
}

TEST(OpsReduction, ReduceIntegersAndEmpty) {
  OneNode t(13);
  t.input(Tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 7}, {2, 3}));
  t.make("ReduceMean")->attrs["axes"] = std::vector<int64_t>{1};
  auto out = t.run();
  ASSERT_EQ(out[0].dtype(), DType::i32);
  EXPECT_EQ(out[0].to_i64(), (std::vector<int64_t>{2, 5}));  // integer division like onnxruntime

  // zero-size reduced dim: sum -> 0, prod -> 1, max -> -inf
  for (auto [op, want] : {std::pair{"ReduceSum", 0.0}, {"ReduceProd", 1.0}, {"ReduceMax", -INFINITY}}) {
    OneNode e(13);
    e.input(Tensor(DType::f32, {2, 0}));
    if (std::string(op) == "ReduceSum") e.constant(i64({1}, {1}));
    ir::Node* n = e.make(op);
    if (std::string(op) != "ReduceSum") n->attrs["axes"] = std::vector<int64_t>{1};
    auto r = e.run();
    EXPECT_EQ(r[0].shape(), (Shape{2, 1}));
    expect_near(r[0], {want, want});
  }
}

TEST(OpsReduction, ReduceErrors) {
  OneNode t(13);
  t.input(f32({1, 2}, {2}));
  t.make("ReduceMax")->attrs["axes"] = std::vector<int64_t>{3};
  EXPECT_THROW(t.run(), Error);
  OneNode d(13);
  d.input(f32({1, 2}, {2}));
  d.make("ReduceMax")->attrs["axes"] = std::vector<int64_t>{0, -1};  // repeated
  EXPECT_THROW(d.run(), Error);
}

TEST(OpsReduction, ArgMaxArgMin) {
  OneNode t;
  t.input(f32({2, 1, 2, 3, 3, 0}, {2, 3}));
  ir::Node* n = t.make("ArgMax");
  n->attrs["axis"] = 1;
  n->attrs["keepdims"] = 0;
  auto out = t.run();
  EXPECT_EQ(out[0].dtype(), DType::i64);
  EXPECT_EQ(out[0].to_i64(), (std::vector<int64_t>{0, 0}));

  OneNode l;
  l.input(f32({2, 1, 2, 3, 3, 0}, {2, 3}));
  n = l.make("ArgMax");
  n->attrs["axis"] = -1;
  n->attrs["select_last_index"] = 1;
  out = l.run();
  EXPECT_EQ(out[0].shape(), (Shape{2, 1}));
  EXPECT_EQ(out[0].to_i64(), (std::vector<int64_t>{2, 1}));

  OneNode m;
  m.input(Tensor::from_vector<int64_t>({5, 1, 7, 0}, {2, 2}));
  m.make("ArgMin");  // axis 0
  EXPECT_EQ(m.run()[0].to_i64(), (std::vector<int64_t>{0, 1}));
}

TEST(OpsReduction, SoftmaxFamilyOpset13) {
  OneNode t(13);
  t.input(f32({0, 1, 2, 1000, 1000, 1000}, {2, 3}));
  t.make("Softmax");
  double e0 = 1 / (1 + std::exp(1.0) + std::exp(2.0));
  expect_near(t.run()[0], {e0, e0 * std::exp(1.0), e0 * std::exp(2.0), 1 / 3.0, 1 / 3.0, 1 / 3.0});

  OneNode l(13);
  l.input(f32({0, 1, 2, 1000, 1000, 1000}, {2, 3}));
  l.make("LogSoftmax")->attrs["axis"] = 1;
  expect_near(l.run()[0], {std::log(e0), std::log(e0) + 1, std::log(e0) + 2, -std::log(3.0), -std::log(3.0),
                           -std::log(3.0)});

  OneNode h(13);
  h.input(f32({3, 1, 3, 0, 5, 2}, {2, 3}));
  h.make("Hardmax")->attrs["axis"] = 0;
  expect_near(h.run()[0], {1, 0, 1, 0, 1, 0});
}

TEST(OpsReduction, SoftmaxLegacyCoercesTo2D) {
  // opset 11, axis 1 on [2,2,2]: softmax over the 4 trailing values of each batch
  OneNode t(11);
  t.input(f32({0, 0, 0, 0, 1, 1, 1, 1}, {2, 2, 2}));
  t.make("Softmax");
  expect_near(t.run()[0], {0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25});
  OneNode h(11);
  h.input(f32({0, 2, 0, 2, 1, 0, 0, 0}, {2, 2, 2}));
  h.make("Hardmax");
  expect_near(h.run()[0], {0, 1, 0, 0, 1, 0, 0, 0});
}

TEST(OpsReduction, LayerNormalization) {
  OneNode t(17);
  t.input(f32({1, 2, 3, 4, 2, 2, 2, 2}, {2, 4})).input(f32({1, 1, 2, 2}, {4})).input(f32({0, 0, 0, 1}, {4}));
  t.make("LayerNormalization", 3)->attrs["epsilon"] = 0.0f;
  auto out = t.run();
  double inv = 1 / std::sqrt(1.25);
  // second row is constant: variance 0 and epsilon 0 give inf * 0 = NaN, like the spec formula
  auto y = out[0].to_f64();
  std::vector<double> want = {-1.5 * inv, -0.5 * inv, 2 * 0.5 * inv, 2 * 1.5 * inv + 1};
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(y[i], want[i], 1e-5);
  EXPECT_TRUE(std::isnan(y[4]));
  EXPECT_EQ(out[1].shape(), (Shape{2, 1}));
  expect_near(out[1], {2.5, 2});
  EXPECT_EQ(out[2].dtype(), DType::f32);
  EXPECT_NEAR(out[2].to_f64()[0], inv, 1e-5);
}

TEST(OpsReduction, TopK) {
  OneNode t;
  t.input(f32({1, 3, 3, 2, 5, 4, 4, 0}, {2, 4})).constant(i64({2}, {1}));
  t.make("TopK", 2);
  auto out = t.run();
  EXPECT_EQ(out[0].shape(), (Shape{2, 2}));
  expect_near(out[0], {3, 3, 5, 4});
  EXPECT_EQ(out[1].to_i64(), (std::vector<int64_t>{1, 2, 0, 1}));  // ties: lower index first

  OneNode s;
  s.input(f32({1, 3, 3, 2, 5, 4, 4, 0}, {2, 4})).constant(i64({3}, {1}));
  ir::Node* n = s.make("TopK", 2);
  n->attrs["largest"] = 0;
  n->attrs["axis"] = 0;
  EXPECT_THROW(s.run(), Error);  // k = 3 > dim 2
}

TEST(OpsReduction, CumSum) {
  for (auto [excl, rev, want] :
       {std::tuple{0, 0, std::vector<double>{1, 3, 6}}, {1, 0, {0, 1, 3}}, {0, 1, {6, 5, 3}}, {1, 1, {5, 3, 0}}}) {
    OneNode t;
    t.input(f32({1, 2, 3}, {3})).constant(Tensor::scalar<int32_t>(0));
    ir::Node* n = t.make("CumSum");
    n->attrs["exclusive"] = excl;
    n->attrs["reverse"] = rev;
    expect_near(t.run()[0], want);
  }
  OneNode t;
  t.input(Tensor::from_vector<int64_t>({1, 2, 3, 4}, {2, 2})).constant(Tensor::scalar<int64_t>(-2));
  t.make("CumSum");
  EXPECT_EQ(t.run()[0].to_i64(), (std::vector<int64_t>{1, 2, 4, 6}));
}

TEST(OpsReduction, NllLossAndSce) {
  // input [N=2, C=3], target [2], weight [3]
  Tensor x = f32({-1, -2, -3, -4, -5, -6}, {2, 3});
  {
    OneNode t;
    t.input(x).input(i64({2, 0}, {2})).input(f32({1, 2, 3}, {3}));
    t.make("NegativeLogLikelihoodLoss");  // mean
    expect_near(t.run()[0], {(3 * 3 + 4 * 1) / 4.0});
  }
  {
    OneNode t;
    t.input(x).input(i64({2, 0}, {2}));
    ir::Node* n = t.make("NegativeLogLikelihoodLoss");
    n->attrs["reduction"] = "none";
    n->attrs["ignore_index"] = 0;
    auto out = t.run();
    EXPECT_EQ(out[0].shape(), (Shape{2}));
    expect_near(out[0], {3, 0});
  }
  {
    OneNode t;
    t.input(x).input(i64({2, 5}, {2}));
    t.make("NegativeLogLikelihoodLoss");
    EXPECT_THROW(t.run(), Error);  // target 5 out of range
  }
  {
    OneNode t;
    t.input(f32({0, 0, 1, 1}, {2, 2})).input(i64({0, 1}, {2}));
    ir::Node* n = t.make("SoftmaxCrossEntropyLoss", 2);
    n->attrs["reduction"] = "sum";
    auto out = t.run();
    expect_near(out[0], {2 * std::log(2.0)});
    expect_near(out[1], {-std::log(2.0), -std::log(2.0), -std::log(2.0), -std::log(2.0)});
  }
  {
    OneNode t;
    t.input(x).input(i64({0}, {1}));
    t.make("SoftmaxCrossEntropyLoss")->attrs["reduction"] = "avg";
    EXPECT_THROW(t.run(), Error);  // bad reduction attribute
  }
}

TEST(OpsReduction, LargeSumAndHalfPrecision) {
  OneNode t;
  t.input(Tensor::from_vector<float>(std::vector<float>(1 << 20, 0.1f), {1 << 20}));
  t.make("ReduceSum")->attrs["keepdims"] = 0;
  EXPECT_NEAR(t.run()[0].to_f64()[0], 0.1 * (1 << 20), 1.0);  // float accumulation would drift

  OneNode h(13);
  h.input(Tensor::from_vector<float16>({float16(1.0f), float16(1.0f)}, {2}));
  h.make("Softmax");
  auto out = h.run();
  EXPECT_EQ(out[0].dtype(), DType::f16);
  expect_near(out[0], {0.5, 0.5}, 1e-3);
}

TEST(OpsReduction, DtypeAndShapeErrors) {
  OneNode s(13);
  s.input(Tensor::from_vector<int32_t>({1, 2}, {2}));
  s.make("Softmax");
  EXPECT_THROW(s.run(), Error);  // Softmax is floating-point only

  OneNode a;
  a.input(f32({1, 2}, {2}));
  a.make("ArgMax")->attrs["axis"] = 2;
  EXPECT_THROW(a.run(), Error);

  OneNode l(17);
  l.input(f32({1, 2, 3, 4}, {2, 2})).input(f32({1, 1, 1}, {3}));
  l.make("LayerNormalization");
  EXPECT_THROW(l.run(), Error);  // Scale does not broadcast to [2]

  OneNode n;
  n.input(f32({1, 2, 3, 4}, {2, 2})).input(i64({0, 1, 1}, {3}));
  n.make("NegativeLogLikelihoodLoss");
  EXPECT_THROW(n.run(), Error);  // target shape mismatch
}

}  // namespace test_ops_reduction
