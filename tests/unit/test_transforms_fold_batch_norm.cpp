// FoldBatchNormalization: an inference BatchNormalization after Conv / ConvTranspose / Gemm /
// MatMul goes into the producer's weights and bias; the result matches the unfolded graph.
#include <gtest/gtest.h>

#include <map>

#include "transforms/fold_batch_norm.hpp"
#include "transforms_test_util.hpp"

namespace test_transforms_fold_batch_norm {

using namespace kiln;
using namespace kiln::test;
using transforms::fold_batch_norm;
using transforms::kFoldBatchNormalization;
using transforms::PassLog;

namespace {

// BatchNormalization over channel dim 1 of `x` with C random parameters; named `name`.
ir::Node* add_bn(const std::shared_ptr<ir::Graph>& g, ir::Value* x, int64_t C, const std::string& name,
                 uint32_t seed, const std::string& out_name = "") {
  ir::Value* gamma = g->add_constant(name + "_gamma", rand_f32({C}, seed, 0.5f, 1.5f));
  ir::Value* beta = g->add_constant(name + "_beta", rand_f32({C}, seed + 1, -1, 1));
  ir::Value* mean = g->add_constant(name + "_mean", rand_f32({C}, seed + 2, -0.5f, 0.5f));
  ir::Value* var = g->add_constant(name + "_var", rand_f32({C}, seed + 3, 0.2f, 2.0f));
  ir::Node* bn = g->add_node("BatchNormalization", {x, gamma, beta, mean, var},
                             std::vector<std::string>{out_name}, name);
  bn->attrs["epsilon"] = ir::Attribute(1e-3f);
  return bn;
}

// Runs the pass on `g` (outputs already set) and checks one fold and equal outputs.
void fold_one(const std::shared_ptr<ir::Graph>& g, const std::vector<Tensor>& feeds, PassLog& log) {
  ir::infer_shapes(*g);
  auto before = g->clone();
  EXPECT_EQ(fold_batch_norm(*g, &log), 1u);
  EXPECT_EQ(count_op(*g, "BatchNormalization"), 0u);
  EXPECT_EQ(log.count_applied(kFoldBatchNormalization), 1u);
  expect_same_outputs(before, g, feeds);
}

ir::Node* conv(const std::shared_ptr<ir::Graph>& g, ir::Value* x, Shape w, bool bias, int64_t group,
               const std::string& name, const std::string& op = "Conv") {
  std::vector<ir::Value*> in{x, g->add_constant(name + "_w", rand_f32(w, 11, -0.5f, 0.5f))};
  const int64_t M = op == "Conv" ? w[0] : w[1] * group;
  if (bias) in.push_back(g->add_constant(name + "_b", rand_f32({M}, 12)));
  ir::Node* c = g->add_node(op, in, 1, name);
  c->attrs["pads"] = ir::Attribute(std::vector<int64_t>{1, 1, 1, 1});
  c->attrs["group"] = ir::Attribute(group);
  return c;
}

}  // namespace

TEST(TransformsFoldBatchNorm, ConvWithBias) {
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({2, 4, 5, 5}));
  ir::Node* c = conv(g, x, {6, 4, 3, 3}, true, 1, "conv");
  ir::Node* bn = add_bn(g, c->output(0), 6, "bn", 20);
  ir::Node* relu = g->add_node("Relu", {bn->output(0)}, 1, "relu");
  g->add_output(relu->output(0));
  PassLog log;
  fold_one(g, {rand_f32({2, 4, 5, 5}, 1)}, log);
  EXPECT_EQ(relu->input(0), c->output(0));
  EXPECT_NE(c->input(1)->name(), "conv_w");
  EXPECT_NE(c->input(2)->name(), "conv_b");
  EXPECT_EQ(log.entries[0].where, "conv -> bn");
  EXPECT_EQ(log.entries[0].message, "BatchNormalization folded into the Conv's weights and bias");
}

TEST(TransformsFoldBatchNorm, ConvWithoutBiasGetsOne) {
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({ir::Dim::sym("batch"), 3, 6, 6}));
  ir::Node* c = conv(g, x, {5, 3, 3, 3}, false, 1, "conv");
  ir::Node* bn = add_bn(g, c->output(0), 5, "bn", 30);
  g->add_output(bn->output(0));
  PassLog log;
  fold_one(g, {rand_f32({3, 3, 6, 6}, 2)}, log);
  c = g->outputs()[0]->producer();  // rebuilt under the BatchNormalization's output name
  EXPECT_EQ(c->op_type(), "Conv");
  EXPECT_EQ(c->num_inputs(), 3u);
  ASSERT_TRUE(c->input(2) && c->input(2)->is_constant());
}

TEST(TransformsFoldBatchNorm, GroupedAndDepthwiseConv) {
  for (int64_t group : {2, 4}) {
    auto g = new_graph();
    ir::Value* x = g->add_input("x", f32_type({1, 4, 5, 5}));
    const int64_t M = group == 4 ? 4 : 6;
    ir::Node* c = conv(g, x, {M, 4 / group, 3, 3}, group == 2, group, "conv");
    ir::Node* bn = add_bn(g, c->output(0), M, "bn", 40);
    g->add_output(bn->output(0));
    PassLog log;
    fold_one(g, {rand_f32({1, 4, 5, 5}, 3)}, log);
  }
}

TEST(TransformsFoldBatchNorm, GroupedConvTranspose) {
  for (bool bias : {false, true}) {
    auto g = new_graph();
    ir::Value* x = g->add_input("x", f32_type({1, 4, 4, 4}));
    ir::Node* c = conv(g, x, {4, 3, 3, 3}, bias, 2, "deconv", "ConvTranspose");  // 6 output channels
    c->attrs["strides"] = ir::Attribute(std::vector<int64_t>{2, 2});
    ir::Node* bn = add_bn(g, c->output(0), 6, "bn", 50);
    g->add_output(bn->output(0));
    PassLog log;
    fold_one(g, {rand_f32({1, 4, 4, 4}, 4)}, log);
  }
}

TEST(TransformsFoldBatchNorm, GemmTransBWithC) {
  auto g = new_graph();
  ir::Value* a = g->add_input("a", f32_type({3, 5}));
  ir::Node* gemm = g->add_node("Gemm", {a, g->add_constant("B", rand_f32({4, 5}, 60)), g->add_constant("C", rand_f32({4}, 61))},
                               1, "gemm");
  gemm->attrs["transB"] = ir::Attribute(int64_t{1});
  gemm->attrs["alpha"] = ir::Attribute(0.7f);
  gemm->attrs["beta"] = ir::Attribute(0.5f);
  ir::Node* bn = add_bn(g, gemm->output(0), 4, "bn", 62);
  g->add_output(bn->output(0));
  PassLog log;
  fold_one(g, {rand_f32({3, 5}, 5)}, log);
  gemm = g->outputs()[0]->producer();
  EXPECT_EQ(gemm->attr_f("beta"), 1.0f);
  EXPECT_EQ(gemm->attr_f("alpha"), 0.7f);
  EXPECT_EQ(gemm->input(2)->constant().shape(), (Shape{4}));
}

TEST(TransformsFoldBatchNorm, GemmWithoutCAndWithColumnC) {
  {
    auto g = new_graph();
    ir::Value* a = g->add_input("a", f32_type({3, 5}));
    ir::Node* gemm = g->add_node("Gemm", {a, g->add_constant("B", rand_f32({5, 4}, 70))}, 1, "gemm");
    ir::Node* bn = add_bn(g, gemm->output(0), 4, "bn", 72);
    g->add_output(bn->output(0));
    PassLog log;
    fold_one(g, {rand_f32({3, 5}, 6)}, log);
    ASSERT_TRUE(g->outputs()[0]->producer()->has_input(2));
  }
  {
    // C of shape [3, 1] (one value per row) becomes [3, 4]
    auto g = new_graph();
    ir::Value* a = g->add_input("a", f32_type({5, 3}));
    ir::Node* gemm = g->add_node(
        "Gemm", {a, g->add_constant("B", rand_f32({5, 4}, 73)), g->add_constant("C", rand_f32({3, 1}, 74))}, 1, "gemm");
    gemm->attrs["transA"] = ir::Attribute(int64_t{1});
    gemm->attrs["beta"] = ir::Attribute(2.0f);
    ir::Node* bn = add_bn(g, gemm->output(0), 4, "bn", 75);
    g->add_output(bn->output(0));
    PassLog log;
    fold_one(g, {rand_f32({5, 3}, 7)}, log);
    gemm = g->outputs()[0]->producer();
    EXPECT_EQ(gemm->input(2)->constant().shape(), (Shape{3, 4}));
  }
}

TEST(TransformsFoldBatchNorm, MatMulGetsABiasAdd) {
  auto g = new_graph();
  ir::Value* a = g->add_input("a", f32_type({ir::Dim::sym("n"), 5}));
  ir::Node* mm = g->add_node("MatMul", {a, g->add_constant("W", rand_f32({5, 4}, 80))}, 1, "mm");
  ir::Node* bn = add_bn(g, mm->output(0), 4, "bn", 81);
  g->add_output(bn->output(0));
  const std::string y = bn->output(0)->name();
  PassLog log;
  fold_one(g, {rand_f32({3, 5}, 8)}, log);
  EXPECT_EQ(count_op(*g, "MatMul"), 1u);
  EXPECT_EQ(count_op(*g, "Add"), 1u);
  ir::Node* add = g->outputs()[0]->producer();
  EXPECT_EQ(add->op_type(), "Add");
  EXPECT_EQ(add->input(0), mm->output(0));
  EXPECT_EQ(output_names(*g), std::vector<std::string>{y});
}

TEST(TransformsFoldBatchNorm, MatMulAddChainUpdatesTheExistingBias) {
  auto g = new_graph();
  ir::Value* a = g->add_input("a", f32_type({3, 5}));
  ir::Node* mm = g->add_node("MatMul", {a, g->add_constant("W", rand_f32({5, 4}, 90))}, 1, "mm");
  ir::Node* add = g->add_node("Add", {mm->output(0), g->add_constant("b", rand_f32({4}, 91))}, 1, "add");
  ir::Node* bn = add_bn(g, add->output(0), 4, "bn", 92);
  g->add_output(bn->output(0));
  PassLog log;
  fold_one(g, {rand_f32({3, 5}, 9)}, log);
  EXPECT_EQ(g->num_nodes(), 2u);
  EXPECT_EQ(log.entries[0].where, "mm -> add -> bn");
}

TEST(TransformsFoldBatchNorm, GraphOutputNameIsKept) {
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({1, 2, 4, 4}));
  ir::Node* c = conv(g, x, {3, 2, 3, 3}, true, 1, "conv");
  add_bn(g, c->output(0), 3, "bn", 100, "y");
  g->add_output(g->find_value("y"));
  PassLog log;
  fold_one(g, {rand_f32({1, 2, 4, 4}, 10)}, log);
  EXPECT_EQ(output_names(*g), (std::vector<std::string>{"y"}));
  EXPECT_EQ(g->outputs()[0]->producer()->op_type(), "Conv");
  EXPECT_EQ(g->outputs()[0]->producer()->name(), "conv");
  EXPECT_EQ(g->num_nodes(), 1u);
}

TEST(TransformsFoldBatchNorm, ConvOutputReadTwiceIsSkipped) {
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({1, 2, 4, 4}));
  ir::Node* c = conv(g, x, {3, 2, 3, 3}, true, 1, "conv_3");
  ir::Node* bn = add_bn(g, c->output(0), 3, "bn_4", 110);
  ir::Node* relu = g->add_node("Relu", {c->output(0)}, 1, "relu_9");
  g->add_output(bn->output(0));
  g->add_output(relu->output(0));
  ir::infer_shapes(*g);
  PassLog log;
  EXPECT_EQ(fold_batch_norm(*g, &log), 0u);
  EXPECT_EQ(count_op(*g, "BatchNormalization"), 1u);
  ASSERT_EQ(log.entries.size(), 1u);
  EXPECT_FALSE(log.entries[0].applied);
  EXPECT_EQ(log.entries[0].where, "conv_3 -> bn_4");
  EXPECT_EQ(log.entries[0].message, "BatchNormalization not folded: the Conv output is also read by relu_9");
}

TEST(TransformsFoldBatchNorm, OtherSkipReasons) {
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({1, 3, 4, 4}));
  ir::Value* mean = g->add_input("mean", f32_type({3}));
  // after a Relu
  ir::Node* relu = g->add_node("Relu", {x}, 1, "relu");
  ir::Node* bn1 = add_bn(g, relu->output(0), 3, "bn_relu", 120);
  // statistics not constant
  ir::Node* c = conv(g, x, {3, 3, 3, 3}, false, 1, "conv");
  ir::Node* bn2 = add_bn(g, c->output(0), 3, "bn_dyn", 130);
  g->set_node_input(bn2, 3, mean);
  // on a graph input
  ir::Node* bn3 = add_bn(g, x, 3, "bn_input", 140);
  // MatMul with a 3-D output: BN's channel is not the weight's column
  ir::Value* a3 = g->add_input("a3", f32_type({2, 3, 5}));
  ir::Node* mm = g->add_node("MatMul", {a3, g->add_constant("W", rand_f32({5, 4}, 150))}, 1, "mm");
  ir::Node* bn4 = add_bn(g, mm->output(0), 3, "bn_mm3", 160);
  // a conv weight that is not a constant
  ir::Value* w = g->add_input("w", f32_type({3, 3, 1, 1}));
  ir::Node* c2 = g->add_node("Conv", {x, w}, 1, "conv_dynw");
  ir::Node* bn5 = add_bn(g, c2->output(0), 3, "bn_dynw", 170);
  for (ir::Node* n : {bn1, bn2, bn3, bn4, bn5}) g->add_output(n->output(0));
  ir::infer_shapes(*g);
  PassLog log;
  EXPECT_EQ(fold_batch_norm(*g, &log), 0u);
  auto skipped = entries(log, kFoldBatchNormalization, false);
  ASSERT_EQ(skipped.size(), 5u);
  std::map<std::string, std::string> why;
  for (auto& e : skipped) why[e.where] = e.message;
  EXPECT_EQ(why["relu -> bn_relu"],
            "BatchNormalization not folded: its input comes from Relu, not from Conv, ConvTranspose, Gemm or MatMul");
  EXPECT_EQ(why["bn_dyn"], "BatchNormalization not folded: its input_mean input is not a constant");
  EXPECT_EQ(why["bn_input"], "BatchNormalization not folded: its input 'x' is not produced by a node");
  EXPECT_NE(why["mm -> bn_mm3"].find("the MatMul output has shape [2,3,4]; only a 2-D output"), std::string::npos)
      << why["mm -> bn_mm3"];
  EXPECT_EQ(why["conv_dynw -> bn_dynw"], "BatchNormalization not folded: the Conv weight 'w' is not a constant");
}

}  // namespace test_transforms_fold_batch_norm
