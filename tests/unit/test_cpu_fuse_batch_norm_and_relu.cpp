// FuseBatchNormAndRelu: a BatchNormalization no Conv precedes absorbs the ReLU after it, in
// whichever primitive the layout it meets gives it (binary on plain / channels-last data,
// batch normalization on channel blocks); nothing else is fused into it.
#include <gtest/gtest.h>

#include "cpu/graph_optimizer.hpp"
#include "cpu_test_util.hpp"

namespace test_cpu_fuse_batch_norm_and_relu {

using namespace kiln;
using namespace kiln::test;

namespace {

// x -> [Conv ->] BatchNormalization -> ReLU [-> Mul by 2] -> output
std::shared_ptr<ir::Graph> bn_relu(const Shape& xs, bool conv_first, bool then_mul) {
  auto g = make_graph();
  ir::Value* y = g->add_input("x", {DType::f32, ir::PartialShape(xs)});
  const int64_t c = xs[1];
  if (conv_first) {
    // Conv -> Concat(conv, x): what DenseNet feeds its BatchNormalization (channel blocks);
    // the Concat keeps the BN from folding into the Conv
    ir::Value* cv = conv3x3(*g, y, c, 16, 11, "conv", 0.5f);
    auto* cat = g->add_node("Concat", {cv, y}, 1, "cat");
    cat->attrs["axis"] = int64_t(1);
    y = cat->output(0);
  }
  const int64_t bc = conv_first ? c + 16 : c;
  auto* bn = g->add_node("BatchNormalization",
                         {y, g->add_constant("s", random_tensor({bc}, 1, 0.5f, 1.5f)), g->add_constant("b", random_tensor({bc}, 2)),
                          g->add_constant("m", random_tensor({bc}, 3)), g->add_constant("v", random_tensor({bc}, 4, 0.5f, 2.0f))},
                         1, "bn");
  auto* relu = g->add_node("Relu", {bn->output(0)}, 1, "relu");
  y = relu->output(0);
  if (then_mul) y = g->add_node("Mul", {y, g->add_constant("two", Tensor::scalar<float>(2.0f))}, 1, "mul")->output(0);
  g->add_output(y);
  return g;
}

}  // namespace

TEST(CpuFuseBatchNormAndRelu, ReluIsFusedOnPlainAndBlockedData) {
  for (bool conv_first : {false, true}) {
    const Shape xs{1, 16, 7, 7};
    transforms::PassLog log;
    CompareOptions opt = fusing(&log);
    opt.disabled_passes = {"FuseConcatAndBatchNorm"};  // which would take the BN into the Concat
    auto cg = compare_with_reference(bn_relu(xs, conv_first, false), {random_tensor(xs, 5)}, opt);
    const cpu::Node* bn = find(*cg, "bn");
    ASSERT_NE(bn, nullptr) << cg->describe();
    EXPECT_EQ(bn->fused, std::vector<std::string>{"relu"}) << cg->describe() << explain(log);
    EXPECT_EQ(find(*cg, "relu"), nullptr);
    EXPECT_EQ(log.count_applied("FuseBatchNormAndRelu"), 1u);
    expect_jit(*cg, "BatchNorm");
  }
}

TEST(CpuFuseBatchNormAndRelu, OnlyTheReluAndOnlyOnce) {
  const Shape xs{2, 8, 5, 5};
  transforms::PassLog log;
  auto cg = compare_with_reference(bn_relu(xs, false, true), {random_tensor(xs, 6)}, fusing(&log));
  EXPECT_EQ(find(*cg, "bn")->fused, std::vector<std::string>{"relu"});
  EXPECT_NE(find(*cg, "mul"), nullptr);
  EXPECT_TRUE(log_has(log, false, "mul not fused: it has fused its ReLU already")) << explain(log);
}

}  // namespace test_cpu_fuse_batch_norm_and_relu
