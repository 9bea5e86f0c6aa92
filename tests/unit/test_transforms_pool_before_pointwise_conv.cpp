// AveragePoolBeforePointwiseConvolution: an average pool after a 1x1 convolution runs first,
// on the convolution's input (DenseNet's transitions); what it cannot swap stays as it was.
#include <gtest/gtest.h>

#include "transforms/pool_before_pointwise_conv.hpp"
#include "transforms_test_util.hpp"

namespace test_transforms_pool_before_pointwise_conv {

using namespace kiln;
using namespace kiln::test;
using transforms::average_pool_before_pointwise_conv;
using transforms::kAveragePoolBeforePointwiseConvolution;
using transforms::PassLog;

namespace {

ir::Value* conv(const std::shared_ptr<ir::Graph>& g, ir::Value* x, int64_t ci, int64_t co, int64_t k,
                const std::string& name, uint32_t seed, int64_t group = 1) {
  std::vector<ir::Value*> ins = {x, g->add_constant(name + "_w", rand_f32({co, ci / group, k, k}, seed)),
                                 g->add_constant(name + "_b", rand_f32({co}, seed + 1))};
  ir::Node* n = g->add_node("Conv", ins, 1, name);
  n->attrs["group"] = group;
  if (k > 1) n->attrs["pads"] = std::vector<int64_t>(4, k / 2);
  return n->output(0);
}

ir::Node* avg_pool(const std::shared_ptr<ir::Graph>& g, ir::Value* x, int64_t k, int64_t s, const std::string& name) {
  ir::Node* n = g->add_node("AveragePool", {x}, 1, name);
  n->attrs["kernel_shape"] = std::vector<int64_t>{k, k};
  n->attrs["strides"] = std::vector<int64_t>{s, s};
  return n;
}

std::string skip_reason(const PassLog& log, const std::string& pool) {
  for (const auto& e : entries(log, kAveragePoolBeforePointwiseConvolution, false))
    if (e.where.size() >= pool.size() && e.where.compare(e.where.size() - pool.size(), pool.size(), pool) == 0)
      return e.message;
  return "(not logged)";
}

}  // namespace

TEST(TransformsAveragePoolBeforePointwiseConv, ADenseNetTransitionPoolsFirst) {
  // BatchNorm and ReLU (kept here), a 1x1 convolution 16 -> 8 with a bias, a 2x2 pool at
  // stride 2 (odd width: the last column is dropped); a grouped 1x1 into a 3x3 pool at stride 2
  for (int64_t group : {1, 4}) {
    SCOPED_TRACE(group);
    auto g = new_graph(17);
    ir::Value* x = g->add_input("x", f32_type({2, 16, 8, 11}));
    ir::Value* r = g->add_node("Relu", {x}, 1, "relu")->output(0);
    ir::Node* pool = avg_pool(g, conv(g, r, 16, 8, 1, "conv", 3, group), group == 1 ? 2 : 3, 2, "pool");
    g->add_output(pool->output(0));
    ir::infer_shapes(*g);
    auto before = g->clone();
    PassLog log;
    ASSERT_EQ(average_pool_before_pointwise_conv(*g, &log), 1u);
    ir::infer_shapes(*g);
    EXPECT_EQ(output_names(*g), output_names(*before));  // the graph's output name stays
    const ir::Value* y = g->outputs()[0];
    ASSERT_NE(y->producer(), nullptr);
    EXPECT_EQ(y->producer()->op_type(), "Conv");
    const ir::Node* p = y->producer()->input(0)->producer();
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->op_type(), "AveragePool");
    EXPECT_EQ(p->input(0)->producer()->op_type(), "Relu");
    EXPECT_EQ(p->output(0)->type.shape.dims[1].value, 16);  // it pools the input's channels
    EXPECT_EQ(y->type.shape, before->outputs()[0]->type.shape);
    EXPECT_EQ(count_op(*g, "AveragePool"), 1u);
    EXPECT_EQ(count_op(*g, "Conv"), 1u);
    expect_same_outputs(before, g, {rand_f32({2, 16, 8, 11}, 7, -2, 2)});
  }
}

TEST(TransformsAveragePoolBeforePointwiseConv, SymbolicShapesSwapAndKeepTheirDims) {
  auto g = new_graph(17);
  ir::Value* x = g->add_input("x", f32_type({ir::Dim::sym("n"), 8, ir::Dim::sym("h"), ir::Dim::sym("w")}));
  ir::Node* pool = avg_pool(g, conv(g, x, 8, 24, 1, "conv", 5), 2, 2, "pool");
  g->add_output(pool->output(0));
  ir::infer_shapes(*g);
  auto before = g->clone();
  ASSERT_EQ(average_pool_before_pointwise_conv(*g, nullptr), 1u);
  ir::infer_shapes(*g);
  EXPECT_EQ(g->outputs()[0]->type.shape.dims[1].value, 24);
  EXPECT_TRUE(g->outputs()[0]->type.shape.dims[0].is_symbolic());
  expect_same_outputs(before, g, {rand_f32({3, 8, 6, 10}, 9)});
}

TEST(TransformsAveragePoolBeforePointwiseConv, WhatItCannotSwapStaysWithItsReason) {
  auto g = new_graph(17);
  ir::Value* x = g->add_input("x", f32_type({1, 16, 8, 8}));
  struct Case {
    std::string pool, reason;
  };
  std::vector<Case> cases;
  auto add = [&](ir::Node* pool, const std::string& reason) {
    g->add_output(pool->output(0));
    cases.push_back({pool->name(), reason});
  };
  add(avg_pool(g, conv(g, x, 16, 8, 3, "c3x3", 11), 2, 2, "p_window"), "not 1x1");
  {
    ir::Node* p = avg_pool(g, conv(g, x, 16, 8, 1, "c_pads", 13), 2, 2, "p_pads");
    p->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
    add(p, "the pool pads its input");
  }
  {
    ir::Node* p = avg_pool(g, conv(g, x, 16, 8, 1, "c_ceil", 15), 3, 2, "p_ceil");
    p->attrs["ceil_mode"] = int64_t{1};
    add(p, "ceil_mode is 1");
  }
  add(avg_pool(g, conv(g, x, 16, 8, 1, "c_s1", 17), 2, 1, "p_stride1"), "strides are 1");
  {
    ir::Value* c = conv(g, x, 16, 8, 1, "c_shared", 19);
    g->add_output(c);
    add(avg_pool(g, c, 2, 2, "p_shared"), "read by the graph output");
  }
  {
    ir::Value* r = g->add_node("Relu", {conv(g, x, 16, 8, 1, "c_relu", 21)}, 1, "relu")->output(0);
    add(avg_pool(g, r, 2, 2, "p_relu"), "not a convolution's");
  }
  add(avg_pool(g, conv(g, x, 16, 1, 1, "c_narrow", 23), 3, 2, "p_narrow"), "costs more");
  {
    ir::Node* c = g->add_node("Conv", {x, g->add_constant("cs_w", rand_f32({8, 16, 1, 1}, 25))}, 1, "c_strided");
    c->attrs["strides"] = std::vector<int64_t>{2, 2};
    add(avg_pool(g, c->output(0), 2, 2, "p_strided"), "strides are not 1");
  }
  ir::infer_shapes(*g);
  auto before = g->clone();
  PassLog log;
  EXPECT_EQ(average_pool_before_pointwise_conv(*g, &log), 0u);
  for (const Case& c : cases) EXPECT_NE(skip_reason(log, c.pool).find(c.reason), std::string::npos) << c.pool;
  expect_same_outputs(before, g, {rand_f32({1, 16, 8, 8}, 27)});
}

}  // namespace test_transforms_pool_before_pointwise_conv
