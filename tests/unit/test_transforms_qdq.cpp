// The kiln FakeQuantize op, and QdqToFakeQuantize: QuantizeLinear -> DequantizeLinear on
// activations becomes one FakeQuantize that computes the same values.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <limits>

#include "transforms/hoist_qdq.hpp"
#include "transforms/qdq_to_fake_quantize.hpp"
#include "transforms_test_util.hpp"

namespace test_transforms_qdq {

using namespace kiln;
using namespace kiln::test;
using transforms::fuse_qdq_to_fake_quantize;
using transforms::kQdqToFakeQuantize;
using transforms::PassLog;

namespace {

std::vector<float> run_fq(const Tensor& x, const Tensor& il, const Tensor& ih, const Tensor& ol, const Tensor& oh,
                          int64_t levels) {
  auto g = new_graph();
  g->opset_imports["kiln"] = 1;
  ir::Value* in = g->add_input("x", {x.dtype(), ir::PartialShape(x.shape())});
  ir::Node* fq = g->add_node("FakeQuantize",
                             {in, g->add_constant("il", il), g->add_constant("ih", ih), g->add_constant("ol", ol),
                              g->add_constant("oh", oh)},
                             1, "fq", "kiln");
  fq->attrs["levels"] = ir::Attribute(levels);
  g->add_output(fq->output(0));
  ir::infer_shapes(*g);
  runtime::ReferenceExecutor ex(g);
  Tensor y = ex.run({x}).at(0);
  return std::vector<float>(y.data<float>(), y.data<float>() + y.size());
}

Tensor scalar(float v) { return f32_filled({}, v); }

}  // namespace

TEST(TransformsFakeQuantize, ClampsAndRoundsToLevels) {
  // 3 levels over [0, 2] mapped to [-1, 1]
  Tensor x = Tensor::from_vector<float>({-1, 0, 0.4f, 0.5f, 0.6f, 1.5f, 2, 3, 1.2f}, {9});
  auto y = run_fq(x, scalar(0), scalar(2), scalar(-1), scalar(1), 3);
  EXPECT_EQ(y, (std::vector<float>{-1, -1, -1, -1, 0, 1, 1, 1, 0}));
}

TEST(TransformsFakeQuantize, TiesRoundToEvenOnTheGridThroughZero) {
  // 256 levels over [-127, 128]: level k is the value k - 127, so a tie x = 0.5 must go to 0
  // (the even value), not to the even level index 128 (value 1)
  Tensor x = Tensor::from_vector<float>({0.5f, 1.5f, -0.5f, 2.5f, -1.5f, 127.6f, -200}, {7});
  auto y = run_fq(x, scalar(-127), scalar(128), scalar(-127), scalar(128), 256);
  EXPECT_EQ(y, (std::vector<float>{0, 2, 0, 2, -2, 128, -127}));
  // 0 is not on the grid of [-0.25, 0.75] with 2 levels: ties go to the even level index
  auto z = run_fq(Tensor::from_vector<float>({0.25f, 0.2f, 0.3f}, {3}), scalar(-0.25f), scalar(0.75f), scalar(0),
                  scalar(10), 2);
  EXPECT_EQ(z, (std::vector<float>{0, 0, 10}));
}

TEST(TransformsFakeQuantize, PerChannelRangesBroadcast) {
  Tensor x = Tensor::from_vector<float>({0.3f, 0.3f, 5, 5, -5, 1}, {1, 2, 3});
  Tensor il = Tensor::from_vector<float>({0, -1}, {2, 1});
  Tensor ih = Tensor::from_vector<float>({1, 1}, {2, 1});
  // 3 levels; channel 0 over [0, 1] -> {0, 0.5, 1}, channel 1 over [-1, 1] -> {-1, 0, 1}
  auto y = run_fq(x, il, ih, il, ih, 3);
  EXPECT_EQ(y, (std::vector<float>{0.5f, 0.5f, 1, 1, -1, 1}));
  auto nan = run_fq(Tensor::from_vector<float>({std::nanf("")}, {1}), scalar(0), scalar(1), scalar(0), scalar(1), 4);
  EXPECT_TRUE(std::isnan(nan[0]));
}

TEST(TransformsFakeQuantize, RangesMustNotGrowX) {
  try {
    run_fq(rand_f32({3}, 1), rand_f32({2, 3}, 2), scalar(1), scalar(0), scalar(1), 256);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input_low of shape [2,3] has a higher rank than X [3]"), std::string::npos)
        << e.what();
  }
}

namespace {

struct Qdq {
  std::vector<float> scale;
  std::vector<int64_t> zp;
  DType type;
  int64_t axis = -1;  // -1: per tensor
};

Tensor zp_tensor(const Qdq& q) {
  Shape s = q.axis < 0 ? Shape{} : Shape{static_cast<int64_t>(q.zp.size())};
  if (q.type == DType::u8) {
    std::vector<uint8_t> v(q.zp.begin(), q.zp.end());
    return Tensor::from_vector<uint8_t>(v, s);
  }
  std::vector<int8_t> v(q.zp.begin(), q.zp.end());
  return Tensor::from_vector<int8_t>(v, s);
}

// x -> QuantizeLinear -> DequantizeLinear -> graph output "y".
std::shared_ptr<ir::Graph> qdq_graph(const Shape& shape, const Qdq& q) {
  auto g = new_graph(13);
  ir::Value* x = g->add_input("x", f32_type(std::vector<ir::Dim>(shape.begin(), shape.end())));
  Shape ss = q.axis < 0 ? Shape{} : Shape{static_cast<int64_t>(q.scale.size())};
  ir::Value* s = g->add_constant("scale", Tensor::from_vector<float>(q.scale, ss));
  ir::Value* z = g->add_constant("zero_point", zp_tensor(q));
  ir::Node* qn = g->add_node("QuantizeLinear", {x, s, z}, 1, "q");
  ir::Node* dq = g->add_node("DequantizeLinear", {qn->output(0), s, z}, std::vector<std::string>{"y"}, "dq");
  if (q.axis >= 0) {
    qn->attrs["axis"] = ir::Attribute(q.axis);
    dq->attrs["axis"] = ir::Attribute(q.axis);
  }
  g->add_output(dq->output(0));
  ir::infer_shapes(*g);
  return g;
}

// Inputs that hit every rounding tie (k + 1/2) * scale across the range and beyond it,
// every grid point, and random values up to 20 steps outside the range.
Tensor probe_inputs(const Shape& shape, const Qdq& q, uint32_t seed) {
  Tensor t(DType::f32, shape);
  float* p = t.data<float>();
  const double qmin = q.type == DType::u8 ? 0 : -128, qmax = q.type == DType::u8 ? 255 : 127;
  int64_t inner = 1;
  if (q.axis >= 0)
    for (size_t d = static_cast<size_t>(q.axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(qmin - 20, qmax + 20);
  const int64_t span = static_cast<int64_t>(qmax - qmin) + 8;
  for (int64_t i = 0; i < t.size(); ++i) {
    const size_t c = q.axis < 0 ? 0 : static_cast<size_t>((i / inner) % static_cast<int64_t>(q.scale.size()));
    const double s = q.scale[c], zp = static_cast<double>(q.zp[c]);
    const int64_t k = i % (3 * span);
    double level;  // in quantised units before adding the zero point
    if (k < span) level = qmin - zp - 4 + static_cast<double>(k) + 0.5;  // ties
    else if (k < 2 * span) level = qmin - zp - 4 + static_cast<double>(k - span);  // grid points
    else level = u(rng) - zp;
    p[i] = static_cast<float>(level * s);
  }
  return t;
}

// Runs the pass on a Q -> DQ graph and checks structure and exact equality on the probes.
void check_exact(const Shape& shape, const Qdq& q) {
  auto g = qdq_graph(shape, q);
  auto before = g->clone();
  PassLog log;
  EXPECT_EQ(fuse_qdq_to_fake_quantize(*g, &log), 1u);
  EXPECT_EQ(g->num_nodes(), 1u);
  ir::Node* fq = g->outputs()[0]->producer();
  ASSERT_NE(fq, nullptr);
  EXPECT_EQ(fq->op_type(), "FakeQuantize");
  EXPECT_EQ(fq->domain(), "kiln");
  EXPECT_EQ(fq->attr_i("levels"), 256);
  EXPECT_EQ(output_names(*g), (std::vector<std::string>{"y"}));
  ASSERT_EQ(log.entries.size(), 1u);
  EXPECT_TRUE(log.entries[0].applied);
  EXPECT_EQ(log.entries[0].where, "q -> dq");
  expect_same_outputs(before, g, {probe_inputs(shape, q, 42)}, 0.0, 0.0);
}

}  // namespace

TEST(TransformsQdq, U8PerTensorEqualsThePairExactly) {
  check_exact({4, 600}, {{0.25f}, {128}, DType::u8});
  check_exact({4, 600}, {{0.5f}, {127}, DType::u8});  // odd zero point: tie parity matters
  check_exact({4, 600}, {{1.0f / 64}, {0}, DType::u8});
}

TEST(TransformsQdq, I8PerTensorEqualsThePairExactly) {
  check_exact({3, 700}, {{0.125f}, {0}, DType::i8});
  check_exact({3, 700}, {{2.0f}, {3}, DType::i8});
  check_exact({3, 700}, {{0.0625f}, {-20}, DType::i8});
}

TEST(TransformsQdq, U8AndI8PerChannelEqualThePairExactly) {
  check_exact({2, 3, 20, 17}, {{0.5f, 0.25f, 0.125f}, {127, 128, 0}, DType::u8, 1});
  check_exact({2, 3, 20, 17}, {{0.5f, 0.25f, 4.0f}, {3, -5, 0}, DType::i8, 1});
  check_exact({2, 40, 3}, {{1.0f, 0.5f, 0.25f}, {1, 0, -1}, DType::i8, 2});  // last axis
}

TEST(TransformsQdq, ArbitraryScalesAgreeWithinOneStepAtNearTies) {
  // Scales that are not powers of two: the pair rounds x / scale in f32, FakeQuantize works
  // from f32-rounded ranges in double; only inputs within rounding of a tie may differ, by
  // one step.
  for (const Qdq& q : {Qdq{{0.0173f}, {131}, DType::u8}, Qdq{{0.031f, 0.0077f, 0.3f}, {-7, 0, 12}, DType::i8, 1}}) {
    const Shape shape = q.axis < 0 ? Shape{4, 2000} : Shape{2, 3, 40, 50};
    auto g = qdq_graph(shape, q);
    auto before = g->clone();
    ASSERT_EQ(fuse_qdq_to_fake_quantize(*g, nullptr), 1u);
    ir::infer_shapes(*g);
    Tensor x = probe_inputs(shape, q, 7);
    auto want = runtime::ReferenceExecutor(before).run({x}).at(0).to_f64();
    auto got = runtime::ReferenceExecutor(g).run({x}).at(0).to_f64();
    const float* px = x.data<float>();
    int64_t inner = q.axis < 0 ? 1 : shape[2] * shape[3];
    const int64_t span = (q.type == DType::u8 ? 255 : 255) + 8;  // probe_inputs: ties, grid, random
    size_t off_at_ties = 0, off_elsewhere = 0, random = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      const bool tie_probe = static_cast<int64_t>(i) % (3 * span) < span;
      random += static_cast<int64_t>(i) % (3 * span) >= 2 * span;
      const double s = q.scale[q.axis < 0 ? 0 : (i / inner) % q.scale.size()];
      const double d = std::fabs(want[i] - got[i]);
      if (d <= 1e-6 * std::fabs(want[i]) + 1e-4 * s) continue;  // f32 rounding of the ranges
      ASSERT_LE(d, s * (1 + 1e-5)) << "at " << i << " x=" << px[i];
      // only near a tie: x / scale within 1e-6 of k + 1/2
      const double v = px[i] / s;
      ASSERT_LE(std::fabs(v - std::floor(v) - 0.5), 1e-5) << "at " << i << " x=" << px[i];
      ++(tie_probe ? off_at_ties : off_elsewhere);
    }
    // f32-rounded ties: about half of them go the other way; random inputs almost never
    EXPECT_LE(off_elsewhere, random / 1000) << off_elsewhere << " of " << random << " random inputs";
    std::cout << "  scale " << q.scale[0] << ": " << off_at_ties << " tie probes and " << off_elsewhere
              << " other inputs one step apart, of " << want.size() << "\n";
  }
}

TEST(TransformsQdq, WeightQdqAndSharedQuantizeAreSkipped) {
  auto g = new_graph(13);
  ir::Value* x = g->add_input("x", f32_type({1, 2, 4, 4}));
  ir::Value* s = g->add_constant("s", f32_filled({}, 0.1f));
  ir::Value* z = g->add_constant("z", Tensor::scalar<uint8_t>(10));
  // weight QDQ
  ir::Node* qw = g->add_node("QuantizeLinear", {g->add_constant("w", rand_f32({3, 2, 1, 1}, 1)), s, z}, 1, "q_w");
  ir::Node* dqw = g->add_node("DequantizeLinear", {qw->output(0), s, z}, 1, "dq_w");
  // activation QDQ whose quantised value is read twice
  ir::Node* qx = g->add_node("QuantizeLinear", {x, s, z}, 1, "q_x");
  ir::Node* dq1 = g->add_node("DequantizeLinear", {qx->output(0), s, z}, 1, "dq_1");
  ir::Node* dq2 = g->add_node("DequantizeLinear", {qx->output(0), s, z}, 1, "dq_2");
  ir::Node* conv = g->add_node("Conv", {dq1->output(0), dqw->output(0)}, 1, "conv");
  g->add_output(conv->output(0));
  g->add_output(dq2->output(0));
  ir::infer_shapes(*g);
  PassLog log;
  EXPECT_EQ(fuse_qdq_to_fake_quantize(*g, &log), 0u);
  EXPECT_EQ(count_op(*g, "QuantizeLinear"), 2u);
  auto skipped = entries(log, kQdqToFakeQuantize, false);
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_EQ(skipped[0].where, "q_w");
  EXPECT_EQ(skipped[0].message,
            "QuantizeLinear -> DequantizeLinear not converted: its input 'w' is a constant (weight QDQ is left to "
            "constant folding)");
  EXPECT_EQ(skipped[1].where, "q_x");
  EXPECT_EQ(skipped[1].message, "QuantizeLinear -> DequantizeLinear not converted: the QuantizeLinear output is read by 2 nodes");
}

TEST(TransformsQdq, DifferentDequantizeParamsBecomeOutputRanges) {
  auto g = new_graph(13);
  ir::Value* x = g->add_input("x", f32_type({2, 3, 50}));
  ir::Node* q = g->add_node("QuantizeLinear", {x, g->add_constant("sq", f32_filled({}, 0.25f)),
                                                g->add_constant("zq", Tensor::scalar<int8_t>(-3))},
                            1, "q");
  ir::Node* dq = g->add_node("DequantizeLinear",
                             {q->output(0), g->add_constant("sd", Tensor::from_vector<float>({0.5f, 1, 2}, {3})),
                              g->add_constant("zd", Tensor::from_vector<int8_t>({0, 5, -9}, {3}))},
                             1, "dq");
  ir::Node* relu = g->add_node("Relu", {dq->output(0)}, 1, "relu");
  g->add_output(relu->output(0));
  ir::infer_shapes(*g);
  auto before = g->clone();
  PassLog log;
  EXPECT_EQ(fuse_qdq_to_fake_quantize(*g, &log), 1u);
  EXPECT_EQ(relu->input(0)->producer()->op_type(), "FakeQuantize");
  expect_same_outputs(before, g, {rand_f32({2, 3, 50}, 5, -40, 40)}, 0.0, 0.0);
}

// HoistQdqAboveLayout: x -> Reshape -> Q -> DQ moves to x -> Q -> DQ -> Reshape, and a pair
// that then follows a pair with the same parameters goes; the graph computes what it did,
// exactly. A pair with other parameters moves but stays.
TEST(TransformsHoistQdq, PairsMoveAboveReshapeAndDuplicatesGo) {
  for (bool same : {true, false}) {
    auto g = new_graph(13);
    ir::Value* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{2, 12})});
    auto pair = [&](ir::Value* v, float scale, const std::string& n) {
      Tensor z(DType::u8, Shape{});
      z.data<uint8_t>()[0] = 100;
      ir::Value* s = g->add_constant(n + "_s", Tensor::scalar<float>(scale));
      ir::Value* zv = g->add_constant(n + "_z", std::move(z));
      ir::Node* q = g->add_node("QuantizeLinear", {v, s, zv}, 1, n + "_q");
      return g->add_node("DequantizeLinear", {q->output(0), s, zv}, 1, n + "_dq")->output(0);
    };
    ir::Value* a = pair(x, 0.02f, "a");
    ir::Value* r = g->add_node("Reshape", {a, g->add_constant("shape", Tensor::from_vector<int64_t>({2, 3, 4}, {3}))}, 1,
                               "reshape")->output(0);
    ir::Value* b = pair(r, same ? 0.02f : 0.03f, "b");
    g->add_output(g->add_node("Relu", {b}, 1, "relu")->output(0));
    ir::infer_shapes(*g);
    auto original = g->clone();
    PassLog log;
    EXPECT_EQ(transforms::hoist_qdq_above_layout(*g, &log), same ? 2u : 1u);
    ir::infer_shapes(*g);
    EXPECT_EQ(count_op(*g, "QuantizeLinear"), same ? 1u : 2u);
    for (const ir::Node* n : g->nodes())
      if (n->op_type() == "Reshape") {
        EXPECT_EQ(n->input(0)->producer()->op_type(), "DequantizeLinear") << "the pairs come before the Reshape";
      }
    const Tensor xv = rand_f32({2, 12}, 5, -3.0f, 3.0f);
    expect_close_same_dtype(runtime::ReferenceExecutor(original).run({xv})[0], runtime::ReferenceExecutor(g).run({xv})[0], 0, 0);
  }
}

}  // namespace test_transforms_qdq
