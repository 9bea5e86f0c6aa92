// cpu::Graph FullyConnected (Gemm / MatMul with constant weights), MatMul of two
// activations, Softmax / LogSoftmax, LayerNormalization and Reduce* nodes against the
// reference executor: odd sizes, broadcasting forms, inputs arriving blocked from a
// convolution, and the cases that must stay on Reference.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <optional>
#include <random>

#include "cpu/gemm_f32.hpp"
#include "cpu/graph.hpp"
#include "ir/op_registry.hpp"
#include "runtime/reference_executor.hpp"
#include "transforms/specialize_shapes.hpp"

#include "cpu_test_util.hpp"

namespace test_cpu_fc {

using namespace kiln;
using namespace kiln::test;

namespace {

// A conv in front of x so that it reaches the node under test in a blocked layout.
ir::Value* fc_conv(ir::Graph& g, ir::Value* x, int64_t cin, int64_t cout, uint32_t seed) {
  auto* n = g.add_node("Conv", {x, g.add_constant("conv_w", random_tensor({cout, cin, 3, 3}, seed, -0.3f, 0.3f))}, 1, "conv");
  n->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  return n->output(0);
}

// The convolution's output reached the node under test in a blocked layout (when this
// CPU's convolution picks one) through a Reorder to plain.
void fc_expect_reordered_from_conv(const cpu::Graph& g, const std::string& type) {
  bool blocked = false;
  for (auto& n : g.nodes()) blocked |= std::string(n->type()) == "Convolution" && !n->outputs[0]->is_plain();
  for (auto& n : g.nodes())
    if (type == n->type()) {
      const std::string& in = n->inputs[0]->name;
      EXPECT_EQ(blocked, in.size() > 6 && in.substr(in.size() - 6) == "/plain") << g.describe();
    }
}

}  // namespace

TEST(CpuFullyConnected, GemmMatchesReference) {
  struct Case {
    int64_t M, K, N;
    bool ta, tb;
    float alpha, beta;
    std::optional<Shape> c;  // C's shape, none when absent
  };
  std::vector<Case> cases = {
      {3, 17, 33, false, false, 1.0f, 1.0f, Shape{33}},
      {5, 7, 3, false, true, 0.5f, 2.0f, Shape{1, 3}},
      {4, 33, 17, false, true, 1.0f, 1.0f, Shape{4, 17}},  // bias varies along M and N
      {4, 33, 17, false, false, 1.5f, -1.0f, Shape{4, 1}},
      {2, 9, 5, false, false, 1.0f, 0.5f, Shape{}},        // scalar C
      {6, 16, 10, false, true, 2.0f, 1.0f, std::nullopt},
      {1, 2048, 1000, false, true, 1.0f, 1.0f, Shape{1000}},  // ResNet's classifier
      {7, 5, 3, true, false, 1.0f, 1.0f, Shape{3}},           // transposed A
      {7, 5, 3, true, true, 0.25f, 1.0f, Shape{7, 3}},
  };
  uint32_t seed = 1;
  for (auto& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.M << "x" << c.K << "x" << c.N << " ta " << c.ta << " tb " << c.tb);
    auto g = make_graph(13);
    Shape as = c.ta ? Shape{c.K, c.M} : Shape{c.M, c.K};
    Shape bs = c.tb ? Shape{c.N, c.K} : Shape{c.K, c.N};
    auto* a = g->add_input("a", {DType::f32, ir::PartialShape(as)});
    std::vector<ir::Value*> ins = {a, g->add_constant("b", random_tensor(bs, seed++))};
    if (c.c) ins.push_back(g->add_constant("c", random_tensor(*c.c, seed++)));
    auto* n = g->add_node("Gemm", ins, 1, "gemm");
    n->attrs["transA"] = int64_t(c.ta);
    n->attrs["transB"] = int64_t(c.tb);
    n->attrs["alpha"] = c.alpha;
    n->attrs["beta"] = c.beta;
    g->add_output(n->output(0));
    auto cg = compare_with_reference(g, {random_tensor(as, seed++)});
    ASSERT_EQ(count_type(*cg, "FullyConnected"), 1u) << cg->describe();
    if (!c.ta) expect_jit(*cg, "FullyConnected");
  }
}

TEST(CpuFullyConnected, MatMulWithConstantWeights) {
  struct Case {
    Shape x;
    int64_t N;
  };
  std::vector<Case> cases = {{{2, 3, 17}, 33}, {{17}, 5}, {{1, 128, 64}, 48}, {{2, 2, 3, 33}, 1}, {{128, 768}, 768}};
  uint32_t seed = 10;
  for (auto& c : cases) {
    SCOPED_TRACE(shape_to_string(c.x));
    auto g = make_graph(13);
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(c.x)});
    auto* n = g->add_node("MatMul", {x, g->add_constant("w", random_tensor({c.x.back(), c.N}, seed++))}, 1, "mm");
    g->add_output(n->output(0));
    auto cg = compare_with_reference(g, {random_tensor(c.x, seed++)});
    ASSERT_EQ(count_type(*cg, "FullyConnected"), 1u) << cg->describe();
    expect_jit(*cg, "FullyConnected");
  }
}

// A MatMul's bias arrives as an Add of one value per column fused into the FullyConnected; on
// kiln's GEMM it becomes the epilogue's bias (hoist_bias), so it must be added once, before the
// ops after it, and only where it has one value per column: a scalar Add and a second Add stay
// ops. Shapes as in a model whose shapes vary (the GEMM on every CPU with AVX2), K within one
// slice and over two.
TEST(CpuFullyConnected, FusedBiasAddIsAddedOnceBeforeTheOpsAfterIt) {
  struct Case {
    const char* name;
    std::vector<Shape> adds;  // the constants added in turn after the MatMul
    bool relu;
  };
  const std::vector<Case> cases = {{"bias", {{40}}, false},
                                   {"bias [1, N], relu", {{1, 40}}, true},
                                   {"bias, second add, relu", {{40}, {40}}, true},
                                   {"scalar add, bias", {{}, {40}}, false}};
  uint32_t seed = 90;
  for (int64_t K : {int64_t{24}, int64_t{2100}})
    for (const Case& c : cases) {
      SCOPED_TRACE(cat(c.name, ", K ", K));
      auto g = make_graph(13);
      auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{13, K})});
      ir::Value* y = g->add_node("MatMul", {x, g->add_constant("w", random_tensor({K, 40}, seed++))}, 1, "mm")->output(0);
      for (size_t i = 0; i < c.adds.size(); ++i)
        y = g->add_node("Add", {y, g->add_constant(cat("b", i), random_tensor(c.adds[i], seed++))}, 1, cat("add", i))
                ->output(0);
      if (c.relu) y = g->add_node("Relu", {y}, 1, "relu")->output(0);
      g->add_output(y);
      transforms::PassLog log;
      CompareOptions opt = fusing(&log);
      opt.shape_agnostic = true;
      auto cg = compare_with_reference(g, {random_tensor({13, K}, seed++)}, opt);
      ASSERT_EQ(cg->nodes().size(), 1u) << "the Adds and the Relu fused: " << cg->describe();
      if (cpu::gemm_f32::available()) {
        EXPECT_EQ(cg->nodes()[0]->impl, cpu::gemm_f32::impl_name());
      }
    }
}

TEST(CpuFullyConnected, BlockedInputIsReorderedToPlain) {
  auto g = make_graph(13);
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 3, 5, 5})});
  auto* c = fc_conv(*g, x, 3, 17, 1);
  auto* n = g->add_node("MatMul", {c, g->add_constant("w", random_tensor({5, 7}, 2))}, 1, "mm");
  g->add_output(n->output(0));
  auto cg = compare_with_reference(g, {random_tensor({1, 3, 5, 5}, 3)});
  EXPECT_EQ(count_type(*cg, "FullyConnected"), 1u) << cg->describe();
  fc_expect_reordered_from_conv(*cg, "FullyConnected");
}

TEST(CpuMatMul, TwoActivationsWithBroadcasting) {
  std::vector<std::pair<Shape, Shape>> cases = {
      {{1, 12, 16, 8}, {1, 12, 8, 16}},  // attention scores
      {{2, 1, 5, 6}, {3, 6, 7}},          // batch broadcast both ways, rank padding
      {{5, 6}, {2, 3, 6, 7}},
      {{2, 3, 5, 6}, {1, 1, 6, 7}},
      {{6}, {2, 6, 7}},  // 1-D operands
      {{2, 5, 6}, {6}},
      {{33}, {33}},
      {{3, 17, 33}, {3, 33, 3}},
  };
  uint32_t seed = 20;
  for (auto& [as, bs] : cases) {
    SCOPED_TRACE(shape_to_string(as) + " x " + shape_to_string(bs));
    auto g = make_graph(13);
    auto* a = g->add_input("a", {DType::f32, ir::PartialShape(as)});
    auto* b = g->add_input("b", {DType::f32, ir::PartialShape(bs)});
    auto* n = g->add_node("MatMul", {a, b}, 1, "mm");
    g->add_output(n->output(0));
    auto cg = compare_with_reference(g, {random_tensor(as, seed++), random_tensor(bs, seed++)});
    ASSERT_EQ(count_type(*cg, "MatMul"), 1u) << cg->describe();
  }
  // attention shapes run on a JIT kernel
  auto g = make_graph(13);
  auto* a = g->add_input("a", {DType::f32, ir::PartialShape(Shape{1, 12, 128, 64})});
  auto* b = g->add_input("b", {DType::f32, ir::PartialShape(Shape{1, 12, 64, 128})});
  g->add_output(g->add_node("MatMul", {a, b}, 1, "mm")->output(0));
  auto cg = compare_with_reference(g, {random_tensor({1, 12, 128, 64}, 1), random_tensor({1, 12, 64, 128}, 2)});
  expect_jit(*cg, "MatMul");
  // a constant batched weight is a MatMul (not FullyConnected) node
  auto g2 = make_graph(13);
  auto* x = g2->add_input("x", {DType::f32, ir::PartialShape(Shape{3, 4, 5})});
  g2->add_output(g2->add_node("MatMul", {x, g2->add_constant("w", random_tensor({3, 5, 6}, 3))}, 1, "mm")->output(0));
  auto cg2 = compare_with_reference(g2, {random_tensor({3, 4, 5}, 4)});
  EXPECT_EQ(count_type(*cg2, "MatMul"), 1u) << cg2->describe();
}

TEST(CpuSoftmax, MatchesReference) {
  struct Case {
    std::string op;
    int opset;
    Shape x;
    int64_t axis;
    bool taken;
  };
  std::vector<Case> cases = {
      {"Softmax", 13, {3, 17, 5}, -1, true},     {"Softmax", 13, {3, 17, 5}, 1, true},
      {"LogSoftmax", 13, {3, 17, 5}, 0, true},   {"LogSoftmax", 13, {4, 33}, -1, true},
      {"Softmax", 13, {1, 12, 128, 128}, 3, true},
      {"Softmax", 11, {4, 1, 7}, 1, true},        // coerced 2-D == last axis
      {"LogSoftmax", 11, {4, 33}, 1, true},
      {"Softmax", 11, {4, 3, 7}, 1, false},       // coerced over 3*7: stays on Reference
      {"Softmax", 11, {4, 3, 7}, 3, false},
  };
  uint32_t seed = 30;
  for (auto& c : cases) {
    SCOPED_TRACE(c.op + " opset " + std::to_string(c.opset) + " " + shape_to_string(c.x) + " axis " +
                 std::to_string(c.axis));
    auto g = make_graph(c.opset);
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(c.x)});
    auto* n = g->add_node(c.op, {x}, 1, "sm");
    n->attrs["axis"] = c.axis;
    g->add_output(n->output(0));
    auto cg = compare_with_reference(g, {random_tensor(c.x, seed++, -5.0f, 5.0f)}, 1e-4, 1e-5);
    ASSERT_EQ(count_type(*cg, "Softmax"), c.taken ? 1u : 0u) << cg->describe();
    if (c.taken && c.axis == -1) expect_jit(*cg, "Softmax");
  }
  // after a convolution (blocked), along channels
  auto g = make_graph(13);
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 3, 6, 6})});
  auto* n = g->add_node("Softmax", {fc_conv(*g, x, 3, 17, 5)}, 1, "sm");
  n->attrs["axis"] = int64_t(1);
  g->add_output(n->output(0));
  auto cg = compare_with_reference(g, {random_tensor({1, 3, 6, 6}, 6)}, 1e-4, 1e-5);
  EXPECT_EQ(count_type(*cg, "Softmax"), 1u) << cg->describe();
  fc_expect_reordered_from_conv(*cg, "Softmax");
}

TEST(CpuLayerNorm, MatchesReference) {
  struct Case {
    Shape x;
    int64_t axis;
    Shape scale;
    std::optional<Shape> bias;
  };
  std::vector<Case> cases = {
      {{2, 5, 33}, -1, {33}, Shape{33}},
      {{1, 128, 768}, 2, {768}, Shape{768}},
      {{2, 5, 33}, 1, {5, 33}, Shape{5, 33}},
      {{2, 5, 17}, 1, {17}, std::nullopt},  // Scale broadcast over the normalized [5, 17]
      {{3, 17}, 0, {3, 17}, Shape{1, 17}},
  };
  uint32_t seed = 40;
  for (auto& c : cases) {
    SCOPED_TRACE(shape_to_string(c.x) + " axis " + std::to_string(c.axis));
    auto g = make_graph(17);
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(c.x)});
    std::vector<ir::Value*> ins = {x, g->add_constant("scale", random_tensor(c.scale, seed++, 0.5f, 1.5f))};
    if (c.bias) ins.push_back(g->add_constant("bias", random_tensor(*c.bias, seed++)));
    auto* n = g->add_node("LayerNormalization", ins, 1, "ln");
    n->attrs["axis"] = c.axis;
    n->attrs["epsilon"] = 1e-3f;
    g->add_output(n->output(0));
    auto cg = compare_with_reference(g, {random_tensor(c.x, seed++, -2.0f, 3.0f)});
    ASSERT_EQ(count_type(*cg, "LayerNorm"), 1u) << cg->describe();
    expect_jit(*cg, "LayerNorm");
  }
  // Mean / InvStdDev requested too
  for (size_t outs : {2u, 3u}) {
    auto g = make_graph(17);
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{2, 3, 17})});
    auto* n = g->add_node("LayerNormalization", {x, g->add_constant("s", random_tensor({3, 17}, 1))}, outs, "ln");
    n->attrs["axis"] = int64_t(-2);
    for (size_t i = 0; i < outs; ++i) g->add_output(n->output(i));
    auto cg = compare_with_reference(g, {random_tensor({2, 3, 17}, 2, -1.0f, 4.0f)});
    EXPECT_EQ(count_type(*cg, "LayerNorm"), 1u);
  }
  // stash_type other than f32: Reference
  auto g = make_graph(17);
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{2, 5})});
  auto* n = g->add_node("LayerNormalization", {x, g->add_constant("s", random_tensor({5}, 1))}, 1, "ln");
  n->attrs["stash_type"] = int64_t(11);
  g->add_output(n->output(0));
  auto cg = compare_with_reference(g, {random_tensor({2, 5}, 2)});
  EXPECT_EQ(count_type(*cg, "LayerNorm"), 0u);
}

TEST(CpuReduce, MatchesReference) {
  struct Case {
    std::string op;
    Shape x;
    std::vector<int64_t> axes;
    bool keepdims;
  };
  std::vector<Case> cases = {
      {"ReduceMean", {1, 128, 768}, {-1}, true},  // BERT's decomposed LayerNorm
      {"ReduceSum", {3, 17, 5}, {1}, true},       {"ReduceSum", {3, 17, 5}, {}, false},
      {"ReduceMean", {2, 33, 7, 7}, {2, 3}, true}, {"ReduceMax", {3, 17, 5}, {0, 2}, false},
      {"ReduceMin", {3, 17, 5}, {-2}, true},       {"ReduceProd", {3, 4, 5}, {2}, false},
      {"ReduceL1", {3, 17, 5}, {1}, true},         {"ReduceL2", {3, 17, 5}, {0, 1}, false},
      {"ReduceSumSquare", {3, 17, 5}, {2}, true},  {"ReduceMean", {4, 1, 6}, {1, 2}, false},
  };
  uint32_t seed = 50;
  for (int opset : {13, 18}) {
    for (auto& c : cases) {
      SCOPED_TRACE(c.op + " opset " + std::to_string(opset) + " " + shape_to_string(c.x));
      auto g = make_graph(opset);
      auto* x = g->add_input("x", {DType::f32, ir::PartialShape(c.x)});
      const bool axes_input = opset >= 18 || c.op == "ReduceSum";
      std::vector<ir::Value*> ins = {x};
      if (axes_input && !c.axes.empty())
        ins.push_back(g->add_constant("axes", Tensor::from_vector<int64_t>(c.axes, {static_cast<int64_t>(c.axes.size())})));
      auto* n = g->add_node(c.op, ins, 1, "r");
      if (!axes_input && !c.axes.empty()) n->attrs["axes"] = c.axes;
      n->attrs["keepdims"] = int64_t(c.keepdims);
      g->add_output(n->output(0));
      const float lo = c.op == "ReduceProd" ? 0.5f : -2.0f, hi = c.op == "ReduceProd" ? 1.5f : 2.0f;
      auto cg = compare_with_reference(g, {random_tensor(c.x, seed++, lo, hi)});
      ASSERT_EQ(count_type(*cg, "Reduce"), 1u) << cg->describe();
    }
  }
  // last-axis ReduceMean is a JIT kernel
  {
    auto g = make_graph(13);
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 128, 768})});
    auto* n = g->add_node("ReduceMean", {x}, 1, "r");
    n->attrs["axes"] = std::vector<int64_t>{-1};
    g->add_output(n->output(0));
    auto cg = compare_with_reference(g, {random_tensor({1, 128, 768}, 1)});
    expect_jit(*cg, "Reduce");
  }
  // a run of adjacent dims with dims after it: kiln's strided loop (oneDNN has only its reference kernel there)
  struct Middle {
    std::string op;
    Shape x;
    std::vector<int64_t> axes;
    bool strided;
  };
  for (const Middle& c : std::vector<Middle>{{"ReduceMean", {1, 256, 3, 200}, {2}, true},  // a recogniser's height
                                             {"ReduceMax", {2, 4, 3, 1, 5, 6}, {2, 3, 4}, true},
                                             {"ReduceMin", {5, 3, 1200}, {1}, true},  // rows in chunks
                                             {"ReduceSum", {3, 17, 5, 2}, {1, 2}, true},
                                             {"ReduceSum", {3, 17, 5}, {0, 2}, false},  // two runs
                                             {"ReduceMean", {3, 17, 5}, {2}, false}}) {  // innermost
    SCOPED_TRACE(c.op + " " + shape_to_string(c.x));
    auto g = make_graph(13);
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(c.x)});
    auto* n = g->add_node(c.op, {x}, 1, "r");
    n->attrs["axes"] = c.axes;
    n->attrs["keepdims"] = int64_t(0);
    g->add_output(n->output(0));
    Tensor in = random_tensor(c.x, 9);
    if (c.op == "ReduceMax") in.data<float>()[7] = std::nanf("");  // NaN wins
    CompareOptions opt;
    opt.match_nonfinite = true;
    auto cg = compare_with_reference(g, {in}, opt);
    ASSERT_EQ(count_type(*cg, "Reduce"), 1u);
    EXPECT_EQ(find(*cg, "r")->impl == "kiln:strided", c.strided) << find(*cg, "r")->impl;
  }
  // stays on Reference: LogSumExp, noop with empty axes, reducing only unit dims
  auto reference_case = [&](const std::string& op, Shape s, std::vector<int64_t> axes, bool noop) {
    auto g = make_graph(18);
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(s)});
    std::vector<ir::Value*> ins = {x};
    if (!axes.empty())
      ins.push_back(g->add_constant("axes", Tensor::from_vector<int64_t>(axes, {static_cast<int64_t>(axes.size())})));
    auto* n = g->add_node(op, ins, 1, "r");
    n->attrs["noop_with_empty_axes"] = int64_t(noop);
    g->add_output(n->output(0));
    auto cg = compare_with_reference(g, {random_tensor(s, 7)});
    EXPECT_EQ(count_type(*cg, "Reduce"), 0u) << op;
  };
  reference_case("ReduceLogSumExp", {3, 4}, {1}, false);
  reference_case("ReduceSum", {3, 4}, {}, true);
  reference_case("ReduceMax", {3, 1, 4}, {1}, false);
  // after a convolution (blocked): global mean over H, W
  auto g = make_graph(13);
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 3, 6, 6})});
  auto* n = g->add_node("ReduceMean", {fc_conv(*g, x, 3, 17, 8)}, 1, "r");
  n->attrs["axes"] = std::vector<int64_t>{2, 3};
  g->add_output(n->output(0));
  auto cg = compare_with_reference(g, {random_tensor({1, 3, 6, 6}, 9)});
  EXPECT_EQ(count_type(*cg, "Reduce"), 1u) << cg->describe();
  fc_expect_reordered_from_conv(*cg, "Reduce");
}

}  // namespace test_cpu_fc
