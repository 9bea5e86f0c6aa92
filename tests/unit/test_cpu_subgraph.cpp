// The snippets Subgraph runtime node (src/cpu/nodes/subgraph.cpp) inside cpu::Executor plans:
// tokenized elementwise chains run as one JIT kernel, in blocked layouts between
// convolutions, and bodies the generator cannot compile fall back to the reference kernels.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <map>

#include "cpu/executor.hpp"
#include "cpu/isa.hpp"
#include "cpu_test_util.hpp"
#include "snippets/subgraph_op.hpp"
#include "cpu/emitters/x64/target_machine.hpp"

namespace test_cpu_subgraph {

using namespace kiln;
using namespace kiln::test;

namespace {

// The exec type of a Subgraph node with the snippets target of the ISA in use
// ("snippet_avx512", "snippet_avx2"), or "" where there is none (SSE4.1, or
// KILN_MAX_CPU_ISA=SSE41): the tokenizer then leaves every op on its own node.
std::string snippet_impl() {
  const auto isa = cpu::x64::best_isa();
  return isa ? "snippet_" + snippets::isa_name(*isa) : "";
}

// How many Subgraph nodes a test expects: `n` with a snippets target, none without.
size_t subgraphs_here(size_t n) { return snippet_impl().empty() ? 0 : n; }

// Runs g through a cpu::Executor (with or without tokenization) and against the reference
// executor; returns the plan's runtime graph description and the Subgraph nodes' impls.
std::vector<std::string> subgraph_impls(const std::shared_ptr<ir::Graph>& g, const std::vector<Tensor>& in,
                                        bool tokenize, size_t* reorders = nullptr, double rtol = 1e-5,
                                        double atol = 1e-6) {
  ir::infer_shapes(*g);
  auto want = runtime::ReferenceExecutor(g).run(in);
  cpu::GraphOptions o;
  if (!tokenize) o.disabled_passes = {"SnippetsTokenization"};
  cpu::Executor ex(g, o);
  auto got = ex.run(in);
  for (size_t i = 0; i < want.size(); ++i) expect_close(want[i], got[i], rtol, atol);
  std::vector<Shape> shapes;
  for (auto& t : in) shapes.push_back(t.shape());
  const auto& plan = ex.plan_for(shapes);
  std::vector<std::string> impls;
  if (reorders) *reorders = count_type(*plan.cpu, "Reorder");
  for (auto& n : plan.cpu->nodes())
    if (std::string(n->type()) == "Subgraph") impls.push_back(n->impl);
  return impls;
}

// A 3x3 convolution (pad 1) of `in` (cin channels) to 32 channels with random weights.
ir::Value* conv3x3_to_32(ir::Graph& g, ir::Value* in, int64_t cin, const char* name, uint32_t seed) {
  auto* c = g.add_node("Conv", {in, g.add_constant(std::string(name) + "_w", random_tensor({32, cin, 3, 3}, seed, 0.2f))}, 1, name);
  c->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  return c->output(0);
}

}  // namespace

TEST(CpuSubgraph, AnElementwiseChainRunsAsOneJitKernel) {
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{3, 37, 41})});
  auto* b = g->add_input("b", {DType::f32, ir::PartialShape(Shape{41})});
  auto* a = g->add_node("Add", {x, b}, 1, "add")->output(0);
  auto* s = g->add_node("Relu", {a}, 1, "relu")->output(0);
  auto* m = g->add_node("Mul", {a, s}, 1, "mul")->output(0);
  auto* t = g->add_node("Abs", {m}, 1, "abs")->output(0);
  g->add_output(t);
  std::vector<Tensor> in = {random_tensor({3, 37, 41}, 1, 3.0f), random_tensor({41}, 2)};
  auto impls = subgraph_impls(g, in, true);
  ASSERT_EQ(impls.size(), subgraphs_here(1));
  if (!impls.empty()) {
    EXPECT_EQ(impls[0], snippet_impl());
  }
  EXPECT_TRUE(subgraph_impls(g, in, false).empty());
}

TEST(CpuSubgraph, BroadcastInputsInAPermutedLayout) {
  // conv -> Mul(., s [1, 32, 1, 1], a graph input: not a post-op) -> Sigmoid -> conv. Where
  // oneDNN picks channels-last for the convolutions, the subgraph runs in it, the per-channel
  // input read plain, and adds no Reorder.
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 16, 12, 12})});
  auto* s = g->add_input("s", {DType::f32, ir::PartialShape(Shape{1, 32, 1, 1})});
  auto conv = [&](ir::Value* in, const char* name, uint32_t seed) { return conv3x3_to_32(*g, in, in == x ? 16 : 32, name, seed); };
  auto* m = g->add_node("Mul", {conv(x, "conv1", 1), s}, 1, "mul")->output(0);
  auto* sg = g->add_node("Sigmoid", {m}, 1, "sig")->output(0);
  g->add_output(conv(sg, "conv2", 2));
  size_t reorders_on = 0, reorders_off = 0;
  const std::vector<Tensor> in = {random_tensor({1, 16, 12, 12}, 3), random_tensor({1, 32, 1, 1}, 4)};
  auto impls = subgraph_impls(g, in, true, &reorders_on, 1e-4, 1e-5);
  ASSERT_EQ(impls.size(), subgraphs_here(1));
  if (impls.empty()) return;
  subgraph_impls(g, in, false, &reorders_off, 1e-4, 1e-5);
  if (impls[0].find("_permuted") != std::string::npos) {
    EXPECT_LE(reorders_on, reorders_off);
  } else {
    std::cout << "[ info ] the convolutions did not pick a permutation layout here: " << impls[0] << "\n";
  }
}

TEST(CpuSubgraph, GeluAndHardSwishPrimitivesEndAsOneSubgraphEach) {
  // the whole pipeline: the pattern library makes Gelu / HardSwish of the primitives, the
  // tokenizer gives each its own kernel
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{2, 3, 40})});
  auto c = [&](const char* n, float v) { return g->add_constant(n, Tensor::scalar<float>(v)); };
  auto* d = g->add_node("Div", {x, c("sqrt2", 1.4142135f)}, 1, "gelu_div")->output(0);
  auto* e = g->add_node("Erf", {d}, 1, "gelu_erf")->output(0);
  auto* p = g->add_node("Add", {e, c("one", 1.0f)}, 1, "gelu_add")->output(0);
  auto* m = g->add_node("Mul", {x, p}, 1, "gelu_mul")->output(0);
  g->add_output(g->add_node("Mul", {m, c("half", 0.5f)}, 1, "gelu_mul2")->output(0));
  auto* a = g->add_node("Add", {x, c("three", 3.0f)}, 1, "hs_add")->output(0);
  auto* cl = g->add_node("Clip", {a, c("zero", 0.0f), c("six", 6.0f)}, 1, "hs_clip")->output(0);
  auto* hm = g->add_node("Mul", {x, cl}, 1, "hs_mul")->output(0);
  g->add_output(g->add_node("Div", {hm, c("six_b", 6.0f)}, 1, "hs_div")->output(0));
  auto impls = subgraph_impls(g, {random_tensor({2, 3, 40}, 6, 4.0f)}, true, nullptr, 1e-5, 1e-6);
  ASSERT_EQ(impls.size(), subgraphs_here(2));
  for (const auto& i : impls) EXPECT_EQ(i.rfind("snippet_", 0), 0u) << i;
}

TEST(CpuSubgraph, BetweenConvolutionsItKeepsTheirLayout) {
  // conv -> x * relu(x) (conv's output read twice: not a post-op) -> abs -> conv
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 16, 12, 12})});
  auto conv = [&](ir::Value* in, const char* name, uint32_t seed) { return conv3x3_to_32(*g, in, in == x ? 16 : 32, name, seed); };
  auto* c1 = conv(x, "conv1", 1);
  auto* sw = g->add_node("Mul", {c1, g->add_node("Relu", {c1}, 1, "relu")->output(0)}, 1, "mul")->output(0);
  auto* t = g->add_node("Abs", {sw}, 1, "abs")->output(0);
  g->add_output(conv(t, "conv2", 2));
  size_t reorders_on = 0, reorders_off = 0;
  // (two convolutions around it: their summation order differs from the reference's)
  auto impls = subgraph_impls(g, {random_tensor({1, 16, 12, 12}, 3)}, true, &reorders_on, 1e-4, 1e-5);
  ASSERT_EQ(impls.size(), subgraphs_here(1));
  if (impls.empty()) return;
  EXPECT_EQ(impls[0], snippet_impl() + "_blocked");
  subgraph_impls(g, {random_tensor({1, 16, 12, 12}, 3)}, false, &reorders_off, 1e-4, 1e-5);
  EXPECT_LE(reorders_on, reorders_off);  // the subgraph adds no layout conversions
}

// A residual block's tail: SiLU of a 3x3 convolution plus a 1x1 convolution's output. On
// AVX-512 the 3x3 one runs Winograd, which writes channel blocks (nChw16c) while the 1x1 one
// writes channels-last: the Subgraph runs in one of the two layouts (a tie goes to the dim
// permutation) and the graph converts the other input, instead of converting both inputs and
// its output to plain. Elsewhere both write the same layout. Either way: not plain, at most
// one input converted, and the output read as it is by the next convolution. (The 1x1
// convolution's output is also a graph output, so the Add is not its sum post-op.)
TEST(CpuSubgraph, InputsInTwoLayoutsRunInOneOfThem) {
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 16, 32, 32})});
  auto* c3 = conv3x3_to_32(*g, x, 16, "conv3x3", 1);
  auto* c1 = g->add_node("Conv", {x, g->add_constant("w1", random_tensor({32, 16, 1, 1}, 2, 0.2f))}, 1, "conv1x1")->output(0);
  auto* silu = g->add_node("Mul", {c3, g->add_node("Sigmoid", {c3}, 1, "sig")->output(0)}, 1, "silu")->output(0);
  auto* sum = g->add_node("Add", {silu, c1}, 1, "add")->output(0);
  g->add_output(g->add_node("Conv", {sum, g->add_constant("w2", random_tensor({8, 32, 1, 1}, 3, 0.2f))}, 1, "out")->output(0));
  g->add_output(c1);  // read twice: the Add stays with the Subgraph, not the 1x1 convolution's sum
  const std::vector<Tensor> in = {random_tensor({1, 16, 32, 32}, 4)};
  auto impls = subgraph_impls(g, in, true, nullptr, 1e-4, 1e-5);  // against the reference
  if (subgraphs_here(1) == 0) return;
  ASSERT_EQ(impls.size(), 1u);
  EXPECT_NE(impls[0], snippet_impl()) << "the Subgraph ran plain";

  cpu::Executor ex(g);
  ex.run(in);
  const auto& plan = ex.plan_for({{1, 16, 32, 32}});
  ASSERT_TRUE(plan.cpu) << plan.fallback_reason;
  std::map<const cpu::Edge*, const cpu::Node*> producer;
  for (auto& n : plan.cpu->nodes())
    for (const cpu::Edge* e : n->outputs) producer[e] = n.get();
  const cpu::Node* sg = nullptr;
  for (auto& n : plan.cpu->nodes())
    if (n->kind() == cpu::NodeKind::Subgraph) sg = n.get();
  ASSERT_NE(sg, nullptr);
  size_t converted = 0;
  for (const cpu::Edge* e : sg->inputs) converted += producer.count(e) && producer[e]->kind() == cpu::NodeKind::Reorder;
  EXPECT_LE(converted, 1u) << plan.cpu->describe();
  for (auto& n : plan.cpu->nodes()) {
    if (n->kind() != cpu::NodeKind::Reorder) continue;
    EXPECT_NE(n->inputs.at(0), sg->outputs.at(0)) << "the Subgraph's output is converted\n" << plan.cpu->describe();
  }
}

TEST(CpuSubgraph, TranscendentalChainsBecomeOneKernel) {
  // Sigmoid -> Tanh -> Greater -> Where: one JIT kernel (bools stay inside it)
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{2, 64})});
  auto* a = g->add_node("Sigmoid", {x}, 1, "sig")->output(0);
  auto* t = g->add_node("Tanh", {a}, 1, "tanh")->output(0);
  auto* c = g->add_node("Greater", {t, x}, 1, "gt")->output(0);
  g->add_output(g->add_node("Where", {c, t, x}, 1, "where")->output(0));
  auto impls = subgraph_impls(g, {random_tensor({2, 64}, 9)}, true);
  ASSERT_EQ(impls.size(), subgraphs_here(1));
  if (!impls.empty()) {
    EXPECT_EQ(impls[0], snippet_impl());
  }
}

TEST(CpuSubgraph, BodiesTheGeneratorCannotCompileRunOnTheReferenceKernels) {
  // a Subgraph node made by hand with Sin, which the generator has no emitter for
  auto body = std::make_shared<ir::Graph>();
  body->opset_imports[""] = 13;
  auto* a = body->add_input("a", {DType::f32, ir::PartialShape(Shape{4, 9})});
  auto* sp = body->add_node("Sin", {a}, 1, "sin")->output(0);
  body->add_output(body->add_node("Neg", {sp}, 1, "neg")->output(0));
  auto g = make_graph();
  g->opset_imports["kiln"] = 1;
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{4, 9})});
  ir::Node* n = g->add_node(snippets::kSubgraphOp, {x}, 1, "sub", snippets::kSubgraphDomain);
  n->attrs[snippets::kBodyAttr] = ir::Attribute(body);
  g->add_output(n->output(0));
  auto impls = subgraph_impls(g, {random_tensor({4, 9}, 4, 3.0f)}, true);
  ASSERT_EQ(impls.size(), 1u);
  EXPECT_EQ(impls[0], "ref:Subgraph");
}

// Attention-style scores: Div by a scale, Add a [B, 1, 1, S] mask, Softmax over S, then a
// Mul: one Subgraph with three inner loops and a scratch row, matching the reference.
// LogSoftmax too; an opset 13 Softmax over another axis stays a Softmax node.
TEST(CpuSubgraph, SoftmaxWithItsNeighboursIsOneKernel) {
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    SCOPED_TRACE(op);
    auto g = make_graph();
    auto* q = g->add_input("q", {DType::f32, ir::PartialShape(Shape{2, 4, 24, 24})});
    auto* mask = g->add_input("mask", {DType::f32, ir::PartialShape(Shape{2, 1, 1, 24})});
    auto* scale = g->add_constant("scale", Tensor::from_vector<float>({8.0f}, Shape{}));
    auto* d = g->add_node("Div", {q, scale}, 1, "div")->output(0);
    auto* a = g->add_node("Add", {d, mask}, 1, "add")->output(0);
    auto* s = g->add_node(op, {a}, 1, "softmax")->output(0);
    auto* m = g->add_node("Mul", {s, q}, 1, "mul")->output(0);
    g->add_output(m);
    std::vector<Tensor> in = {random_tensor({2, 4, 24, 24}, 3, 10.0f), random_tensor({2, 1, 1, 24}, 4, 2.0f)};
    auto impls = subgraph_impls(g, in, true);
    ASSERT_EQ(impls.size(), subgraphs_here(1));
    if (!impls.empty()) {
      EXPECT_EQ(impls[0], snippet_impl());
    }
    EXPECT_TRUE(subgraph_impls(g, in, false).empty());
  }
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{3, 5, 7})});
  auto* n = g->add_node("Neg", {x}, 1, "neg")->output(0);
  ir::Node* sm = g->add_node("Softmax", {n}, 1, "softmax");
  sm->attrs["axis"] = ir::Attribute(int64_t{1});
  auto* e = g->add_node("Exp", {sm->output(0)}, 1, "exp")->output(0);
  g->add_output(e);
  EXPECT_TRUE(subgraph_impls(g, {random_tensor({3, 5, 7}, 5)}, true).empty());  // neg and exp alone: not worth a kernel
}

// conv -> Mul(., s [1, 32, 1, 1]) + t [1, 1, 12, 12] -> Sigmoid -> conv, where the convolutions
// pick a channel-blocked layout (nChw8c with oneDNN capped at AVX2): the subgraph runs in it, the per-channel
// input as plain vectors, the channel-constant one broadcast over each block, adding no Reorder.
TEST(CpuSubgraph, BroadcastInputsInAChannelBlockedLayout) {
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 16, 12, 12})});
  auto* s = g->add_input("s", {DType::f32, ir::PartialShape(Shape{1, 32, 1, 1})});
  auto* t = g->add_input("t", {DType::f32, ir::PartialShape(Shape{1, 1, 12, 12})});
  auto conv = [&](ir::Value* in, const char* name, uint32_t seed) { return conv3x3_to_32(*g, in, in == x ? 16 : 32, name, seed); };
  auto* c1 = conv(x, "conv1", 1);
  auto* m = g->add_node("Mul", {c1, s}, 1, "mul")->output(0);
  auto* a = g->add_node("Add", {m, t}, 1, "add")->output(0);
  auto* sg = g->add_node("Sigmoid", {a}, 1, "sig")->output(0);
  g->add_output(conv(sg, "conv2", 2));
  size_t reorders_on = 0, reorders_off = 0;
  const std::vector<Tensor> in = {random_tensor({1, 16, 12, 12}, 3), random_tensor({1, 32, 1, 1}, 4), random_tensor({1, 1, 12, 12}, 5)};
  auto impls = subgraph_impls(g, in, true, &reorders_on, 1e-4, 1e-5);
  ASSERT_EQ(impls.size(), subgraphs_here(1));
  if (impls.empty()) return;
  subgraph_impls(g, in, false, &reorders_off, 1e-4, 1e-5);
  // AVX-512 oneDNN picks channels-last here (the permuted path); AVX2 nChw8c
  EXPECT_TRUE(impls[0] == snippet_impl() + "_blocked" || impls[0] == snippet_impl() + "_permuted") << impls[0];
  if (!cpu::isa_at_least(cpu::Isa::avx512_core)) {
    EXPECT_EQ(impls[0], snippet_impl() + "_blocked");
  }
  EXPECT_LE(reorders_on, reorders_off);
}

// A Transpose of a graph input that keeps the last dim last (a head split, [B, S, H, D] ->
// [B, H, S, D]) joins the Subgraph of the ops reading it: the kernel reads the input's rows in
// the permuted order. One that moves the last dim stays a Transpose node.
TEST(CpuSubgraph, ATransposeKeepingTheLastDimIsReadByTheKernel) {
  for (bool keeps_last : {true, false}) {
    SCOPED_TRACE(keeps_last ? "perm [0, 2, 1, 3]" : "perm [0, 1, 3, 2]");
    auto g = make_graph();
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{2, 8, 4, 32})});
    const Shape ys = keeps_last ? Shape{2, 4, 8, 32} : Shape{2, 8, 32, 4};
    auto* y = g->add_input("y", {DType::f32, ir::PartialShape(ys)});
    ir::Node* t = g->add_node("Transpose", {x}, 1, "transpose");
    t->attrs["perm"] = keeps_last ? std::vector<int64_t>{0, 2, 1, 3} : std::vector<int64_t>{0, 1, 3, 2};
    auto* a = g->add_node("Add", {t->output(0), y}, 1, "add")->output(0);
    g->add_output(g->add_node("Relu", {a}, 1, "relu")->output(0));
    ir::infer_shapes(*g);
    const std::vector<Tensor> in = {random_tensor({2, 8, 4, 32}, 7), random_tensor(ys, 8)};
    auto want = runtime::ReferenceExecutor(g).run(in);
    cpu::Executor ex(g, cpu::GraphOptions{});
    expect_close(want[0], ex.run(in)[0], 0.0, 0.0);
    const auto& plan = ex.plan_for({in[0].shape(), in[1].shape()});
    size_t subgraphs = 0;
    for (auto& n : plan.cpu->nodes()) {
      if (std::string(n->type()) != "Subgraph") continue;
      ++subgraphs;
      EXPECT_EQ(n->impl, snippet_impl());
      const bool has_t = std::find(n->fused.begin(), n->fused.end(), "transpose") != n->fused.end();
      EXPECT_EQ(has_t, keeps_last);
    }
    EXPECT_EQ(subgraphs, subgraphs_here(1));
  }
}

}  // namespace test_cpu_subgraph
