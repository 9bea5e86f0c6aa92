// The SqueezeExcite node (kiln's squeeze_excite_f32 kernel) against the reference executor on
// the layouts its producers give: oneDNN's channel blocks (the channel count not a multiple of
// the block: padded lanes), kiln's channels-last GEMM output, and plain (a graph input); both
// activations and gates; batch above 1 on a team of threads.
#include <gtest/gtest.h>

#include "cpu_test_util.hpp"

namespace test_cpu_squeeze_excite {

using namespace kiln;
using namespace kiln::test;

namespace {

ir::Value* squeeze_excite(ir::Graph& g, ir::Value* x, int64_t c, int64_t r, bool swish, bool hard, uint32_t seed,
                          const std::string& name) {
  if (!g.opset_imports.count("kiln")) g.opset_imports["kiln"] = 1;
  ir::Node* n = g.add_node("SqueezeExcite",
                           {x, g.add_constant(name + "_w1", random_tensor({r, c}, seed, 0.5f)),
                            g.add_constant(name + "_b1", random_tensor({r}, seed + 1, 0.2f)),
                            g.add_constant(name + "_w2", random_tensor({c, r}, seed + 2, 0.5f)),
                            g.add_constant(name + "_b2", random_tensor({c}, seed + 3, 0.2f))},
                           1, name, "kiln");
  n->attrs["activation"] = std::string(swish ? "Swish" : "Relu");
  n->attrs["gate"] = std::string(hard ? "HardSigmoid" : "Sigmoid");
  if (hard) n->attrs["gate_alpha"] = 1.0f / 6, n->attrs["gate_beta"] = 0.5f;
  return n->output(0);
}

ir::Value* conv1x1(ir::Graph& g, ir::Value* x, int64_t ci, int64_t co, uint32_t seed, const std::string& name) {
  return g.add_node("Conv", {x, g.add_constant(name + "_w", random_tensor({co, ci, 1, 1}, seed, 0.4f))}, 1, name)->output(0);
}

// The node `name` reads its input straight from the node that makes it: no Reorder between.
void expect_read_in_place(const cpu::Graph& cg, const std::string& name, const std::string& producer) {
  const cpu::Node* n = find(cg, name);
  const cpu::Node* p = find(cg, producer);
  ASSERT_NE(n, nullptr) << cg.describe();
  ASSERT_NE(p, nullptr) << cg.describe();
  EXPECT_EQ(n->inputs[0], p->outputs[0]) << n->inputs[0]->layout_name() << "\n" << cg.describe();
}

}  // namespace

TEST(CpuSqueezeExcite, OnTheConvolutionsBlockedOutputAndOnAPlainInput) {
  auto g = make_graph();
  ir::Value* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{2, 8, 9, 11})});
  ir::Value* y = g->add_input("y", {DType::f32, ir::PartialShape(Shape{3, 5, 3, 4})});
  ir::Value* c1 = conv3x3(*g, x, 8, 20, 1, "c1", 0.4f);  // oneDNN: channel blocks (20: padded lanes) or channels-last
  ir::Value* s1 = squeeze_excite(*g, c1, 20, 6, /*swish=*/false, /*hard=*/true, 5, "se1");
  g->add_output(conv3x3(*g, s1, 20, 16, 9, "c2", 0.4f));
  g->add_output(squeeze_excite(*g, y, 5, 3, /*swish=*/true, /*hard=*/false, 11, "se2"));  // plain
  auto cg = compare_with_reference(g, {random_tensor({2, 8, 9, 11}, 20, 1.0f), random_tensor({3, 5, 3, 4}, 21, 2.0f)},
                                   1e-5, 1e-5);
  EXPECT_EQ(count_type(*cg, "SqueezeExcite"), 2u);
  const std::string blocked = find(*cg, "c1")->outputs[0]->layout_name();
  // what oneDNN's convolution writes, the node reads as it is: channels-last (blocked(), AVX-512's
  // brgconv), nChw8c with 4 padded lanes (AVX2), plain (SSE4.1), nChw16c
  EXPECT_TRUE(blocked == "plain" || blocked == "blocked()" || blocked == "blocked(16@dim1)" || blocked == "blocked(8@dim1)") << blocked;
  expect_read_in_place(*cg, "se1", "c1");
  EXPECT_EQ(find(*cg, "se2")->inputs[0]->layout_name(), "plain");
}

TEST(CpuSqueezeExcite, OnKilnsChannelsLastGemmOutput) {
  // a model whose shapes vary: the 1x1 convolutions on kiln's GEMM (AVX2), channels-last
  auto g = make_graph();
  ir::Value* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{2, 8, 6, 7})});
  ir::Value* e = conv1x1(*g, x, 8, 40, 1, "expand");
  ir::Value* s = squeeze_excite(*g, e, 40, 10, /*swish=*/true, /*hard=*/false, 3, "se");
  g->add_output(conv1x1(*g, s, 40, 8, 7, "project"));
  CompareOptions opt;
  opt.shape_agnostic = true;
  opt.rtol = opt.atol = 1e-5;
  auto cg = compare_with_reference(g, {random_tensor({2, 8, 6, 7}, 30, 1.0f)}, opt);
  EXPECT_EQ(count_type(*cg, "SqueezeExcite"), 1u);
  expect_read_in_place(*cg, "se", "expand");  // channels-last (kiln's GEMM) or oneDNN's blocks (SSE4.1)
}

}  // namespace test_cpu_squeeze_excite
