// ReduceToGlobalPooling: ReduceMean / ReduceMax over the spatial axes of an image become
// global pooling (+ Flatten without keepdims); other reductions stay.
#include <gtest/gtest.h>

#include "transforms/reduce_to_global_pooling.hpp"
#include "transforms_test_util.hpp"

namespace test_transforms_reduce_to_global_pooling {

using namespace kiln;
using namespace kiln::test;
using transforms::kReduceToGlobalPooling;
using transforms::PassLog;
using transforms::reduce_to_global_pooling;

namespace {

ir::Node* reduce(const std::shared_ptr<ir::Graph>& g, const std::string& op, ir::Value* x, std::vector<int64_t> axes,
                 int64_t keepdims, const std::string& name) {
  ir::Node* n = g->add_node(op, {x}, 1, name);
  n->attrs["axes"] = std::move(axes);
  n->attrs["keepdims"] = keepdims;
  return n;
}

bool log_has_skip(const PassLog& log, const std::string& where, const std::string& text) {
  for (const auto& e : entries(log, kReduceToGlobalPooling, false))
    if (e.where == where && e.message.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(TransformsReduceToGlobalPooling, SpatialMeanAndMaxBecomePooling) {
  auto g = new_graph(13);
  ir::Value* x = g->add_input("x", f32_type({2, 8, 5, 7}));
  ir::Node* mean = reduce(g, "ReduceMean", x, {2, 3}, 0, "mean");      // [2, 8]: + Flatten
  ir::Node* max = reduce(g, "ReduceMax", x, {-1, -2}, 1, "max");         // [2, 8, 1, 1]
  ir::Node* chan = reduce(g, "ReduceMean", x, {1, 2, 3}, 0, "all");     // not only spatial: kept
  g->add_output(mean->output(0));
  g->add_output(max->output(0));
  g->add_output(chan->output(0));
  ir::infer_shapes(*g);
  auto before = g->clone();
  PassLog log;
  EXPECT_EQ(reduce_to_global_pooling(*g, &log), 2u);
  ir::infer_shapes(*g);
  EXPECT_EQ(count_op(*g, "GlobalAveragePool"), 1u);
  EXPECT_EQ(count_op(*g, "GlobalMaxPool"), 1u);
  EXPECT_EQ(count_op(*g, "Flatten"), 1u);
  EXPECT_EQ(count_op(*g, "ReduceMean"), 1u);
  EXPECT_EQ(g->outputs()[0]->name(), before->outputs()[0]->name());  // the graph's output names stay
  EXPECT_EQ(g->outputs()[0]->type.shape.to_shape(), (Shape{2, 8}));
  EXPECT_TRUE(log_has_skip(log, "all", "not the spatial ones"));
  expect_same_outputs(before, g, {rand_f32({2, 8, 5, 7}, 3, -2, 2)});
}

TEST(TransformsReduceToGlobalPooling, SequencesAndOpset18AxesInput) {
  auto g = new_graph(18);
  ir::Value* seq = g->add_input("seq", f32_type({2, 6, 16}));
  ir::Value* img = g->add_input("img", f32_type({1, 4, 3, 3, 2}));
  ir::Node* ln_mean = g->add_node("ReduceMean", {seq, g->add_constant("a1", Tensor::from_vector<int64_t>({2}, {1}))}, 1, "ln");
  ir::Node* vol = g->add_node("ReduceMean", {img, g->add_constant("a2", Tensor::from_vector<int64_t>({2, 3, 4}, {3}))}, 1, "vol");
  g->add_output(ln_mean->output(0));
  g->add_output(vol->output(0));
  ir::infer_shapes(*g);
  auto before = g->clone();
  PassLog log;
  EXPECT_EQ(reduce_to_global_pooling(*g, &log), 1u);  // the 5-D one; the sequence's mean stays
  ir::infer_shapes(*g);
  EXPECT_EQ(count_op(*g, "GlobalAveragePool"), 1u);
  EXPECT_TRUE(log_has_skip(log, "ln", "not an image"));
  expect_same_outputs(before, g, {rand_f32({2, 6, 16}, 4, -1, 1), rand_f32({1, 4, 3, 3, 2}, 5, -1, 1)});
}

}  // namespace test_transforms_reduce_to_global_pooling
