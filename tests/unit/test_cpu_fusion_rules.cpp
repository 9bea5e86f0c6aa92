// The fusion rules (src/cpu/fusion_rules.hpp) asked from both sides: MarkSkipped on the
// ir::Graph (what the snippets tokenizer must leave alone) and the CPU optimizer's passes on
// the cpu::Graph built from the same graph (what they fuse). On every graph here the two
// name the same nodes: a chain of simple layers after a convolution or a fully connected
// layer, a written-out Swish, a residual sum, FakeQuantize, HardSigmoid, constants that are
// not one value per channel, a value read twice, a graph output in the middle of a chain.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include <algorithm>

#include "cpu/executor.hpp"
#include "cpu/gemm_f32.hpp"
#include "cpu/graph.hpp"
#include "cpu/graph_optimizer.hpp"
#include "cpu/mark_skipped.hpp"
#include "cpu_test_util.hpp"
#include "runtime/reference_executor.hpp"

namespace test_cpu_fusion_rules {

using namespace kiln;
using namespace kiln::test;

namespace {

using Build = void (*)(ir::Graph& g);

ir::Value* conv(ir::Graph& g, ir::Value* x, int64_t ci, int64_t co, uint32_t seed, const std::string& name) {
  return conv3x3(g, x, ci, co, seed, name, 0.3f);
}

ir::Value* op(ir::Graph& g, const std::string& type, std::vector<ir::Value*> in, const std::string& name) {
  return g.add_node(type, std::move(in), 1, name)->output(0);
}

ir::Value* image(ir::Graph& g) { return g.add_input("x", {DType::f32, ir::PartialShape(Shape{1, 8, 6, 6})}); }

// What the CPU passes fused, by the names of the absorbed ir nodes.
std::set<std::string> fused_by_cpu(const std::shared_ptr<ir::Graph>& g) {
  cpu::Graph cg(g);
  std::set<std::string> names;
  for (const auto& n : cg.nodes())
    for (const std::string& f : n->fused) names.insert(f);
  return names;
}

std::set<std::string> marked(const ir::Graph& g) {
  std::set<std::string> names;
  for (const ir::Node* n : cpu::mark_skipped(g)) names.insert(n->name());
  return names;
}

void expect_agreement(Build build, const std::set<std::string>& expected) {
  auto g = make_graph(13);
  build(*g);
  ir::infer_shapes(*g);
  const std::set<std::string> cpu = fused_by_cpu(g), mark = marked(*g);
  EXPECT_EQ(mark, cpu) << "MarkSkipped and the CPU passes disagree";
  EXPECT_EQ(cpu, expected);
}

}  // namespace

TEST(CpuFusionRules, ConvolutionChainOfActivationsAndPerChannelConstants) {
  expect_agreement(
      [](ir::Graph& g) {
        auto* y = op(g, "Relu", {conv(g, image(g), 8, 16, 1, "c")}, "relu");
        y = op(g, "Add", {y, g.add_constant("bias", random_tensor({16, 1, 1}, 2))}, "add_c");
        y = op(g, "Mul", {g.add_constant("two", Tensor::scalar<float>(2.0f)), y}, "mul_s");
        y = op(g, "Sub", {g.add_constant("one", Tensor::scalar<float>(1.0f)), y}, "one_minus");
        y = op(g, "Div", {y, g.add_constant("four", Tensor::scalar<float>(4.0f))}, "div_s");
        y = op(g, "Div", {g.add_constant("eight", Tensor::scalar<float>(8.0f)), y}, "eight_over");  // x is the divisor
        g.add_output(y);
      },
      {"relu", "add_c", "mul_s", "one_minus", "div_s"});
}

TEST(CpuFusionRules, ConstantsThatAreNotOnePerChannelStopTheChain) {
  expect_agreement(
      [](ir::Graph& g) {
        auto* y = op(g, "Tanh", {conv(g, image(g), 8, 16, 1, "c")}, "tanh");
        y = op(g, "Add", {y, g.add_constant("per_row", random_tensor({6, 1}, 2))}, "add_rows");  // along H
        g.add_output(op(g, "Relu", {y}, "relu_after"));
      },
      {"tanh"});
}

TEST(CpuFusionRules, ResidualSumSwishAndPRelu) {
  expect_agreement(
      [](ir::Graph& g) {
        auto* x = image(g);
        auto* a = op(g, "Relu", {conv(g, x, 8, 8, 1, "c1")}, "r1");
        auto* shortcut = conv(g, x, 8, 8, 7, "c3");  // the sum accumulates into it (c2 does not read it)
        auto* b = conv(g, a, 8, 8, 3, "c2");
        auto* sum = op(g, "Add", {b, shortcut}, "residual");
        auto* sig = op(g, "Sigmoid", {sum}, "sig");
        g.add_output(op(g, "Mul", {sum, sig}, "swish"));
        // a slope along H, not one per channel: no post-op by the rule (a per-channel one passes
        // the rule, and MarkSkipped marks it, but oneDNN 2.6 then has only its reference
        // convolution or matmul with a PReLU post-op, so the CPU pass leaves it: what oneDNN
        // refuses is beyond the rules, cpu/mark_skipped.hpp)
        g.add_output(op(g, "PRelu", {conv(g, x, 8, 8, 9, "c4"), g.add_constant("slope", random_tensor({6, 1}, 5))},
                        "prelu_rows"));
      },
      {"r1", "residual", "sig", "swish"});
}

TEST(CpuFusionRules, AValueReadTwiceOrAGraphOutputEndsTheChain) {
  expect_agreement(
      [](ir::Graph& g) {
        auto* x = image(g);
        auto* a = op(g, "Relu", {conv(g, x, 8, 8, 1, "c1")}, "r1");  // read by c2 and by the Add
        auto* b = conv(g, a, 8, 8, 3, "c2");
        auto* e = op(g, "Elu", {b}, "elu");  // a graph output: nothing after it joins
        g.add_output(e);
        g.add_output(op(g, "Add", {op(g, "Abs", {e}, "abs"), a}, "add2"));
      },
      {"r1", "elu"});
}

TEST(CpuFusionRules, FullyConnectedWithBiasActivationsAndFakeQuantize) {
  expect_agreement(
      [](ir::Graph& g) {
        g.opset_imports["kiln"] = 1;
        auto* x = g.add_input("x", {DType::f32, ir::PartialShape(Shape{4, 32})});
        auto* y = op(g, "MatMul", {x, g.add_constant("w", random_tensor({32, 16}, 1, 0.3f))}, "fc");
        y = op(g, "Add", {y, g.add_constant("b", random_tensor({16}, 2))}, "bias");
        auto* hs = g.add_node("HardSigmoid", {y}, 1, "hsig");
        y = hs->output(0);
        auto* fq = g.add_node("FakeQuantize",
                              {y, g.add_constant("il", Tensor::scalar<float>(0.0f)), g.add_constant("ih", Tensor::scalar<float>(1.0f)),
                               g.add_constant("ol", Tensor::scalar<float>(0.0f)), g.add_constant("oh", Tensor::scalar<float>(1.0f))},
                              1, "fq", "kiln");
        fq->attrs["levels"] = int64_t{256};
        g.add_output(op(g, "Max", {fq->output(0), g.add_constant("floor", random_tensor({4, 16}, 3))}, "max_full"));
      },
      {"bias", "hsig", "fq"});
}

TEST(CpuFusionRules, BatchNormalizationTakesOneRelu) {
  expect_agreement(
      [](ir::Graph& g) {
        ir::Value* x = image(g);
        auto c = [&](const char* n, float lo, float hi) { return g.add_constant(n, random_tensor({8}, 9, lo, hi)); };
        ir::Value* bn = op(g, "BatchNormalization", {x, c("s", 0.5f, 1.5f), c("b", -1, 1), c("m", -1, 1), c("v", 0.5f, 2)}, "bn");
        ir::Value* r = op(g, "Relu", {bn}, "relu");
        g.add_output(op(g, "Sigmoid", {r}, "after"));  // not a second post-op
      },
      {"relu"});
}

// A Swish after a convolution is its post-op except in f32 with snippets kernels and
// an output of 4096 values or more, where a Subgraph computes it (swish_leaves_convolution):
// MarkSkipped leaves it to the tokenizer then. Through the whole pipeline (cpu::Executor) at
// the ISA in use, the graph holds what the rule says, and computes what the reference does.
// After a FullyConnected a Swish stays a post-op.
TEST(CpuFusionRules, SwishAfterAConvolutionIsAPostOpUnlessF32WithSnippetsAndLarge) {
  using snippets::Isa;
  EXPECT_TRUE(cpu::swish_leaves_convolution({false, Isa::Avx512}, 4096));
  EXPECT_TRUE(cpu::swish_leaves_convolution({false, Isa::Avx512}, -1));  // symbolic: not known to be small
  EXPECT_FALSE(cpu::swish_leaves_convolution({false, Isa::Avx512}, 4095));
  EXPECT_FALSE(cpu::swish_leaves_convolution({true, Isa::Avx512}, 4096));
  EXPECT_TRUE(cpu::swish_leaves_convolution({false, Isa::Avx2}, 4096));
  EXPECT_FALSE(cpu::swish_leaves_convolution({false, Isa::Avx2}, 4095));
  EXPECT_FALSE(cpu::swish_leaves_convolution({false, std::nullopt}, 4096));

  for (const int64_t side : {16, 6}) {  // the convolution's output: 4096 values, 576
    SCOPED_TRACE(side);
    const bool large = side == 16;
    auto g = make_graph(13);
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 8, side, side})});
    auto* y = conv(*g, x, 8, 16, 1, "c");
    auto* s = op(*g, "Mul", {op(*g, "Sigmoid", {y}, "sig"), y}, "swish");
    auto* flat = g->add_node("Flatten", {s}, 1, "flat")->output(0);
    auto* fc = op(*g, "MatMul", {flat, g->add_constant("w", random_tensor({16 * side * side, 10}, 2, 0.05f))}, "fc");
    g->add_output(op(*g, "Mul", {fc, op(*g, "Sigmoid", {fc}, "fc_sig")}, "fc_swish"));
    ir::infer_shapes(*g);
    auto names = [&](const cpu::FusionTarget& t) {
      std::set<std::string> n;
      for (const ir::Node* m : cpu::mark_skipped(*g, nullptr, t)) n.insert(m->name());
      return n;
    };
    const std::set<std::string> fc_swish = {"fc_sig", "fc_swish"};
    const std::set<std::string> both = {"sig", "swish", "fc_sig", "fc_swish"};
    EXPECT_EQ(names({false, Isa::Avx512}), large ? fc_swish : both);
    EXPECT_EQ(names({true, Isa::Avx512}), both);
    EXPECT_EQ(names({false, Isa::Avx2}), large ? fc_swish : both);

    cpu::GraphOptions options;
    options.bf16 = false;
    const bool leaves = cpu::swish_leaves_convolution(cpu::fusion_target(options), 16 * side * side);
    EXPECT_TRUE(!leaves || large);
    cpu::Executor ex(g, options);
    const Tensor in = random_tensor({1, 8, side, side}, 3);
    runtime::ReferenceExecutor ref(g);
    expect_close(ref.run({in})[0], ex.run({in})[0], 1e-4, 1e-5);
    const auto& plan = ex.plan_for({{1, 8, side, side}});
    ASSERT_TRUE(plan.cpu) << plan.fallback_reason;
    const cpu::Node* c = find(*plan.cpu, "c");
    ASSERT_NE(c, nullptr) << plan.cpu->describe();
    const bool conv_took_it = std::count(c->fused.begin(), c->fused.end(), "swish") == 1;
    EXPECT_EQ(conv_took_it, !leaves) << plan.cpu->describe();
    bool subgraph_took_it = false;
    for (const auto& n : plan.cpu->nodes())
      if (n->kind() == cpu::NodeKind::Subgraph)
        subgraph_took_it |= std::count(n->fused.begin(), n->fused.end(), "swish") == 1;
    EXPECT_EQ(subgraph_took_it, leaves) << plan.cpu->describe();
  }
}

// Where kiln's own kernels compute a convolution (a model whose input shapes vary, f32, AVX2 or
// better), its Swish is its post-op whatever the output's size: the GEMM's or the depthwise
// kernel's epilogue computes it as the snippets kernel would, without another pass over the
// tensor. kiln_convolution() names the convolutions those kernels take.
TEST(CpuFusionRules, ASwishStaysWithAConvolutionThatKilnsKernelsCompute) {
  using snippets::Isa;
  EXPECT_TRUE(cpu::swish_leaves_convolution({false, Isa::Avx512, true}, 4096, false));
  EXPECT_FALSE(cpu::swish_leaves_convolution({false, Isa::Avx512, true}, 4096, true));
  EXPECT_FALSE(cpu::swish_leaves_convolution({false, Isa::Avx2, true}, -1, true));

  auto g = make_graph(13);
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 16, 8, 8})});
  auto* rgb = g->add_input("rgb", {DType::f32, ir::PartialShape(Shape{1, 3, 16, 16})});
  auto conv_node = [&](ir::Value* in, int64_t co, int64_t ci_per_group, int64_t k, int64_t group, const std::string& n) {
    auto* c = g->add_node("Conv", {in, g->add_constant(n + "_w", random_tensor({co, ci_per_group, k, k}, 1, 0.3f))}, 1, n);
    c->attrs["group"] = group;
    c->attrs["pads"] = std::vector<int64_t>(4, k / 2);
    return c;
  };
  EXPECT_TRUE(cpu::kiln_convolution(*conv_node(x, 32, 16, 1, 1, "pointwise")));
  EXPECT_TRUE(cpu::kiln_convolution(*conv_node(x, 16, 1, 3, 16, "depthwise")));
  EXPECT_TRUE(cpu::kiln_convolution(*conv_node(x, 16, 1, 5, 16, "depthwise5")));
  EXPECT_TRUE(cpu::kiln_convolution(*conv_node(rgb, 16, 3, 3, 1, "stem")));  // 27 weights an output
  EXPECT_FALSE(cpu::kiln_convolution(*conv_node(x, 16, 16, 3, 1, "dense")));  // 144: oneDNN or Winograd
  EXPECT_FALSE(cpu::kiln_convolution(*conv_node(x, 16, 4, 3, 4, "grouped")));
  auto* w = g->add_input("w", {DType::f32, ir::PartialShape(Shape{32, 16, 1, 1})});
  EXPECT_FALSE(cpu::kiln_convolution(*g->add_node("Conv", {x, w}, 1, "weights_as_input")));

  cpu::GraphOptions options;
  EXPECT_FALSE(cpu::fusion_target(options).kiln_convolutions);  // static shapes: oneDNN's kernels
  options.shapes_vary = true;
  EXPECT_EQ(cpu::fusion_target(options).kiln_convolutions, cpu::gemm_f32::available());
  options.bf16 = true;
  EXPECT_FALSE(cpu::fusion_target(options).kiln_convolutions);
}

}  // namespace test_cpu_fusion_rules

namespace test_cpu_fusion_rules {

// simple_post_op_kind, which the callers ask before building any TensorFacts, must not refuse an
// op simple_post_ops would take or explain: over a set of ops, each given facts a simple layer
// would have (f32, the host's shape, a per-channel constant as the other input), an op it
// refuses gets nullopt and no reason from simple_post_ops, and the ones it takes include every
// op simple_post_ops fuses.
TEST(CpuFusionRules, SimplePostOpKindRefusesOnlyOpsTheRuleRefusesSilently) {
  const Shape shape{1, 8, 6, 6};
  cpu::TensorFacts x;
  x.dtype = DType::f32;
  x.shape = shape;
  cpu::TensorFacts c;
  c.dtype = DType::f32;
  c.shape = Shape{1, 8, 1, 1};
  const Tensor cst = Tensor::from_vector<float>(std::vector<float>(8, 0.5f), {1, 8, 1, 1});
  c.constant = &cst;
  struct Op {
    const char* type;
    const char* domain;
    int inputs;
    bool fused;  // simple_post_ops gives post-ops for it here
  };
  const std::vector<Op> ops = {{"Relu", "", 1, true},        {"Sigmoid", "", 1, true},     {"Add", "", 2, true},
                               {"Mul", "", 2, true},         {"Sub", "", 2, true},         {"Div", "", 2, true},
                               {"Max", "", 2, true},         {"PRelu", "", 2, true},       {"HardSigmoid", "", 1, true},
                               {"Gelu", "com.microsoft", 1, true}, {"Softmax", "", 1, false}, {"Transpose", "", 1, false},
                               {"Reshape", "", 2, false},    {"MatMul", "", 2, false},     {"Conv", "", 2, false},
                               {"Concat", "", 2, false},     {"Pow", "", 2, false},        {"Where", "", 3, false}};
  for (const Op& o : ops) {
    SCOPED_TRACE(o.type);
    ir::Graph g;
    g.opset_imports[""] = 13;
    g.opset_imports["com.microsoft"] = 1;
    std::vector<ir::Value*> in;
    for (int i = 0; i < o.inputs; ++i) in.push_back(g.add_input(cat("in", i), {DType::f32, ir::PartialShape(shape)}));
    ir::Node* n = g.add_node(o.type, in, 1, "n", o.domain);
    n->output(0)->type = {DType::f32, ir::PartialShape(shape)};
    std::vector<const cpu::TensorFacts*> facts(static_cast<size_t>(o.inputs), &c);
    facts[0] = &x;
    std::string why;
    const auto post_ops = cpu::simple_post_ops(*n, facts, x, 0, 1, &why);
    EXPECT_EQ(post_ops.has_value(), o.fused);
    if (!cpu::simple_post_op_kind(*n)) {
      EXPECT_FALSE(post_ops.has_value());
      EXPECT_TRUE(why.empty()) << why;
    }
    if (o.fused) {
      EXPECT_TRUE(cpu::simple_post_op_kind(*n));
    }
  }
}

TEST(CpuFusionRules, TwoEltwisePostOpsOfOneAlgorithmMustShareTheirParameters) {
  // oneDNN 2.6 runs every eltwise post-op of one algorithm with the first one's parameters:
  // PostOpList::with refuses such a list, after merging adjacent linear ops (which may make
  // them equal, or not).
  using dnnl::algorithm;
  auto elt = [](algorithm a, float alpha, float beta, const char* from) { return cpu::eltwise_post_op(a, alpha, beta, from); };
  cpu::PostOp add;
  add.kind = cpu::PostOp::Kind::binary;
  add.alg = algorithm::binary_add;
  add.constant = Tensor(DType::f32, {1});
  add.from = "add";
  struct Case {
    std::vector<cpu::PostOp> ops;
    std::string refused;  // the names the refusal gives, "" when taken
  };
  const std::vector<Case> cases = {
      {{elt(algorithm::eltwise_clip_v2, -1, 2, "c1"), elt(algorithm::eltwise_clip_v2, 0, 1, "c2")}, "(c1, c2)"},
      {{elt(algorithm::eltwise_clip_v2, 0, 1, "c1"), elt(algorithm::eltwise_clip_v2, 0, 1, "c2")}, ""},
      // 0.5 (2 x + 1) - 0.5 = x: one linear op
      {{elt(algorithm::eltwise_linear, 2, 1, "l1"), elt(algorithm::eltwise_linear, 0.5f, -0.5f, "l2")}, ""},
      // merged into x, then a Relu, then x again: equal
      {{elt(algorithm::eltwise_linear, 2, 1, "l1"), elt(algorithm::eltwise_linear, 0.5f, -0.5f, "l2"),
        elt(algorithm::eltwise_relu, 0, 0, "r"), elt(algorithm::eltwise_linear, 1, 0, "l3")},
       ""},
      // a binary op between two linear ops keeps them apart: 2 x and 3 x differ
      {{elt(algorithm::eltwise_linear, 2, 0, "l1"), add, elt(algorithm::eltwise_linear, 3, 0, "l2")}, "(l1, l2)"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    cpu::PostOpList list;
    std::string why;
    const auto r = list.with(cases[i].ops, false, "host", &why);
    if (cases[i].refused.empty()) {
      EXPECT_TRUE(r.has_value()) << why;
    } else {
      EXPECT_FALSE(r.has_value());
      EXPECT_NE(why.find(cases[i].refused), std::string::npos) << why;
      EXPECT_NE(why.find("different parameters"), std::string::npos) << why;
    }
  }
}

}  // namespace test_cpu_fusion_rules
