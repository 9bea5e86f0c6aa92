// run_ir_fusion_passes: the four ir::Graph passes in order, names in `disabled` skipped.
#include <gtest/gtest.h>

#include "transforms/ir_fusion_passes.hpp"
#include "transforms_test_util.hpp"

namespace test_transforms_ir_fusion_passes {

using namespace kiln;
using namespace kiln::test;
using transforms::PassLog;
using transforms::run_ir_fusion_passes;

namespace {

// x -> Q -> DQ -> Identity -> Pad -> Conv -> BatchNormalization -> Mul(1) -> "y"
std::shared_ptr<ir::Graph> pipeline() {
  auto g = new_graph(13);
  ir::Value* x = g->add_input("x", f32_type({1, 2, 6, 6}));
  ir::Value* s = g->add_constant("s", f32_filled({}, 0.03125f));
  ir::Value* z = g->add_constant("z", Tensor::scalar<uint8_t>(100));
  ir::Node* q = g->add_node("QuantizeLinear", {x, s, z}, 1, "q");
  ir::Node* dq = g->add_node("DequantizeLinear", {q->output(0), s, z}, 1, "dq");
  ir::Node* id = g->add_node("Identity", {dq->output(0)}, 1, "identity");
  ir::Node* pad = g->add_node(
      "Pad", {id->output(0), g->add_constant("pads", Tensor::from_vector<int64_t>({0, 0, 1, 1, 0, 0, 1, 1}, {8}))}, 1,
      "pad");
  ir::Node* conv = g->add_node("Conv", {pad->output(0), g->add_constant("conv_w", rand_f32({4, 2, 3, 3}, 1))}, 1, "conv");
  const int64_t C = 4;
  ir::Node* bn = g->add_node("BatchNormalization",
                             {conv->output(0), g->add_constant("gamma", rand_f32({C}, 2, 0.5f, 1.5f)),
                              g->add_constant("beta", rand_f32({C}, 3)), g->add_constant("mean", rand_f32({C}, 4)),
                              g->add_constant("var", rand_f32({C}, 5, 0.5f, 2))},
                             1, "bn");
  ir::Node* mul = g->add_node("Mul", {bn->output(0), g->add_constant("one", f32_filled({1}, 1))},
                              std::vector<std::string>{"y"}, "mul");
  g->add_output(mul->output(0));
  ir::infer_shapes(*g);
  return g;
}

}  // namespace

TEST(TransformsIrFusionPasses, AllPassesInOrder) {
  auto g = pipeline();
  auto before = g->clone();
  PassLog log;
  EXPECT_EQ(run_ir_fusion_passes(*g, {}, &log), 5u);
  EXPECT_EQ(g->num_nodes(), 2u);
  EXPECT_EQ(count_op(*g, "FakeQuantize"), 1u);
  EXPECT_EQ(count_op(*g, "Conv"), 1u);
  EXPECT_EQ(output_names(*g), (std::vector<std::string>{"y"}));
  EXPECT_EQ(g->outputs()[0]->producer()->name(), "conv");
  EXPECT_EQ(g->find_value("conv_w"), nullptr);  // the unfolded weight is dropped
  std::vector<std::string> order;
  for (auto& e : log.entries)
    if (e.applied) order.push_back(e.pass);
  EXPECT_EQ(order, (std::vector<std::string>{"QdqToFakeQuantize", "RemoveIdentityOps", "RemoveIdentityOps",
                                              "FoldPadIntoConvolution", "FoldBatchNormalization"}));
  expect_same_outputs(before, g, {rand_f32({1, 2, 6, 6}, 9, -4, 4)});
}

TEST(TransformsIrFusionPasses, DisabledPassesAreSkipped) {
  auto g = pipeline();
  auto before = g->clone();
  PassLog log;
  EXPECT_EQ(run_ir_fusion_passes(*g, {"FoldBatchNormalization", "QdqToFakeQuantize"}, &log), 3u);
  EXPECT_EQ(count_op(*g, "BatchNormalization"), 1u);
  EXPECT_EQ(count_op(*g, "QuantizeLinear"), 1u);
  EXPECT_EQ(count_op(*g, "Pad"), 0u);
  expect_same_outputs(before, g, {rand_f32({1, 2, 6, 6}, 10, -4, 4)});

  auto h = pipeline();
  PassLog none;
  EXPECT_EQ(run_ir_fusion_passes(*h, {"all-fusions"}, &none), 0u);
  EXPECT_EQ(h->num_nodes(), 7u);
  EXPECT_TRUE(none.entries.empty());
}

}  // namespace test_transforms_ir_fusion_passes
