// The InstanceNorm node (kiln's instance_norm_f32) against the reference kernel: 3-D to 5-D
// inputs, rows shared by the team, written over a dead input, values far from zero with a
// small spread (the two-pass variance), PyTorch's GroupNorm export over a stream of lengths;
// and the forms that keep the reference kernel.
#include <gtest/gtest.h>

#include "cpu/graph.hpp"
#include "ir/op_registry.hpp"

#include "cpu_test_util.hpp"

namespace test_cpu_instance_norm {

using namespace kiln;
using namespace kiln::test;

namespace {

// x -> Relu -> InstanceNormalization(scale, B) -> Neg: the norm may write over Relu's output
std::shared_ptr<ir::Graph> norm_graph(const ir::PartialShape& x, int64_t C, float eps = 1e-5f, bool constant = true) {
  auto g = make_graph(13);
  auto* in = g->add_input("x", {DType::f32, x});
  auto* r = g->add_node("Relu", {in}, 1, "relu")->output(0);
  ir::Value* scale = constant ? g->add_constant("scale", random_tensor({C}, 2, 1.5f))
                              : g->add_input("scale", {DType::f32, ir::PartialShape(Shape{C})});
  auto* n = g->add_node("InstanceNormalization", {r, scale, g->add_constant("B", random_tensor({C}, 3))}, 1, "norm");
  n->attrs["epsilon"] = eps;
  g->add_output(g->add_node("Neg", {n->output(0)}, 1, "neg")->output(0));
  return g;
}

}  // namespace

TEST(CpuInstanceNorm, MatchesTheReference) {
  struct Case {
    Shape x;
    float eps;
  };
  const std::vector<Case> cases = {
      {{2, 3, 5, 7}, 1e-5f},       // one thread (few rows)
      {{1, 4, 1000}, 1e-3f},       // 1-D, rows of 1000 (a 15-element tail of the 16 lanes)
      {{2, 8, 40, 50}, 1e-5f},     // the rows shared by the team
      {{1, 2, 3, 4, 5}, 1e-5f},    // 3-D spatial
      {{3, 1, 1, 1}, 1e-5f},       // rows of one: the output is B
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_to_string(c.x));
    auto g = norm_graph(ir::PartialShape(c.x), c.x[1], c.eps);
    auto cg = compare_with_reference(g, {random_tensor(c.x, 5)}, 1e-4, 1e-5);
    EXPECT_EQ(count_type(*cg, "InstanceNorm"), 1u);
    EXPECT_EQ(count_type(*cg, "Reference"), 0u);
  }
  // written over Relu's output, which nothing reads afterwards
  auto cg = compare_with_reference(norm_graph(ir::PartialShape(Shape{2, 8, 40, 50}), 8), {random_tensor({2, 8, 40, 50}, 6)});
  EXPECT_GE(cg->in_place_nodes(), 1u) << cg->describe();
}

TEST(CpuInstanceNorm, ValuesFarFromZeroWithASmallSpread) {
  // 1000 + u, u in [-0.01, 0.01): a one-pass variance (E[x^2] - mean^2) in floats loses every digit
  const Shape xs{1, 2, 30000};
  Tensor x = random_tensor(xs, 7, 0.01f);
  for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] += 1000.0f;
  auto g = make_graph(13);
  auto* in = g->add_input("x", {DType::f32, ir::PartialShape(xs)});
  auto* n = g->add_node("InstanceNormalization", {in, g->add_constant("scale", random_tensor({2}, 2, 1.5f)),
                                                  g->add_constant("B", random_tensor({2}, 3))}, 1, "norm");
  g->add_output(n->output(0));
  auto cg = compare_with_reference(g, {x}, 1e-3, 1e-3);
  EXPECT_EQ(count_type(*cg, "InstanceNorm"), 1u);
}

TEST(CpuInstanceNorm, PyTorchsGroupNormAtSeveralLengths) {
  // GroupNorm(4 groups of 8 channels) as PyTorch exports it (wav2vec2's feature extractor takes
  // one after its first convolution), at several lengths and batches: Reshape [N, 4, -1] -> InstanceNormalization -> Reshape back -> Mul -> Add
  auto g = make_graph(13);
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(std::vector<ir::Dim>{ir::Dim::sym("n"), 8, ir::Dim::sym("T")})});
  auto* grouped = g->add_node("Reshape", {x, g->add_constant("g", Tensor::from_vector<int64_t>({0, 4, -1}, {3}))}, 1,
                              "group")->output(0);
  auto* n = g->add_node("InstanceNormalization", {grouped, g->add_constant("ones", Tensor::from_vector<float>(std::vector<float>(4, 1.0f), {4})),
                                                  g->add_constant("zeros", Tensor::from_vector<float>(std::vector<float>(4, 0.0f), {4}))},
                        1, "norm");
  auto* back = g->add_node("Reshape", {n->output(0), g->add_node("Shape", {x}, 1, "shape")->output(0)}, 1, "back")->output(0);
  auto* w = g->add_node("Mul", {back, g->add_constant("w", random_tensor({8, 1}, 4))}, 1, "weight")->output(0);
  g->add_output(g->add_node("Add", {w, g->add_constant("b", random_tensor({8, 1}, 5))}, 1, "bias")->output(0));
  ir::infer_shapes(*g);
  for (const Shape& s : std::vector<Shape>{{1, 8, 1600}, {2, 8, 3999}, {1, 8, 7}, {3, 8, 250}}) {
    SCOPED_TRACE(shape_to_string(s));
    auto cg = compare_with_reference(g, {random_tensor(s, 8)}, 1e-4, 1e-5);
    EXPECT_EQ(count_type(*cg, "InstanceNorm"), 1u);
  }
}

TEST(CpuInstanceNorm, OtherFormsKeepTheReferenceKernel) {
  // a scale computed at run time (a graph input here)
  auto g = norm_graph(ir::PartialShape(Shape{1, 3, 4, 4}), 3, 1e-5f, /*constant=*/false);
  auto cg = compare_with_reference(g, {random_tensor({1, 3, 4, 4}, 1), random_tensor({3}, 2)}, 1e-4, 1e-5);
  EXPECT_EQ(count_type(*cg, "InstanceNorm"), 0u);
  EXPECT_EQ(count_type(*cg, "Reference"), 1u);
}

}  // namespace test_cpu_instance_norm
