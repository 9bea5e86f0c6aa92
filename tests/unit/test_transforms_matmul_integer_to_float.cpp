// FuseMatMulIntegerToFloat: a dynamically quantized projection (DynamicQuantizeLinear ->
// MatMulInteger -> Cast -> Mul(a_scale * b_scale) [-> Add(bias)], as ONNX Runtime's and kiln's
// dynamic quantizers write it) becomes one MatMulIntegerToFloat with the same results; forms
// it does not take stay as they are, with the reason logged. Then the fused node on the CPU
// against the reference executor, exactly.
#include <gtest/gtest.h>

#include <random>

#include "cpu/executor.hpp"
#include "cpu_test_util.hpp"
#include "transforms/fuse_matmul_integer_to_float.hpp"
#include "transforms_test_util.hpp"

namespace test_transforms_matmul_integer_to_float {

using namespace kiln;
using namespace kiln::test;
using transforms::fuse_matmul_integer_to_float;
using transforms::kFuseMatMulIntegerToFloat;
using transforms::PassLog;

namespace {

Tensor random_s8(Shape s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-128, 127);
  Tensor t(DType::i8, std::move(s));
  for (int64_t i = 0; i < t.size(); ++i) t.data<int8_t>()[i] = static_cast<int8_t>(d(rng));
  return t;
}

struct Projection {
  ir::Node* matmul = nullptr;
  ir::Node* cast = nullptr;
  ir::Value* y = nullptr;  // the float result (after the bias Add when there is one)
};

// DynamicQuantizeLinear(x) -> MatMulInteger(xq, B [K, N] s8, x_zp) -> Cast -> Mul(_, x_scale *
// b_scale) [-> Add(bias [N])], b_scale per column when `per_column`.
Projection projection(const std::shared_ptr<ir::Graph>& g, ir::Value* x, int64_t K, int64_t N, bool per_column,
                      bool bias, const std::string& p, uint32_t seed) {
  ir::Node* dq = g->add_node("DynamicQuantizeLinear", {x}, {p + "_xq", p + "_xs", p + "_xzp"}, p + "_dq");
  Projection r;
  r.matmul = g->add_node("MatMulInteger", {dq->output(0), g->add_constant(p + "_b", random_s8({K, N}, seed)), dq->output(2)},
                         {p + "_acc"}, p + "_mmi");
  r.cast = g->add_node("Cast", {r.matmul->output(0)}, {p + "_accf"}, p + "_cast");
  r.cast->attrs["to"] = int64_t(1);
  ir::Value* bs = g->add_constant(p + "_bs", per_column ? rand_f32({N}, seed + 1, 0.001f, 0.01f)
                                                        : Tensor::scalar<float>(0.0042f));
  ir::Node* scales = g->add_node("Mul", {dq->output(1), bs}, {p + "_scales"}, p + "_scales_mul");
  ir::Node* mul = g->add_node("Mul", {r.cast->output(0), scales->output(0)}, {p + "_scaled"}, p + "_mul");
  r.y = mul->output(0);
  if (bias) r.y = g->add_node("Add", {g->add_constant(p + "_bias", rand_f32({N}, seed + 2)), r.y}, {p + "_y"}, p + "_add")->output(0);
  return r;
}

bool log_has_skip(const PassLog& log, const std::string& where, const std::string& text) {
  for (const auto& e : entries(log, kFuseMatMulIntegerToFloat, false))
    if (e.where == where && e.message.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(TransformsMatMulIntegerToFloat, DynamicProjectionsBecomeOneNodeWithTheSameResults) {
  auto g = new_graph(13);
  ir::Value* x = g->add_input("x", f32_type({2, 5, 24}));
  Projection a = projection(g, x, 24, 19, /*per_column=*/true, /*bias=*/true, "a", 1);
  Projection b = projection(g, x, 24, 8, /*per_column=*/false, /*bias=*/false, "b", 11);
  g->add_output(a.y);
  g->add_output(b.y);
  ir::infer_shapes(*g);
  auto before = g->clone();
  PassLog log;
  EXPECT_EQ(fuse_matmul_integer_to_float(*g, &log), 2u);
  g->remove_dead();
  EXPECT_EQ(count_op(*g, "MatMulIntegerToFloat"), 2u);
  for (const char* gone : {"MatMulInteger", "Cast", "Mul", "Add"}) EXPECT_EQ(count_op(*g, gone), 0u) << gone;
  EXPECT_EQ(output_names(*g), output_names(*before));
  expect_same_outputs(before, g, {rand_f32({2, 5, 24}, 3, -3, 3)}, 0.0, 0.0);
}

TEST(TransformsMatMulIntegerToFloat, FormsItDoesNotTakeStay) {
  auto g = new_graph(13);
  ir::Value* x = g->add_input("x", f32_type({4, 16}));
  Projection shared = projection(g, x, 16, 8, false, false, "shared", 21);  // the int32 result read twice
  g->add_output(shared.matmul->output(0));
  // a scale that is no product a_scale * b_scale (the node takes two scale operands)
  ir::Node* dq = g->add_node("DynamicQuantizeLinear", {x}, {"xq", "xs", "xzp"}, "dq");
  ir::Node* mmi = g->add_node("MatMulInteger", {dq->output(0), g->add_constant("b", random_s8({16, 8}, 31)), dq->output(2)},
                              {"acc"}, "plain_mmi");
  ir::Node* cast = g->add_node("Cast", {mmi->output(0)}, {"accf"}, "plain_cast");
  cast->attrs["to"] = int64_t(1);
  ir::Node* mul = g->add_node("Mul", {cast->output(0), dq->output(1)}, {"scaled"}, "plain_mul");
  g->add_output(shared.y);
  g->add_output(mul->output(0));
  ir::infer_shapes(*g);
  PassLog log;
  EXPECT_EQ(fuse_matmul_integer_to_float(*g, &log), 0u);
  EXPECT_EQ(count_op(*g, "MatMulInteger"), 2u);
  EXPECT_TRUE(log_has_skip(log, "shared_mmi", "not read by one Cast to float alone"));
  EXPECT_TRUE(log_has_skip(log, "plain_mmi", "plain_mul does not scale by a product a_scale * b_scale"));
}

// Through the CPU plugin's pipeline: the fused node (kiln's 16-bit GEMM without VNNI, oneDNN's
// int8 matmul with it) scales as it stores, bit for bit the reference's Cast, Mul and Add.
TEST(TransformsMatMulIntegerToFloat, FusedOnTheCpuEqualsTheReference) {
  auto g = make_graph(13);
  ir::Value* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{3, 7, 37})});
  g->add_output(projection(g, x, 37, 40, true, true, "p", 41).y);
  ir::infer_shapes(*g);
  cpu::GraphOptions options;  // f32
  cpu::Executor ex(g, options);
  const auto& plan = ex.plan_for({Shape{3, 7, 37}});
  ASSERT_TRUE(plan.cpu) << plan.fallback_reason;
  EXPECT_EQ(plan.log.count_applied(kFuseMatMulIntegerToFloat), 1u);
  std::map<std::string, size_t> types;
  for (const auto& n : plan.cpu->nodes()) types[n->type()]++;
  EXPECT_EQ(types["MatMulIntegerToFloat"], 1u);
  EXPECT_EQ(types["Cast"], 0u);
  EXPECT_EQ(types["Reference"], 0u);
  runtime::ReferenceExecutor ref(g);
  for (uint32_t seed : {42u, 43u}) {
    const Tensor in = rand_f32({3, 7, 37}, seed, -2, 5);
    expect_close_same_dtype(ref.run({in})[0], ex.run({in})[0], 0.0, 0.0);
  }
}

}  // namespace test_transforms_matmul_integer_to_float
