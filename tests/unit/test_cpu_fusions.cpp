// The CPU graph optimizer's fusion passes (src/cpu/passes/) on small hand-built graphs:
// runtime node counts and types, the fused names, the pass log (also why a fusion did
// not apply), and outputs against the reference executor (the unfused graph).
#include <gtest/gtest.h>

#include <map>

#include "cpu/graph_optimizer.hpp"
#include "cpu_test_util.hpp"

namespace test_cpu_fusions {

using namespace kiln;
using namespace kiln::test;

namespace {

ir::Value* conv(ir::Graph& g, ir::Value* x, int64_t ic, int64_t oc, const std::string& name, uint32_t seed) {
  auto* c = g.add_node("Conv", {x, g.add_constant(name + "_w", random_tensor({oc, ic, 3, 3}, seed, 0.3f)),
                                g.add_constant(name + "_b", random_tensor({oc}, seed + 1, 0.1f))},
                       1, name);
  c->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  return c->output(0);
}

ir::Value* unary(ir::Graph& g, const char* op, ir::Value* x, const std::string& name) {
  return g.add_node(op, {x}, 1, name)->output(0);
}

ir::Value* binary(ir::Graph& g, const char* op, ir::Value* a, ir::Value* b, const std::string& name) {
  return g.add_node(op, {a, b}, 1, name)->output(0);
}

}  // namespace

TEST(CpuFusionConvSimple, AnyNumberAndOrderOfSimpleLayersBecomePostOps) {
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 4, 9, 9})});
  auto* y = conv(*g, x, 4, 16, "conv", 1);
  y = unary(*g, "Relu", y, "relu");
  y = binary(*g, "Mul", y, g->add_constant("scale", random_tensor({16, 1, 1}, 3, 0.5f, 2.0f)), "scale_mul");  // ScaleShift
  y = binary(*g, "Add", g->add_constant("shift", random_tensor({1, 16, 1, 1}, 4)), y, "shift_add");
  auto* clip = g->add_node("Clip", {y, g->add_constant("lo", Tensor::scalar<float>(-0.5f)),
                                    g->add_constant("hi", Tensor::scalar<float>(1.5f))}, 1, "clip");
  y = unary(*g, "Sigmoid", clip->output(0), "sigmoid");
  y = binary(*g, "Sub", g->add_constant("one", Tensor::scalar<float>(1.0f)), y, "one_minus");  // c - x
  auto* hs = g->add_node("HardSigmoid", {y}, 1, "hsig");  // linear + clip: a second clip, see below
  g->add_output(hs->output(0));
  transforms::PassLog log;
  auto cg = compare_with_reference(g, {random_tensor({1, 4, 9, 9}, 2)}, fusing(&log));
  ASSERT_EQ(cg->nodes().size(), 2u + count_type(*cg, "Reorder")) << cg->describe() << explain(log);
  const cpu::Node* c = find(*cg, "conv");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->fused, (std::vector<std::string>{"relu", "scale_mul", "shift_add", "clip", "sigmoid", "one_minus"}));
  EXPECT_EQ(log.count_applied("FuseConvolutionAndSimpleOperation"), 6u);
  // oneDNN 2.6 gives every eltwise post-op of one algorithm the first one's parameters,
  // so HardSigmoid's clip(0, 1) after clip(-0.5, 1.5) stays a node of its own
  EXPECT_TRUE(log_has(log, false, "hsig not fused: oneDNN 2.6 computes two eltwise post-ops of one algorithm"))
      << explain(log);
  expect_jit(*cg, "Convolution");
}

TEST(CpuFusionConvSimple, SwishWrittenOutIsOnePostOp) {
  // conv -> Sigmoid, Mul(conv, sigmoid) (EfficientNet's SiLU) -> Relu: swish + relu post-ops
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 4, 9, 9})});
  auto* y = conv(*g, x, 4, 16, "conv", 1);
  auto* s = unary(*g, "Sigmoid", y, "sig");
  y = binary(*g, "Mul", s, y, "silu");
  g->add_output(unary(*g, "Relu", y, "relu"));
  transforms::PassLog log;
  auto cg = compare_with_reference(g, {random_tensor({1, 4, 9, 9}, 2)}, fusing(&log));
  const cpu::Node* c = find(*cg, "conv");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->fused, (std::vector<std::string>{"sig", "silu", "relu"})) << explain(log);
  EXPECT_EQ(count_type(*cg, "Convolution") + count_type(*cg, "Reorder"), cg->nodes().size());
  EXPECT_TRUE(log_has(log, true, "Swish (sig + silu) as a post-op")) << explain(log);
  expect_jit(*cg, "Convolution");

  // not when the Sigmoid's result is read by someone else too
  auto g2 = make_graph();
  auto* x2 = g2->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 4, 9, 9})});
  auto* y2 = conv(*g2, x2, 4, 16, "conv", 1);
  auto* s2 = unary(*g2, "Sigmoid", y2, "sig");
  g2->add_output(binary(*g2, "Mul", y2, s2, "silu"));
  g2->add_output(s2);
  auto cg2 = compare_with_reference(g2, {random_tensor({1, 4, 9, 9}, 2)}, fusing(&log));
  EXPECT_TRUE(find(*cg2, "conv")->fused.empty());
  EXPECT_EQ(count_type(*cg2, "Convolution"), 1u);
}

TEST(CpuFusionConvSimple, HardSigmoidAfterOtherLayersIsOneLinearAndOneClip) {
  // Neg then HardSigmoid: the two linear ops are merged into one post-op
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 4, 9, 9})});
  auto* y = unary(*g, "Neg", conv(*g, x, 4, 16, "conv", 1), "neg");
  y = unary(*g, "HardSigmoid", y, "hsig");
  g->add_output(binary(*g, "Mul", y, g->add_constant("scale", random_tensor({16, 1, 1}, 3, 0.5f, 2.0f)), "scale_mul"));
  transforms::PassLog log;
  auto cg = compare_with_reference(g, {random_tensor({1, 4, 9, 9}, 2)}, fusing(&log));
  EXPECT_EQ(find(*cg, "conv")->fused, (std::vector<std::string>{"neg", "hsig", "scale_mul"})) << explain(log);
}

TEST(CpuFusionConvSimple, PReluIsFusedOnlyWhereOneDnnKeepsAJitKernel) {
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 4, 9, 9})});
  auto* y = conv(*g, x, 4, 16, "conv", 1);
  auto* prelu = g->add_node("PRelu", {y, g->add_constant("slope", random_tensor({16, 1, 1}, 5))}, 1, "prelu");
  g->add_output(prelu->output(0));
  transforms::PassLog log;
  auto cg = compare_with_reference(g, {random_tensor({1, 4, 9, 9}, 2)}, fusing(&log));
  const cpu::Node* c = find(*cg, "conv");
  if (c->fused.empty()) {
    // oneDNN 2.6's brgemm convolutions take no PReLU post-op: the pass says so and keeps the node
    EXPECT_TRUE(log_has(log, false, "prelu not fused: oneDNN has only its reference convolution")) << explain(log);
  } else {
    expect_jit(*cg, "Convolution");
  }
}

TEST(CpuFusionConvSimple, NotWhenTheOutputHasAnotherReaderOrTheConstantIsNotPerChannel) {
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 4, 6, 6})});
  auto* c1 = conv(*g, x, 4, 8, "conv1", 1);
  auto* r1 = unary(*g, "Relu", c1, "relu1");
  auto* t1 = unary(*g, "Tanh", c1, "tanh1");  // conv1's output read twice
  auto* c2 = conv(*g, x, 4, 8, "conv2", 2);
  auto* a2 = binary(*g, "Add", c2, g->add_constant("spatial", random_tensor({1, 1, 6, 6}, 3)), "add_spatial");
  auto* c3 = conv(*g, x, 4, 8, "conv3", 4);
  auto* d3 = binary(*g, "Div", g->add_constant("num", random_tensor({8, 1, 1}, 5, 1.0f, 2.0f)), c3, "div_by_conv");
  g->add_output(r1);
  g->add_output(t1);
  g->add_output(a2);
  g->add_output(d3);
  transforms::PassLog log;
  auto cg = compare_with_reference(g, {random_tensor({1, 4, 6, 6}, 6)}, fusing(&log));
  EXPECT_TRUE(find(*cg, "conv1")->fused.empty());
  EXPECT_TRUE(find(*cg, "conv2")->fused.empty());
  EXPECT_TRUE(find(*cg, "conv3")->fused.empty());
  EXPECT_TRUE(log_has(log, false, "conv1 -> relu1: relu1 not fused: conv1's output is also read by tanh1")) << explain(log);
  EXPECT_TRUE(log_has(log, false, "is neither one value nor one per channel"));
  EXPECT_TRUE(log_has(log, false, "Div with the host's output as divisor"));
  EXPECT_EQ(log.count_applied("FuseConvolutionAndSimpleOperation"), 0u);
}

TEST(CpuFusionConvSimple, AGraphOutputIsNeverFusedAway) {
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 4, 6, 6})});
  auto* c = conv(*g, x, 4, 8, "conv", 1);
  auto* r = unary(*g, "Relu", c, "relu");
  g->add_output(c);
  g->add_output(r);
  transforms::PassLog log;
  auto cg = compare_with_reference(g, {random_tensor({1, 4, 6, 6}, 2)}, fusing(&log));
  EXPECT_TRUE(find(*cg, "conv")->fused.empty());
  EXPECT_TRUE(log_has(log, false, "conv's output is a graph output"));
}

TEST(CpuFusionConvSum, ResidualAddAndReluGoIntoTheConvolutionWritingOverTheShortcut) {
  // x -> conv_a -> relu_a (the shortcut s) ; conv_b(conv_m(s)) + s -> relu
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 8, 7, 7})});
  auto* s = unary(*g, "Relu", conv(*g, x, 8, 8, "conv_a", 1), "relu_a");
  auto* b = conv(*g, conv(*g, s, 8, 8, "conv_m", 7), 8, 8, "conv_b", 2);
  auto* sum = binary(*g, "Add", s, b, "add");
  auto* out = unary(*g, "Relu", sum, "relu");
  g->add_output(out);
  transforms::PassLog log;
  auto cg = compare_with_reference(g, {random_tensor({1, 8, 7, 7}, 3)}, fusing(&log));
  const cpu::Node* cb = find(*cg, "conv_b");
  ASSERT_NE(cb, nullptr) << cg->describe();
  EXPECT_EQ(cb->fused, (std::vector<std::string>{"add", "relu"}));
  EXPECT_TRUE(log_has(log, true, "conv_b -> add: accumulates into")) << explain(log);
  EXPECT_EQ(count_type(*cg, "Convolution"), 3u);
  EXPECT_EQ(cg->nodes().size(), 3u + count_type(*cg, "Reorder")) << cg->describe();
  // the sum accumulated in place: conv_b's output is conv_a's (dead) output buffer
  EXPECT_EQ(cb->outputs[0]->data, find(*cg, "conv_a")->outputs[0]->data) << cg->describe();
}

TEST(CpuFusionConvSum, NotWhenTheOtherInputIsStillReadLater) {
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 8, 5, 5})});
  auto* s = unary(*g, "Relu", conv(*g, x, 8, 8, "conv_a", 1), "relu_a");
  auto* b = conv(*g, x, 8, 8, "conv_b", 2);
  auto* sum = binary(*g, "Add", b, s, "add");
  auto* later = binary(*g, "Mul", sum, s, "reads_shortcut_later");
  g->add_output(later);
  transforms::PassLog log;
  auto cg = compare_with_reference(g, {random_tensor({1, 8, 5, 5}, 4)}, fusing(&log));
  EXPECT_TRUE(find(*cg, "conv_b")->fused.empty()) << cg->describe();
  EXPECT_TRUE(log_has(log, false, "conv_b -> add: Sum not fused: the other input is still read by node reads_shortcut_later"))
      << explain(log);
}

TEST(CpuFusionConvSum, NotWhenTheConvolutionReadsTheOtherInput) {
  // conv(s) + s: writing the sum over s would clobber the convolution's own input
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 8, 5, 5})});
  auto* s = unary(*g, "Relu", conv(*g, x, 8, 8, "conv_a", 1), "relu_a");
  g->add_output(binary(*g, "Add", s, conv(*g, s, 8, 8, "conv_b", 2), "add"));
  transforms::PassLog log;
  auto cg = compare_with_reference(g, {random_tensor({1, 8, 5, 5}, 4)}, fusing(&log));
  EXPECT_TRUE(find(*cg, "conv_b")->fused.empty());
  EXPECT_TRUE(log_has(log, false, "Sum not fused: the convolution itself reads")) << explain(log);
}

TEST(CpuFusionConvSum, NotOverAGraphInput) {
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 8, 5, 5})});
  auto* b = conv(*g, x, 8, 8, "conv", 1);
  g->add_output(binary(*g, "Add", b, x, "add"));
  transforms::PassLog log;
  Tensor in = random_tensor({1, 8, 5, 5}, 5);
  Tensor copy = in.clone();
  auto cg = compare_with_reference(g, {in}, fusing(&log));
  EXPECT_TRUE(find(*cg, "conv")->fused.empty());
  EXPECT_TRUE(log_has(log, false, "is a graph input and may not be overwritten")) << explain(log);
  expect_close(copy, in, 0, 0);
}

TEST(CpuFusionFullyConnected, BiasAddAndActivationBecomePostOps) {
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{2, 5, 16})});
  auto* mm = g->add_node("MatMul", {x, g->add_constant("w", random_tensor({16, 8}, 1, 0.3f))}, 1, "fc");
  auto* y = binary(*g, "Add", mm->output(0), g->add_constant("bias", random_tensor({8}, 2)), "bias_add");
  y = unary(*g, "Tanh", y, "tanh");
  g->add_output(y);
  auto* gemm = g->add_node("Gemm", {g->add_input("z", {DType::f32, ir::PartialShape(Shape{3, 16})}),
                                    g->add_constant("w2", random_tensor({8, 16}, 3, 0.3f))},
                           1, "gemm");
  gemm->attrs["transB"] = int64_t(1);
  g->add_output(unary(*g, "Relu", binary(*g, "Mul", gemm->output(0), g->add_constant("s", Tensor::scalar<float>(2.0f)), "scale"), "relu"));
  transforms::PassLog log;
  auto cg = compare_with_reference(g, {random_tensor({2, 5, 16}, 4), random_tensor({3, 16}, 5)}, fusing(&log));
  EXPECT_EQ(find(*cg, "fc")->fused, (std::vector<std::string>{"bias_add", "tanh"})) << cg->describe();
  EXPECT_EQ(find(*cg, "gemm")->fused, (std::vector<std::string>{"scale", "relu"}));
  EXPECT_EQ(cg->nodes().size(), 2u) << cg->describe();
  EXPECT_EQ(log.count_applied("FuseFullyConnectedAndSimpleOperation"), 4u);
  expect_jit(*cg, "FullyConnected");
}

TEST(CpuFusion, DisablingAPassByNameKeepsItsNodes) {
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 4, 6, 6})});
  g->add_output(unary(*g, "Relu", conv(*g, x, 4, 8, "conv", 1), "relu"));
  CompareOptions o = fusing(nullptr);
  o.disabled_passes = {"FuseConvolutionAndSimpleOperation"};
  auto cg = compare_with_reference(g, {random_tensor({1, 4, 6, 6}, 2)}, o);
  EXPECT_EQ(count_type(*cg, "Eltwise"), 1u);
  EXPECT_TRUE(find(*cg, "conv")->fused.empty());
  const auto names = cpu::known_pass_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "FuseConvolutionAndSum"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "all-fusions"), names.end());
}

TEST(CpuFusionDwConv, PointwiseThenDepthwiseIsOneConvolutionWhereOneDnnHasTheKernel) {
  // MobileNetV2's first expansion: 1x1 16 -> 96 at 112x112, Clip(0, 6), 3x3 depthwise stride 2, Clip(0, 6)
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 16, 112, 112})});
  auto* pw = g->add_node("Conv", {x, g->add_constant("pw_w", random_tensor({96, 16, 1, 1}, 1, 0.3f)),
                                  g->add_constant("pw_b", random_tensor({96}, 2, 0.1f))}, 1, "pw");
  auto clip = [&](ir::Value* v, const std::string& n) {
    return g->add_node("Clip", {v, g->add_constant(n + "_lo", Tensor::scalar<float>(0.0f)),
                                g->add_constant(n + "_hi", Tensor::scalar<float>(6.0f))}, 1, n)->output(0);
  };
  auto* dw = g->add_node("Conv", {clip(pw->output(0), "clip1"), g->add_constant("dw_w", random_tensor({96, 1, 3, 3}, 3, 0.3f)),
                                  g->add_constant("dw_b", random_tensor({96}, 4, 0.1f))}, 1, "dw");
  dw->attrs["group"] = int64_t(96);
  dw->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  dw->attrs["strides"] = std::vector<int64_t>{2, 2};
  g->add_output(clip(dw->output(0), "clip2"));
  transforms::PassLog log;
  auto cg = compare_with_reference(g, {random_tensor({1, 16, 112, 112}, 5)}, fusing(&log));
  const cpu::Node* c = find(*cg, "pw");
  ASSERT_NE(c, nullptr);
  if (log.count_applied("FuseConvolutionAndDWConvolution") == 1) {
    EXPECT_EQ(c->fused, (std::vector<std::string>{"clip1", "dw", "clip2"})) << explain(log);
    EXPECT_EQ(count_type(*cg, "Convolution"), 1u);
    expect_jit(*cg, "Convolution");
  } else {
    // oneDNN picks its fused JIT kernel by shape and thread count, and on AVX-512 it would
    // replace brgconv_1x1 (slower); the log says why. The fused path runs in the e2e check
    // e2e_models_avx2 (oneDNN capped at AVX2: all 16 of MobileNetV2's pairs fuse).
    EXPECT_TRUE(log_has(log, false, "pw -> dw: depthwise convolution not fused: no faster fused kernel in oneDNN 2.6 here"))
        << explain(log);
    EXPECT_EQ(count_type(*cg, "Convolution"), 2u);
  }
}

TEST(CpuFusionDwConv, NotForOtherSecondConvolutions) {
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 8, 10, 10})});
  auto* pw = g->add_node("Conv", {x, g->add_constant("pw_w", random_tensor({16, 8, 1, 1}, 1, 0.3f))}, 1, "pw");
  auto* dw = g->add_node("Conv", {pw->output(0), g->add_constant("dw_w", random_tensor({16, 1, 3, 3}, 3, 0.3f))}, 1, "dw");
  dw->attrs["group"] = int64_t(16);
  dw->attrs["pads"] = std::vector<int64_t>{0, 0, 0, 0};  // unpadded: not what the post-op computes
  g->add_output(dw->output(0));
  transforms::PassLog log;
  auto cg = compare_with_reference(g, {random_tensor({1, 8, 10, 10}, 5)}, fusing(&log));
  EXPECT_EQ(count_type(*cg, "Convolution"), 2u);
  EXPECT_TRUE(log_has(log, false, "padding is not 1 on every side")) << explain(log);
}

}  // namespace test_cpu_fusions
