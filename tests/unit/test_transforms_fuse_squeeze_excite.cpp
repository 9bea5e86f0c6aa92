// FuseSqueezeExcite: a squeeze-and-excitation block (pool, 1x1 conv, activation, 1x1 conv, gate,
// Mul by the input) becomes one kiln SqueezeExcite node computing what the block did; blocks it
// cannot take stay, with the reason in the log. And the op itself: its checks and values.
#include <gtest/gtest.h>

#include <cmath>

#include "cpu/executor.hpp"
#include "ir/op_registry.hpp"
#include "runtime/reference_executor.hpp"
#include "transforms/fuse_squeeze_excite.hpp"
#include "transforms/reduce_to_global_pooling.hpp"
#include "transforms_test_util.hpp"

namespace test_transforms_fuse_squeeze_excite {

using namespace kiln;
using namespace kiln::test;
using transforms::fuse_squeeze_excite;
using transforms::kFuseSqueezeExcite;
using transforms::PassLog;

namespace {

ir::Value* conv1x1(const std::shared_ptr<ir::Graph>& g, ir::Value* x, int64_t ci, int64_t co, uint32_t seed,
                   const std::string& name, bool bias = true) {
  std::vector<ir::Value*> in = {x, g->add_constant(name + "_w", rand_f32({co, ci, 1, 1}, seed, -0.5f, 0.5f))};
  if (bias) in.push_back(g->add_constant(name + "_b", rand_f32({co}, seed + 1, -0.2f, 0.2f)));
  return g->add_node("Conv", in, 1, name)->output(0);
}

ir::Value* op(const std::shared_ptr<ir::Graph>& g, const std::string& type, std::vector<ir::Value*> in,
              const std::string& name) {
  return g->add_node(type, std::move(in), 1, name)->output(0);
}

// The block over x [N, C, ...]: MobileNet-v3's (Relu, HardSigmoid 1/6, 1/2) or EfficientNet's
// (a written-out Swish, Sigmoid); the pool a GlobalAveragePool or, with `mean`, a ReduceMean.
ir::Value* block(const std::shared_ptr<ir::Graph>& g, ir::Value* x, int64_t c, int64_t r, bool efficientnet,
                 const std::string& p, bool mean = false, bool bias = true) {
  ir::Value* pooled;
  if (mean) {
    ir::Node* m = g->add_node("ReduceMean", {x}, 1, p + "pool");
    m->attrs["axes"] = std::vector<int64_t>{2, 3};
    pooled = m->output(0);
  } else {
    pooled = op(g, "GlobalAveragePool", {x}, p + "pool");
  }
  ir::Value* h = conv1x1(g, pooled, c, r, 1, p + "fc1", bias);
  h = efficientnet ? op(g, "Mul", {h, op(g, "Sigmoid", {h}, p + "silu_sig")}, p + "silu") : op(g, "Relu", {h}, p + "relu");
  ir::Value* s = conv1x1(g, h, r, c, 3, p + "fc2", bias);
  if (efficientnet) {
    s = op(g, "Sigmoid", {s}, p + "gate");
  } else {
    ir::Node* hs = g->add_node("HardSigmoid", {s}, 1, p + "gate");
    hs->attrs["alpha"] = 1.0f / 6;
    hs->attrs["beta"] = 0.5f;
    s = hs->output(0);
  }
  return op(g, "Mul", {s, x}, p + "scale");
}

bool log_says(const PassLog& log, bool applied, const std::string& where, const std::string& text) {
  for (const auto& e : entries(log, kFuseSqueezeExcite, applied))
    if (e.where == where && e.message.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(TransformsFuseSqueezeExcite, MobileNetV3AndEfficientNetBlocksBecomeOneNodeEach) {
  auto g = new_graph(13);
  ir::Value* x = g->add_input("x", f32_type({2, 24, 5, 7}));
  ir::Value* a = block(g, x, 24, 8, /*efficientnet=*/false, "m_");
  ir::Value* b = block(g, op(g, "Relu", {a}, "between"), 24, 6, /*efficientnet=*/true, "e_", /*mean=*/false, /*bias=*/false);
  g->add_output(b);
  ir::infer_shapes(*g);
  auto before = g->clone();
  PassLog log;
  EXPECT_EQ(fuse_squeeze_excite(*g, &log), 2u);
  g->remove_dead();
  ir::infer_shapes(*g);
  EXPECT_EQ(count_op(*g, "SqueezeExcite"), 2u);
  for (const char* gone : {"GlobalAveragePool", "Conv", "Sigmoid", "HardSigmoid", "Mul"}) EXPECT_EQ(count_op(*g, gone), 0u) << gone;
  EXPECT_EQ(count_op(*g, "Relu"), 1u);  // the one between the blocks
  EXPECT_EQ(output_names(*g), output_names(*before));
  EXPECT_TRUE(log_says(log, true, "m_scale", "24 -> 8 -> 24"));
  EXPECT_TRUE(log_says(log, true, "e_scale", "Swish"));
  expect_same_outputs(before, g, {rand_f32({2, 24, 5, 7}, 7, -3, 3)});
}

TEST(TransformsFuseSqueezeExcite, AReduceMeanPoolAfterReduceToGlobalPoolingAndSymbolicImages) {
  // the pass runs after ReduceToGlobalPooling (ir_fusion_passes): x.mean((2, 3), keepdim=True)
  // arrives as a GlobalAveragePool; the batch and image size may be symbols (the template)
  auto g = new_graph(13);
  ir::Value* x = g->add_input("x", f32_type({ir::Dim::sym("n"), 16, ir::Dim::sym("h"), ir::Dim::sym("w")}));
  g->add_output(block(g, x, 16, 4, false, "s_", /*mean=*/true));
  ir::infer_shapes(*g);
  EXPECT_EQ(fuse_squeeze_excite(*g, nullptr), 0u);  // a ReduceMean is no pool yet
  EXPECT_EQ(transforms::reduce_to_global_pooling(*g, nullptr), 1u);
  ir::infer_shapes(*g);
  EXPECT_EQ(fuse_squeeze_excite(*g, nullptr), 1u);
  g->remove_dead();
  ir::infer_shapes(*g);
  EXPECT_EQ(count_op(*g, "SqueezeExcite"), 1u);
  EXPECT_EQ(g->outputs()[0]->type.shape.to_string(), x->type.shape.to_string());
}

TEST(TransformsFuseSqueezeExcite, BlocksItCannotTakeStayWithTheReason) {
  auto g = new_graph(13);
  ir::Value* x = g->add_input("x", f32_type({1, 8, 4, 4}));
  // the pooled value also a graph output: read outside the block
  ir::Value* p = op(g, "GlobalAveragePool", {x}, "p1");
  g->add_output(p);
  g->add_output(op(g, "Mul", {op(g, "Sigmoid", {conv1x1(g, op(g, "Relu", {conv1x1(g, p, 8, 2, 1, "a1")}, "r1"), 2, 8, 2, "b1")}, "g1"), x}, "m1"));
  // the gate scales another tensor than the one pooled
  ir::Value* y = g->add_input("y", f32_type({1, 8, 4, 4}));
  ir::Value* p2 = op(g, "GlobalAveragePool", {x}, "p2");
  g->add_output(op(g, "Mul", {op(g, "Sigmoid", {conv1x1(g, op(g, "Relu", {conv1x1(g, p2, 8, 2, 3, "a2")}, "r2"), 2, 8, 4, "b2")}, "g2"), y}, "m2"));
  // a grouped first layer (its weights take 4 of the 8 channels each)
  ir::Value* p3 = op(g, "GlobalAveragePool", {x}, "p3");
  ir::Node* grouped = g->add_node("Conv", {p3, g->add_constant("a3_w", rand_f32({4, 4, 1, 1}, 5))}, 1, "a3");
  grouped->attrs["group"] = int64_t(2);
  g->add_output(op(g, "Mul", {op(g, "Sigmoid", {conv1x1(g, op(g, "Relu", {grouped->output(0)}, "r3"), 4, 8, 6, "b3")}, "g3"), x}, "m3"));
  // weights that are an input
  ir::Value* p4 = op(g, "GlobalAveragePool", {x}, "p4");
  ir::Value* w = g->add_input("w", f32_type({2, 8, 1, 1}));
  ir::Value* h4 = op(g, "Relu", {g->add_node("Conv", {p4, w}, 1, "a4")->output(0)}, "r4");
  g->add_output(op(g, "Mul", {op(g, "Sigmoid", {conv1x1(g, h4, 2, 8, 7, "b4")}, "g4"), x}, "m4"));
  ir::infer_shapes(*g);
  PassLog log;
  EXPECT_EQ(fuse_squeeze_excite(*g, &log), 0u);
  EXPECT_EQ(count_op(*g, "SqueezeExcite"), 0u);
  EXPECT_TRUE(log_says(log, false, "m3", "are not 1x1 over 8 channels"));  // [4, 4, 1, 1] in 2 groups
  EXPECT_TRUE(log_says(log, false, "m4", "not an f32 constant"));
}

TEST(SqueezeExciteOp, ComputesTheBlockAndChecksItsInputs) {
  auto g = new_graph(13);
  g->opset_imports["kiln"] = 1;
  ir::Value* x = g->add_input("x", f32_type({1, 3, 2, 2}));
  const Tensor w1 = Tensor::from_vector<float>({1, -1, 0.5f, 0.25f, 0.5f, -2}, {2, 3});
  const Tensor w2 = Tensor::from_vector<float>({1, 0, 0, 1, -1, 1}, {3, 2});
  ir::Node* se = g->add_node("SqueezeExcite",
                             {x, g->add_constant("w1", w1), g->add_constant("b1", Tensor::from_vector<float>({0.1f, -0.1f}, {2})),
                              g->add_constant("w2", w2), g->add_constant("b2", Tensor::from_vector<float>({0, 0.5f, -0.5f}, {3}))},
                             1, "se", "kiln");
  se->attrs["activation"] = std::string("Swish");
  se->attrs["gate"] = std::string("HardSigmoid");
  se->attrs["gate_alpha"] = 0.25f;
  se->attrs["gate_beta"] = 0.5f;
  g->add_output(se->output(0));
  ir::infer_shapes(*g);
  const Tensor in = rand_f32({1, 3, 2, 2}, 9, -2, 2);
  const Tensor out = runtime::ReferenceExecutor(g).run({in})[0];
  // by hand, in double
  const float* px = in.data<float>();
  double mean[3], h[2];
  for (int c = 0; c < 3; ++c) mean[c] = (px[4 * c] + px[4 * c + 1] + px[4 * c + 2] + px[4 * c + 3]) / 4.0;
  const float* a = w1.data<float>();
  const float* b = w2.data<float>();
  const double b1[2] = {0.1, -0.1}, b2[3] = {0, 0.5, -0.5};
  for (int j = 0; j < 2; ++j) {
    double v = b1[j];
    for (int c = 0; c < 3; ++c) v += a[j * 3 + c] * mean[c];
    h[j] = v / (1 + std::exp(-v));
  }
  for (int c = 0; c < 3; ++c) {
    const double v = b2[c] + b[c * 2] * h[0] + b[c * 2 + 1] * h[1];
    const double s = std::max(0.0, std::min(1.0, 0.25 * v + 0.5));
    for (int p = 0; p < 4; ++p) EXPECT_NEAR(out.data<float>()[4 * c + p], px[4 * c + p] * s, 1e-6);
  }
  // a W1 over other channels than X's, and an unknown activation
  auto bad = new_graph(13);
  bad->opset_imports["kiln"] = 1;
  ir::Value* bx = bad->add_input("x", f32_type({1, 4, 2, 2}));
  ir::Node* n = bad->add_node("SqueezeExcite",
                              {bx, bad->add_constant("w1", w1), bad->add_constant("b1", f32_filled({2}, 0)),
                               bad->add_constant("w2", w2), bad->add_constant("b2", f32_filled({3}, 0))},
                              1, "se", "kiln");
  bad->add_output(n->output(0));
  EXPECT_THROW(ir::infer_shapes(*bad), Error);
  n->attrs["activation"] = std::string("Gelu");
  EXPECT_THROW(ir::OpRegistry::instance().find("kiln", "SqueezeExcite")->validate(*n), Error);

  // weights given at run time, their sizes unknown to inference: checked when the node runs
  auto late = new_graph(13);
  late->opset_imports["kiln"] = 1;
  auto sym = [](const char* n) { return ir::Dim::sym(n); };
  std::vector<ir::Value*> late_in = {late->add_input("x", f32_type({1, 3, 2, 2})), late->add_input("w1", f32_type({sym("r"), sym("c")})),
                                late->add_input("b1", f32_type({sym("rb")})), late->add_input("w2", f32_type({sym("c2"), sym("r2")})),
                                late->add_input("b2", f32_type({sym("cb")}))};
  late->add_output(late->add_node("SqueezeExcite", late_in, 1, "late_se", "kiln")->output(0));
  ir::infer_shapes(*late);
  runtime::ReferenceExecutor ref(late);
  const Tensor x3 = rand_f32({1, 3, 2, 2}, 1);
  EXPECT_NO_THROW(ref.run({x3, w1, f32_filled({2}, 0), w2, f32_filled({3}, 0)}));
  try {
    ref.run({x3, w1, f32_filled({5}, 0), w2, f32_filled({3}, 0)});
    ADD_FAILURE() << "a B1 of 5 values for 2 outputs ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("late_se"), std::string::npos) << e.what();
  }
  // the same through the CPU executor (weights that are not constants: its reference kernel)
  cpu::Executor ex(late);
  EXPECT_NO_THROW(ex.run({x3, w1, f32_filled({2}, 0), w2, f32_filled({3}, 0)}));
  EXPECT_THROW(ex.run({x3, w1, f32_filled({5}, 0), w2, f32_filled({3}, 0)}), Error);
}

}  // namespace test_transforms_fuse_squeeze_excite
