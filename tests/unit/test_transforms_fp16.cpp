// ComputeFp16InF32: a model stored in fp16 (as float16 converters write it) computes in f32 on
// the fast path, keeps its fp16 inputs and outputs, and gives what the fp16 graph gives to fp16
// rounding; graphs it cannot rewrite are left alone with the reason logged.
#include <gtest/gtest.h>

#include "cpu/executor.hpp"
#include "transforms/compute_fp16_in_f32.hpp"
#include "transforms/remove_identity_ops.hpp"
#include "transforms_test_util.hpp"

namespace test_transforms_fp16 {

using namespace kiln;
using namespace kiln::test;
using transforms::compute_fp16_in_f32;
using transforms::kComputeFp16InF32;
using transforms::PassLog;

namespace {

constexpr int64_t kFloat = 1, kFloat16 = 10;  // ONNX data type codes

Tensor f16_of(const Tensor& f32) {
  Tensor t(DType::f16, f32.shape());
  for (int64_t i = 0; i < f32.size(); ++i) t.data<float16>()[i] = float16(f32.data<float>()[i]);
  return t;
}

ir::Node* cast(ir::Graph& g, ir::Value* x, int64_t to, const std::string& name) {
  ir::Node* n = g.add_node("Cast", {x}, 1, name);
  n->attrs["to"] = ir::Attribute(to);
  return n;
}

size_t count_dtype(const ir::Graph& g, DType t) {
  size_t n = 0;
  for (const ir::Node* node : g.nodes()) {
    for (const ir::Value* v : node->outputs()) n += v && v->type.dtype == t;
    for (const ir::Value* v : node->inputs()) n += v && v->is_constant() && v->type.dtype == t;
  }
  return n;
}

// The float16 converter's form: x (f32) -> Cast fp16 -> Conv (fp16 weights) -> Relu -> MaxPool
// -> Cast f32 -> Resize kept in f32 -> Cast fp16 -> Add (fp16 constant) -> Cast f32 -> y (f32),
// and a second output 'z' left in fp16.
std::shared_ptr<ir::Graph> converted_model() {
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({1, 3, 8, 8}));
  ir::Node* in16 = cast(*g, x, kFloat16, "graph_input_cast_0");
  ir::Node* conv = g->add_node("Conv", {in16->output(0), g->add_constant("w", f16_of(rand_f32({4, 3, 3, 3}, 2))),
                                        g->add_constant("b", f16_of(rand_f32({4}, 3)))}, 1, "conv");
  conv->attrs["pads"] = ir::Attribute(std::vector<int64_t>{1, 1, 1, 1});
  ir::Node* relu = g->add_node("Relu", {conv->output(0)}, 1, "relu");
  ir::Node* pool = g->add_node("MaxPool", {relu->output(0)}, 1, "pool");
  pool->attrs["kernel_shape"] = ir::Attribute(std::vector<int64_t>{2, 2});
  pool->attrs["strides"] = ir::Attribute(std::vector<int64_t>{2, 2});
  ir::Node* up32 = cast(*g, pool->output(0), kFloat, "resize_input_cast");
  ir::Node* resize = g->add_node("Resize", {up32->output(0), nullptr, g->add_constant("scales", Tensor::from_vector<float>({1, 1, 2, 2}, {4}))},
                                 1, "resize");
  ir::Node* down16 = cast(*g, resize->output(0), kFloat16, "resize_output_cast");
  ir::Node* add = g->add_node("Add", {down16->output(0), g->add_constant("c", f16_of(rand_f32({4, 1, 1}, 4)))}, 1, "add");
  ir::Node* out32 = g->add_node("Cast", {add->output(0)}, {"y"}, "graph_output_cast_0");
  out32->attrs["to"] = ir::Attribute(kFloat);
  g->add_output(out32->output(0));
  ir::Node* sig = g->add_node("Sigmoid", {add->output(0)}, {"z"}, "sigmoid");
  g->add_output(sig->output(0));
  ir::infer_shapes(*g);
  return g;
}

}  // namespace

TEST(TransformsFp16, ConvertedModelComputesInF32AndKeepsItsInterface) {
  auto g = converted_model();
  auto before = g->clone();
  ASSERT_GT(count_dtype(*g, DType::f16), 0u);

  PassLog log;
  EXPECT_GT(compute_fp16_in_f32(*g, &log), 0u);
  EXPECT_EQ(log.count_applied(kComputeFp16InF32), 1u);
  transforms::remove_identity_ops(*g, &log);
  g->remove_dead();
  ir::infer_shapes(*g);

  // the interface: same names, same types
  EXPECT_EQ(output_names(*g), (std::vector<std::string>{"y", "z"}));
  EXPECT_EQ(g->outputs()[0]->type.dtype, DType::f32);
  EXPECT_EQ(g->outputs()[1]->type.dtype, DType::f16);
  // inside: the only fp16 value left is z, made by the one Cast the pass added
  EXPECT_EQ(count_dtype(*g, DType::f16), 1u);
  EXPECT_EQ(g->outputs()[1]->producer()->op_type(), "Cast");
  EXPECT_EQ(count_op(*g, "Cast"), 1u) << "the Cast pairs around Resize and the interface are identities now";
  EXPECT_EQ(count_op(*g, "Conv"), 1u);

  // what the fp16 graph computes, to fp16 rounding (each fp16 op rounds its result there)
  expect_same_outputs(before, g, {rand_f32({1, 3, 8, 8}, 1, -2, 2)}, 4e-3, 4e-3);
}

TEST(TransformsFp16, Fp16InputsStayFp16) {
  auto g = new_graph();
  ir::Value* x = g->add_input("x", {DType::f16, ir::PartialShape(Shape{2, 5})});
  ir::Node* mul = g->add_node("Mul", {x, g->add_constant("k", f16_of(rand_f32({5}, 7)))}, {"y"}, "mul");
  g->add_output(mul->output(0));
  ir::infer_shapes(*g);
  auto before = g->clone();
  EXPECT_GT(compute_fp16_in_f32(*g, nullptr), 0u);
  EXPECT_EQ(g->inputs()[0]->type.dtype, DType::f16);
  EXPECT_EQ(g->outputs()[0]->type.dtype, DType::f16);
  EXPECT_EQ(g->outputs()[0]->name(), "y");
  // the Mul (rebuilt under a new output name) computes in f32; a Cast makes the fp16 'y'
  const ir::Node* cast = g->outputs()[0]->producer();
  ASSERT_EQ(cast->op_type(), "Cast");
  EXPECT_EQ(cast->input(0)->type.dtype, DType::f32);
  EXPECT_EQ(cast->input(0)->producer()->op_type(), "Mul");
  expect_same_outputs(before, g, {f16_of(rand_f32({2, 5}, 8))}, 2e-3, 1e-3);
}

TEST(TransformsFp16, ControlFlowBodiesAndF32GraphsAreLeftAlone) {
  auto g = converted_model();
  ir::Node* relu = g->find_node("relu");
  auto body = new_graph();
  body->add_output(body->add_constant("t", f16_of(rand_f32({1}, 9))));
  ir::Node* iff = g->add_node("If", {g->add_constant("cond", Tensor::scalar<bool>(true))}, 1, "if");
  iff->attrs["then_branch"] = ir::Attribute(body);
  iff->attrs["else_branch"] = ir::Attribute(body);
  (void)relu;
  PassLog log;
  EXPECT_EQ(compute_fp16_in_f32(*g, &log), 0u);
  auto skipped = entries(log, kComputeFp16InF32, false);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].message.find("'if'"), std::string::npos) << skipped[0].message;
  EXPECT_GT(count_dtype(*g, DType::f16), 0u);

  auto f32 = new_graph();
  ir::Value* x = f32->add_input("x", f32_type({3}));
  f32->add_output(f32->add_node("Relu", {x}, 1, "relu")->output(0));
  PassLog quiet;
  EXPECT_EQ(compute_fp16_in_f32(*f32, &quiet), 0u);
  EXPECT_TRUE(quiet.entries.empty()) << "nothing to say about a graph without fp16";
}

TEST(TransformsFp16, ExecutorRunsTheConvertedModelOnTheFastPath) {
  auto g = converted_model();
  cpu::GraphOptions options;  // f32
  cpu::Executor ex(g, options);
  const auto& plan = ex.plan_for({Shape{1, 3, 8, 8}});
  ASSERT_TRUE(plan.cpu) << plan.fallback_reason;
  EXPECT_EQ(plan.log.count_applied(kComputeFp16InF32), 1u);
  for (const auto& n : plan.cpu->nodes()) {  // but the Cast that makes the fp16 output
    if (n->source && n->source->op_type() == "Cast") continue;
    EXPECT_NE(n->kind(), cpu::NodeKind::Reference) << n->name << " runs on a reference kernel (" << n->impl << ")";
  }
  const Tensor x = rand_f32({1, 3, 8, 8}, 11, -2, 2);
  runtime::ReferenceExecutor ref(g);
  const auto want = ref.run({x});
  const auto got = ex.run({x});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].dtype(), DType::f16);
  for (size_t i = 0; i < 2; ++i) expect_close_same_dtype(want[i], got[i], 4e-3, 4e-3);

  cpu::GraphOptions off;
  off.disabled_passes.insert(kComputeFp16InF32);
  cpu::Executor literal(g, off);
  EXPECT_EQ(literal.plan_for({Shape{1, 3, 8, 8}}).log.count_applied(kComputeFp16InF32), 0u);
}

}  // namespace test_transforms_fp16
