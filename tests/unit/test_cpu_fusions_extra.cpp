// The remaining fusions of spec/cpu_plugin_fusions.md on small hand-built graphs:
//  - CpuFusionPoolFq: Pooling -> FakeQuantize as post-ops (FusePoolingAndFakeQuantize), and
//    FakeQuantize as a simple layer of Convolution / FullyConnected chains;
//  - CpuFusionGroupConv: Split / Slices -> N Conv -> Concat becomes one grouped Conv
//    (MergeGroupConvolution, an ir::Graph pass run before lowering);
//  - CpuFusionDw: the experiment behind FuseConvolutionAndDWConvolution (what oneDNN 2.6
//    gives a 1x1 convolution with a depthwise post-op on this CPU).
// Structure, fused names, the pass log and numerics against the reference executor.
//
// FakeQuantize numerics: the post-op chain runs in f32, the reference in double, so an input
// within f32 rounding of a rounding tie may land one level away (documented in
// cpu/passes/fuse_util.hpp). The random tests therefore assert first that no FakeQuantize
// input lies near a tie (the seeds are fixed, so this holds or fails deterministically), and
// one test uses a value grid that has no ties at all.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>

#include "cpu/dnnl_util.hpp"
#include "cpu/graph_optimizer.hpp"
#include "cpu_test_util.hpp"
#include "transforms/merge_group_convolution.hpp"

namespace test_cpu_fusions_extra {

using namespace kiln;
using namespace kiln::test;

namespace {

Tensor from_values(const std::vector<float>& v, Shape s) {
  Tensor t(DType::f32, std::move(s));
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

// ---- FakeQuantize helpers ----

// Ranges of a FakeQuantize: one value each, or one per channel.
struct FqRanges {
  std::vector<float> il, ih, ol, oh;
  int64_t levels = 256;
  size_t channels() const { return il.size(); }
};

// QuantizeLinear-like ranges per channel: scale s_c, zero point zp: [(0 - zp) s, (255 - zp) s].
FqRanges u8_ranges(const std::vector<float>& scales, int zp) {
  FqRanges r;
  for (float s : scales) {
    r.il.push_back(static_cast<float>(-zp) * s);
    r.ih.push_back(static_cast<float>(255 - zp) * s);
  }
  r.ol = r.il;
  r.oh = r.ih;
  return r;
}

// Range constant shape: [] for one value, `per_channel_shape` otherwise.
ir::Value* range(ir::Graph& g, const std::string& name, const std::vector<float>& v, const Shape& per_channel_shape) {
  if (v.size() == 1) return g.add_constant(name, Tensor::scalar<float>(v[0]));
  return g.add_constant(name, from_values(v, per_channel_shape));
}

ir::Value* fake_quantize(ir::Graph& g, ir::Value* x, const FqRanges& r, const std::string& name,
                         const Shape& per_channel_shape) {
  g.opset_imports["kiln"] = 1;
  auto* fq = g.add_node("FakeQuantize",
                        {x, range(g, name + "_il", r.il, per_channel_shape), range(g, name + "_ih", r.ih, per_channel_shape),
                         range(g, name + "_ol", r.ol, per_channel_shape), range(g, name + "_oh", r.oh, per_channel_shape)},
                        1, name, "kiln");
  fq->attrs["levels"] = r.levels;
  return fq->output(0);
}

// The smallest distance, in levels, of an in-range FakeQuantize input (channel along
// `axis`) from a rounding tie of the reference (0.5 = as far as can be).
double tie_margin(const Tensor& x, const FqRanges& r, int axis) {
  const Shape& s = x.shape();
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(axis) + 1; d < s.size(); ++d) inner *= s[d];
  const int64_t C = s[static_cast<size_t>(axis)];
  const double L = static_cast<double>(r.levels - 1);
  double margin = 0.5;
  auto p = x.to_f64();
  for (size_t i = 0; i < p.size(); ++i) {
    const size_t c = r.channels() == 1 ? 0 : static_cast<size_t>((static_cast<int64_t>(i) / inner) % C);
    const double il = r.il[c], ih = r.ih[c];
    if (p[i] <= il || p[i] >= ih) continue;
    const double t = (p[i] - il) * L / (ih - il);
    margin = std::min(margin, std::fabs(t - std::floor(t) - 0.5));
  }
  return margin;
}

// Runs `g` without its FakeQuantize (output `pre` instead) on the reference executor.
Tensor reference_values(const std::shared_ptr<ir::Graph>& g, const std::vector<Tensor>& inputs) {
  ir::infer_shapes(*g);
  runtime::ReferenceExecutor ref(g);
  return ref.run(inputs)[0];
}

ir::Value* pool(ir::Graph& g, const char* op, ir::Value* x, const std::string& name, int64_t k, int64_t stride,
                int64_t pad) {
  auto* p = g.add_node(op, {x}, 1, name);
  if (std::string(op) == "MaxPool" || std::string(op) == "AveragePool") {
    p->attrs["kernel_shape"] = std::vector<int64_t>{k, k};
    p->attrs["strides"] = std::vector<int64_t>{stride, stride};
    p->attrs["pads"] = std::vector<int64_t>{pad, pad, pad, pad};
  }
  return p->output(0);
}

ir::Value* conv(ir::Graph& g, ir::Value* x, int64_t ic, int64_t oc, const std::string& name, uint32_t seed,
                int64_t k = 3, int64_t stride = 1, bool bias = true) {
  std::vector<ir::Value*> in = {x, g.add_constant(name + "_w", random_tensor({oc, ic, k, k}, seed, 0.3f))};
  if (bias) in.push_back(g.add_constant(name + "_b", random_tensor({oc}, seed + 1, 0.1f)));
  auto* c = g.add_node("Conv", in, 1, name);
  const int64_t p = k / 2;
  c->attrs["pads"] = std::vector<int64_t>{p, p, p, p};
  c->attrs["strides"] = std::vector<int64_t>{stride, stride};
  return c->output(0);
}

// Builds the graph with (or, for the tie check, without) the FakeQuantize at the end.
using Builder = std::function<std::shared_ptr<ir::Graph>(bool with_fq)>;

// Random inputs for one seed.
using Inputs = std::function<std::vector<Tensor>(uint32_t seed)>;

// With the inputs of the first seed (1, 2, ...) for which no FakeQuantize input of the
// graph lies within 1e-3 of a level step of a rounding tie (checked on the graph without
// its FakeQuantize, on the reference executor), the fused graph matches the reference.
// Returns the cpu::Graph.
std::unique_ptr<cpu::Graph> check_fq(const Builder& build, const Inputs& inputs, const FqRanges& r, int axis,
                                     transforms::PassLog& log) {
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    auto in = inputs(seed);
    if (tie_margin(reference_values(build(false), in), r, axis) > 1e-3)
      return compare_with_reference(build(true), in, fusing(&log));
  }
  ADD_FAILURE() << "no seed in 1..200 gives FakeQuantize inputs away from rounding ties";
  return nullptr;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// FusePoolingAndFakeQuantize

TEST(CpuFusionPoolFq, MaxPoolWithOneRangeForAllBecomesPostOps) {
  FqRanges r{{-1.0f}, {1.2f}, {-0.9f}, {1.3f}, 256};  // 0 is not on the grid
  Builder build = [&](bool with_fq) {
    auto g = make_graph();
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{2, 16, 9, 9})});
    auto* y = pool(*g, "MaxPool", x, "pool", 3, 2, 1);
    g->add_output(with_fq ? fake_quantize(*g, y, r, "fq", {}) : y);
    return g;
  };
  transforms::PassLog log;
  auto cg = check_fq(build, [](uint32_t s) { return std::vector<Tensor>{random_tensor({2, 16, 9, 9}, s, -1.5f, 1.5f)}; }, r, 1, log);
  ASSERT_NE(cg, nullptr);
  ASSERT_EQ(cg->nodes().size(), 1u + count_type(*cg, "Reorder")) << cg->describe() << explain(log);
  const cpu::Node* p = find(*cg, "pool");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->fused, (std::vector<std::string>{"fq"}));
  EXPECT_TRUE(log_has(log, true, "pool -> fq: FakeQuantize as 7 post-ops")) << explain(log);
  EXPECT_EQ(count_type(*cg, "Reference"), 0u);
  expect_jit(*cg, "Pooling");
}

TEST(CpuFusionPoolFq, AveragePoolAfterAConvolutionWithPerChannelRanges) {
  // u8 QDQ-like ranges with zero point 128 (0 on the grid: ties decided there), one scale
  // per channel; the pooling reads the convolution's blocked layout
  std::vector<float> scales;
  for (int c = 0; c < 20; ++c) scales.push_back(0.004f + 0.0005f * static_cast<float>(c));
  FqRanges r = u8_ranges(scales, 128);
  Builder build = [&](bool with_fq) {
    auto g = make_graph();
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 4, 11, 11})});
    auto* c = conv(*g, x, 4, 20, "conv", 3);
    auto* y = pool(*g, "AveragePool", c, "pool", 3, 2, 1);
    g->add_output(with_fq ? fake_quantize(*g, y, r, "fq", {1, 20, 1, 1}) : y);
    return g;
  };
  transforms::PassLog log;
  auto cg = check_fq(build, [](uint32_t s) { return std::vector<Tensor>{random_tensor({1, 4, 11, 11}, s)}; }, r, 1, log);
  ASSERT_NE(cg, nullptr);
  const cpu::Node* p = find(*cg, "pool");
  ASSERT_NE(p, nullptr) << cg->describe();
  EXPECT_EQ(p->fused, (std::vector<std::string>{"fq"})) << explain(log);
  // the pooling reads the convolution's output in the layout the convolution picked
  // (blocked with AVX2 / AVX-512, plain with SSE4.1's gemm convolution)
  EXPECT_EQ(p->inputs[0], find(*cg, "conv")->outputs.at(0)) << cg->describe();
  EXPECT_EQ(log.count_applied("FusePoolingAndFakeQuantize"), 1u);
  EXPECT_EQ(count_type(*cg, "Reference"), 0u) << cg->describe();
  expect_jit(*cg, "Pooling");
}

TEST(CpuFusionPoolFq, GlobalAveragePoolWithFewLevelsAndAnInvertedOutputRange) {
  FqRanges r{{0.05f, -0.3f, 0.1f}, {0.9f, 0.4f, 1.1f}, {2.0f}, {-1.0f}, 16};
  Builder build = [&](bool with_fq) {
    auto g = make_graph();
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{4, 3, 5, 6})});
    auto* y = pool(*g, "GlobalAveragePool", x, "gap", 0, 0, 0);
    g->add_output(with_fq ? fake_quantize(*g, y, r, "fq", {3, 1, 1}) : y);
    return g;
  };
  transforms::PassLog log;
  auto cg = check_fq(build, [](uint32_t s) { return std::vector<Tensor>{random_tensor({4, 3, 5, 6}, s, -0.6f, 1.4f)}; }, r, 1, log);
  ASSERT_NE(cg, nullptr);
  EXPECT_EQ(find(*cg, "gap")->fused, (std::vector<std::string>{"fq"})) << explain(log);
  EXPECT_EQ(cg->nodes().size(), 1u) << cg->describe();
}

TEST(CpuFusionPoolFq, TieFreeValueGridMatchesExactly) {
  // Per channel a power-of-two level step; even channels have 0 on the grid (anchored
  // ties), odd ones not. Inputs il + step * (8j + 1) / 8 (also outside the range): an
  // average of n such values sits (n mod 8) / (8n) of a step off the grid, never on a tie
  // for windows of 9, 6 or 4 values; max pooling keeps the 1/8 offset.
  const int C = 8;
  FqRanges r;
  std::vector<float> step(C);
  for (int c = 0; c < C; ++c) {
    step[c] = std::ldexp(1.0f, -(3 + c % 4));
    const float low = c % 2 == 0 ? -128.0f : -100.5f;
    r.il.push_back(low * step[c]);
    r.ih.push_back((low + 255.0f) * step[c]);
    r.ol.push_back(-64.0f * step[c]);
    r.oh.push_back(191.0f * step[c]);
  }
  Tensor x(DType::f32, {1, C, 10, 10});
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> m(-3, 258);
  for (int c = 0; c < C; ++c)
    for (int i = 0; i < 100; ++i)
      x.data<float>()[c * 100 + i] = r.il[c] + step[c] * (static_cast<float>(m(rng)) + 0.125f);
  for (const char* op : {"AveragePool", "MaxPool"}) {
    auto g = make_graph();
    auto* in = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, C, 10, 10})});
    auto* y = pool(*g, op, in, "pool", 3, 1, 1);
    g->add_output(fake_quantize(*g, y, r, "fq", {1, C, 1, 1}));
    transforms::PassLog log;
    CompareOptions o = fusing(&log);
    o.rtol = 0;
    o.atol = 1e-6;
    auto cg = compare_with_reference(g, {x}, o);
    EXPECT_EQ(find(*cg, "pool")->fused, (std::vector<std::string>{"fq"})) << op << "\n" << explain(log);
  }
}

TEST(CpuFusionPoolFq, ConvolutionAndFullyConnectedChainsTakeFakeQuantizeAsASimpleLayer) {
  std::vector<float> scales;
  for (int c = 0; c < 16; ++c) scales.push_back(0.01f + 0.001f * static_cast<float>(c));
  FqRanges rc = u8_ranges(scales, 0);  // after a ReLU: [0, 255 s]
  FqRanges rf{{-2.0f}, {2.0f}, {-2.0f}, {2.0f}, 256};
  Builder build_conv = [&](bool with_fq) {
    auto g = make_graph();
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 4, 7, 7})});
    auto* y = g->add_node("Relu", {conv(*g, x, 4, 16, "conv", 1)}, 1, "relu")->output(0);
    g->add_output(with_fq ? fake_quantize(*g, y, rc, "fq", {16, 1, 1}) : y);
    return g;
  };
  transforms::PassLog log;
  auto cg = check_fq(build_conv, [](uint32_t s) { return std::vector<Tensor>{random_tensor({1, 4, 7, 7}, s)}; }, rc, 1, log);
  ASSERT_NE(cg, nullptr);
  EXPECT_EQ(find(*cg, "conv")->fused, (std::vector<std::string>{"relu", "fq"})) << explain(log);
  EXPECT_TRUE(log_has(log, true, "conv -> fq: FakeQuantize as a post-op")) << explain(log);
  EXPECT_EQ(count_type(*cg, "Reference"), 0u);
  expect_jit(*cg, "Convolution");

  Builder build_fc = [&](bool with_fq) {
    auto g = make_graph();
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{3, 16})});
    auto* mm = g->add_node("MatMul", {x, g->add_constant("w", random_tensor({16, 8}, 1, 0.5f))}, 1, "fc");
    auto* y = g->add_node("Add", {mm->output(0), g->add_constant("bias", random_tensor({8}, 2))}, 1, "bias_add")->output(0);
    g->add_output(with_fq ? fake_quantize(*g, y, rf, "fq", {}) : y);
    return g;
  };
  transforms::PassLog log2;
  auto cf = check_fq(build_fc, [](uint32_t s) { return std::vector<Tensor>{random_tensor({3, 16}, s)}; }, rf, 1, log2);
  ASSERT_NE(cf, nullptr);
  EXPECT_EQ(find(*cf, "fc")->fused, (std::vector<std::string>{"bias_add", "fq"})) << explain(log2);
  EXPECT_EQ(cf->nodes().size(), 1u) << cf->describe();
  expect_jit(*cf, "FullyConnected");
}

TEST(CpuFusionPoolFq, NotWhenThePoolingOutputHasAnotherReaderOrIsAGraphOutput) {
  FqRanges r{{-1.0f}, {1.0f}, {-1.0f}, {1.0f}, 256};
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 8, 6, 6})});
  auto* p1 = pool(*g, "MaxPool", x, "pool1", 2, 2, 0);
  g->add_output(fake_quantize(*g, p1, r, "fq1", {}));
  g->add_output(g->add_node("Relu", {p1}, 1, "relu")->output(0));
  auto* p2 = pool(*g, "AveragePool", x, "pool2", 2, 2, 0);
  g->add_output(p2);
  g->add_output(fake_quantize(*g, p2, r, "fq2", {}));
  transforms::PassLog log;
  auto cg = compare_with_reference(g, {random_tensor({1, 8, 6, 6}, 9)}, fusing(&log));
  EXPECT_TRUE(find(*cg, "pool1")->fused.empty());
  EXPECT_TRUE(find(*cg, "pool2")->fused.empty());
  EXPECT_TRUE(log_has(log, false, "pool1 -> fq1: fq1 not fused: pool1's output is also read by relu")) << explain(log);
  EXPECT_TRUE(log_has(log, false, "pool2 -> fq2: fq2 not fused: pool2's output is a graph output")) << explain(log);
  EXPECT_EQ(count_type(*cg, "FakeQuantize"), 2u) << "unfused, on their own node";
  EXPECT_EQ(count_type(*cg, "Reference"), 0u);
}

TEST(CpuFusionPoolFq, NotWhenTheRangesAreNotConstantPerChannelOrIncreasing) {
  auto g = make_graph();
  g->opset_imports["kiln"] = 1;
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 4, 6, 6})});
  auto* lo = g->add_input("lo", {DType::f32, ir::PartialShape(Shape{})});
  auto fq = [&](ir::Value* in, std::vector<ir::Value*> ranges, const std::string& name) {
    ranges.insert(ranges.begin(), in);
    auto* n = g->add_node("FakeQuantize", ranges, 1, name, "kiln");
    n->attrs["levels"] = int64_t(256);
    g->add_output(n->output(0));
  };
  auto c = [&](const std::string& name, float v) { return g->add_constant(name, Tensor::scalar<float>(v)); };
  // input_low from the graph's input
  fq(pool(*g, "MaxPool", x, "pool1", 2, 2, 0), {lo, c("h1", 1), c("l1", -1), c("o1", 1)}, "fq1");
  // input_high one value per column, not per channel
  fq(pool(*g, "MaxPool", x, "pool2", 2, 2, 0),
     {c("l2", -1), g->add_constant("h2", random_tensor({1, 1, 1, 3}, 4, 1.0f, 2.0f)), c("ol2", -1), c("oh2", 1)}, "fq2");
  // input_low above input_high
  fq(pool(*g, "MaxPool", x, "pool3", 2, 2, 0), {c("l3", 1), c("h3", -1), c("ol3", -1), c("oh3", 1)}, "fq3");
  transforms::PassLog log;
  auto cg = compare_with_reference(g, {random_tensor({1, 4, 6, 6}, 1), Tensor::scalar<float>(-0.5f)}, fusing(&log));
  for (const char* p : {"pool1", "pool2", "pool3"}) EXPECT_TRUE(find(*cg, p)->fused.empty()) << p;
  EXPECT_TRUE(log_has(log, false, "pool1 -> fq1: fq1 not fused: its input_low 'lo' is not a constant")) << explain(log);
  EXPECT_TRUE(log_has(log, false, "fq2 not fused: its input_high 'h2' [1,1,1,3] is neither one value nor one per channel"))
      << explain(log);
  EXPECT_TRUE(log_has(log, false, "fq3 not fused: its input_low 1 is not below its input_high -1")) << explain(log);
  EXPECT_EQ(log.count_applied("FusePoolingAndFakeQuantize"), 0u);
}

TEST(CpuFusionPoolFq, DisablingThePassKeepsTheFakeQuantizeNode) {
  FqRanges r{{-1.0f}, {1.0f}, {-1.0f}, {1.0f}, 256};
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 8, 6, 6})});
  g->add_output(fake_quantize(*g, pool(*g, "MaxPool", x, "pool", 2, 2, 0), r, "fq", {}));
  CompareOptions o = fusing(nullptr);
  o.disabled_passes = {"FusePoolingAndFakeQuantize"};
  auto cg = compare_with_reference(g, {random_tensor({1, 8, 6, 6}, 2)}, o);
  EXPECT_TRUE(find(*cg, "pool")->fused.empty());
  EXPECT_EQ(count_type(*cg, "FakeQuantize"), 1u);
  const auto names = cpu::known_pass_names();
  for (const char* n : {"FusePoolingAndFakeQuantize", "MergeGroupConvolution"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
}

// ---------------------------------------------------------------------------------------
// MergeGroupConvolution

namespace {

// Like compare_with_reference, but the ir::Graph passes run before lowering (as in
// cpu::Executor): specialise, run_ir_passes, cpu::Graph.
std::unique_ptr<cpu::Graph> compare_with_ir_passes(const std::shared_ptr<ir::Graph>& g, const std::vector<Tensor>& inputs,
                                                   transforms::PassLog* log,
                                                   const std::set<std::string>& disabled = {}) {
  ir::infer_shapes(*g);
  runtime::ReferenceExecutor ref(g);
  auto want = ref.run(inputs);
  auto copy = g->clone();
  std::vector<Shape> shapes;
  for (auto& t : inputs) shapes.push_back(t.shape());
  EXPECT_TRUE(transforms::specialize_shapes(*copy, shapes).all_static);
  // the transformer patterns have nothing to do here
  std::set<std::string> off = disabled;
  off.insert("TransformerPatterns");
  cpu::run_ir_passes(*copy, off, log);
  auto cg = std::make_unique<cpu::Graph>(copy, cpu::GraphOptions{disabled, log});
  auto got = cg->run(inputs);
  EXPECT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) expect_close(want[i], got[i], 1e-4, 1e-5);
  EXPECT_EQ(cg->output_edges().size(), g->outputs().size());
  return cg;
}

ir::Node* split(ir::Graph& g, ir::Value* x, int64_t parts, const std::string& name, int64_t axis = 1) {
  std::vector<std::string> outs;
  for (int64_t i = 0; i < parts; ++i) outs.push_back(name + "_out" + std::to_string(i));
  auto* s = g.add_node("Split", {x}, outs, name);
  s->attrs["axis"] = axis;
  return s;
}

ir::Value* slice(ir::Graph& g, ir::Value* x, int64_t begin, int64_t end, const std::string& name) {
  return g
      .add_node("Slice",
                {x, g.add_constant(name + "_s", Tensor::from_vector<int64_t>({begin}, {1})),
                 g.add_constant(name + "_e", Tensor::from_vector<int64_t>({end}, {1})),
                 g.add_constant(name + "_a", Tensor::from_vector<int64_t>({1}, {1}))},
                1, name)
      ->output(0);
}

ir::Value* concat(ir::Graph& g, const std::vector<ir::Value*>& in, const std::string& name, int64_t axis = 1) {
  auto* c = g.add_node("Concat", in, 1, name);
  c->attrs["axis"] = axis;
  return c->output(0);
}

// The one Convolution of g, with its ir node's group.
int64_t group_of(const cpu::Graph& g) {
  for (auto& n : g.nodes())
    if (std::string(n->type()) == "Convolution") return n->source->attr_i("group", 1);
  return 0;
}

}  // namespace

TEST(CpuFusionGroupConv, SplitThreeConvsConcatBecomeOneGroupedConvolution) {
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{2, 12, 8, 8})});
  auto* s = split(*g, x, 3, "split");
  std::vector<ir::Value*> ys;
  for (int i = 0; i < 3; ++i) ys.push_back(conv(*g, s->output(i), 4, 6, "conv" + std::to_string(i), 10 * i + 1));
  g->add_output(g->add_node("Relu", {concat(*g, ys, "concat")}, 1, "relu")->output(0));
  transforms::PassLog log;
  auto cg = compare_with_ir_passes(g, {random_tensor({2, 12, 8, 8}, 3)}, &log);
  EXPECT_EQ(count_type(*cg, "Convolution"), 1u) << cg->describe();
  EXPECT_EQ(cg->nodes().size(), 1u + count_type(*cg, "Reorder")) << cg->describe();
  EXPECT_EQ(group_of(*cg), 3);
  EXPECT_TRUE(log_has(log, true, "split -> conv0, conv1, conv2 -> concat: merged into grouped Conv 'conv0_group' (group 3)"))
      << explain(log);
  EXPECT_EQ(find(*cg, "conv0_group")->fused, (std::vector<std::string>{"relu"}));
  expect_jit(*cg, "Convolution");
}

TEST(CpuFusionGroupConv, SliceChainWithAndWithoutBiasKeepsTheOutputName) {
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 8, 9, 9})});
  auto* a = conv(*g, slice(*g, x, 0, 4, "slice_a"), 4, 5, "conv_a", 1, 3, 2, true);
  auto* b = conv(*g, slice(*g, x, 4, std::numeric_limits<int64_t>::max(), "slice_b"), 4, 5, "conv_b", 5, 3, 2, false);
  auto* y = g->add_node("Concat", {a, b}, std::vector<std::string>{"y"}, "concat");
  y->attrs["axis"] = int64_t(-3);
  g->add_output(y->output(0));
  transforms::PassLog log;
  auto cg = compare_with_ir_passes(g, {random_tensor({1, 8, 9, 9}, 4)}, &log);
  EXPECT_EQ(group_of(*cg), 2);
  EXPECT_EQ(count_type(*cg, "Convolution"), 1u) << cg->describe();
  EXPECT_EQ(cg->output_edges()[0]->name.rfind("y", 0), 0u) << cg->output_edges()[0]->name;
  EXPECT_TRUE(log_has(log, true, "slice_a, slice_b -> conv_a, conv_b -> concat: merged")) << explain(log);

  // the ir pass alone: one Conv left, the Concat's output name kept
  auto h = g->clone();
  ir::infer_shapes(*h);
  transforms::PassLog log2;
  EXPECT_EQ(transforms::merge_group_convolution(*h, &log2), 1u);
  h->remove_dead();
  EXPECT_EQ(h->num_nodes(), 1u);
  EXPECT_EQ(h->outputs()[0]->name(), "y");
  EXPECT_EQ(h->outputs()[0]->producer()->attr_i("group"), 2);
  EXPECT_EQ(h->outputs()[0]->producer()->input(0), h->inputs()[0]);
}

TEST(CpuFusionGroupConv, MergedBeforeBatchNormalizationIsFolded) {
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 6, 7, 7})});
  auto* s = split(*g, x, 2, "split");
  auto* y = concat(*g, {conv(*g, s->output(0), 3, 4, "c0", 1), conv(*g, s->output(1), 3, 4, "c1", 2)}, "concat");
  auto* bn = g->add_node("BatchNormalization",
                         {y, g->add_constant("gamma", random_tensor({8}, 3, 0.5f, 1.5f)), g->add_constant("beta", random_tensor({8}, 4)),
                          g->add_constant("mean", random_tensor({8}, 5)), g->add_constant("var", random_tensor({8}, 6, 0.5f, 2.0f))},
                         1, "bn");
  g->add_output(bn->output(0));
  transforms::PassLog log;
  auto cg = compare_with_ir_passes(g, {random_tensor({1, 6, 7, 7}, 7)}, &log);
  EXPECT_EQ(count_type(*cg, "BatchNorm"), 0u) << cg->describe();
  EXPECT_EQ(group_of(*cg), 2);
  EXPECT_TRUE(log_has(log, true, "c0_group -> bn: BatchNormalization folded")) << explain(log);
}

TEST(CpuFusionGroupConv, NotWhenTheConvolutionsDifferOrTheConcatReordersOrAnotherNodeReads) {
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 8, 8, 8})});
  // 1: different strides
  auto* s1 = split(*g, x, 2, "split1");
  g->add_output(concat(*g, {conv(*g, s1->output(0), 4, 4, "a1", 1), conv(*g, s1->output(1), 4, 6, "b1", 2)}, "concat1"));
  // 2: concatenated in the other order
  auto* s2 = split(*g, x, 2, "split2");
  auto* a2 = conv(*g, s2->output(0), 4, 4, "a2", 3);
  auto* b2 = conv(*g, s2->output(1), 4, 4, "b2", 4);
  g->add_output(concat(*g, {b2, a2}, "concat2"));
  // 3: a conv output read by another node too
  auto* s3 = split(*g, x, 2, "split3");
  auto* a3 = conv(*g, s3->output(0), 4, 4, "a3", 5);
  auto* b3 = conv(*g, s3->output(1), 4, 4, "b3", 6);
  g->add_output(concat(*g, {a3, b3}, "concat3"));
  g->add_output(g->add_node("Relu", {b3}, 1, "relu3")->output(0));
  // 4: a part read by something else than a Conv
  auto* s4 = split(*g, x, 2, "split4");
  g->add_output(concat(*g, {conv(*g, s4->output(0), 4, 4, "a4", 7),
                            g->add_node("Relu", {s4->output(1)}, 1, "relu4")->output(0)},
                       "concat4"));
  // 5: split along the height
  auto* s5 = split(*g, x, 2, "split5", 2);
  g->add_output(concat(*g, {conv(*g, s5->output(0), 8, 4, "a5", 8), conv(*g, s5->output(1), 8, 4, "b5", 9)}, "concat5", 2));
  // 6: slices that do not cover the channels
  g->add_output(concat(*g, {conv(*g, slice(*g, x, 0, 2, "sl_a"), 2, 4, "a6", 10),
                            conv(*g, slice(*g, x, 2, 4, "sl_b"), 2, 4, "b6", 11)},
                       "concat6"));
  transforms::PassLog log;
  auto cg = compare_with_ir_passes(g, {random_tensor({1, 8, 8, 8}, 12)}, &log);
  EXPECT_EQ(log.count_applied("MergeGroupConvolution"), 0u) << explain(log);
  EXPECT_EQ(count_type(*cg, "Convolution"), 11u) << cg->describe();
  const char* expected[] = {
      "split1 -> a1, b1: not merged into a grouped Conv: b1 differs from a1 in weight shape [6,4,3,3] instead of [4,4,3,3]",
      "split2 -> a2, b2 -> concat2: not merged into a grouped Conv: concat2 does not read exactly the Conv outputs in split order",
      "split3 -> a3, b3: not merged into a grouped Conv: b3's output is read by 2 nodes",
      "split4: not merged into a grouped Conv: part 'split4_out1' is read by relu4, not a Conv",
      "split5: not merged into a grouped Conv: it splits along axis 2, not the channels (1)",
      "sl_a, sl_b: not merged into a grouped Conv: the channel slices [0,2) [2,4) of 'x' do not tile its 8 channels",
  };
  for (const char* e : expected) EXPECT_TRUE(log_has(log, false, e)) << e << "\n" << explain(log);
}

TEST(CpuFusionGroupConv, DisabledByName) {
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 4, 5, 5})});
  auto* s = split(*g, x, 2, "split");
  g->add_output(concat(*g, {conv(*g, s->output(0), 2, 3, "c0", 1), conv(*g, s->output(1), 2, 3, "c1", 2)}, "concat"));
  transforms::PassLog log;
  auto cg = compare_with_ir_passes(g, {random_tensor({1, 4, 5, 5}, 3)}, &log, {"MergeGroupConvolution"});
  EXPECT_EQ(count_type(*cg, "Convolution"), 2u);
  EXPECT_EQ(log.count_applied("MergeGroupConvolution"), 0u);
}

// ---------------------------------------------------------------------------------------
// FuseConvolutionAndDWConvolution: the experiment. oneDNN's depthwise post-op
// (post_ops::append_dw) on a 1x1 convolution, with ReLU6 before and a clip after it, for
// MobileNetV2-like shapes: the implementation oneDNN picks (printed; it depends on the CPU,
// the shape and the thread count) and the result against the two convolutions run apart.
// Measured on this machine (AVX-512 Zen, oneDNN 2.6.3): "jit_1x1:avx512_core" (a real fused
// kernel) for large spatial sizes (16->96 at 112x112; 24->144 at 56x56 with one thread),
// else "ref_fused_convolution:any:brgconv_1x1:avx512_core:brdgmm_dw:avx512_core" (the two
// JIT primitives run one after the other through a scratchpad, i.e. no fusion).

TEST(CpuFusionDw, OneDnnDepthwisePostOpExperiment) {
  using dnnl::memory;
  using tag = memory::format_tag;
  const auto f32 = memory::data_type::f32;
  dnnl::engine eng = cpu::cpu_engine();
  dnnl::stream strm(eng);
  struct Case {
    int64_t ic, oc, hw, stride;
  };
  for (const Case c : {Case{16, 96, 112, 2}, Case{24, 144, 56, 1}, Case{8, 32, 16, 1}}) {
    const int64_t oh = (c.hw + 2 - 3) / c.stride + 1;
    Tensor x = random_tensor({1, c.ic, c.hw, c.hw}, 1), w1 = random_tensor({c.oc, c.ic, 1, 1}, 2, 0.5f),
           b1 = random_tensor({c.oc}, 3), w2 = random_tensor({c.oc, 1, 1, 3, 3}, 4, 0.5f), b2 = random_tensor({c.oc}, 5);
    auto mem = [&](const memory::desc& d, const Tensor& t) { return memory(d, eng, const_cast<void*>(t.raw())); };
    memory::desc xd({1, c.ic, c.hw, c.hw}, f32, tag::nchw), w1d({c.oc, c.ic, 1, 1}, f32, tag::oihw),
        bd({c.oc}, f32, tag::a), w2d({c.oc, 1, 1, 3, 3}, f32, tag::goihw), md({1, c.oc, c.hw, c.hw}, f32, tag::nchw),
        yd({1, c.oc, oh, oh}, f32, tag::nchw);
    memory xm = mem(xd, x), w1m = mem(w1d, w1), b1m = mem(bd, b1), w2m = mem(w2d, w2), b2m = mem(bd, b2);
    auto clip = [](float lo, float hi) {
      dnnl::post_ops po;
      po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, lo, hi);
      dnnl::primitive_attr a;
      a.set_post_ops(po);
      return a;
    };
    // apart: 1x1 + ReLU6, then the depthwise 3x3 + clip(-1, 1)
    memory mid(md, eng), want(yd, eng), got(yd, eng);
    dnnl::convolution_forward::primitive_desc pd1(
        {dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, xd, w1d, bd, md, {1, 1}, {0, 0}, {0, 0}},
        clip(0.0f, 6.0f), eng);
    dnnl::convolution_forward(pd1).execute(
        strm, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, w1m}, {DNNL_ARG_BIAS, b1m}, {DNNL_ARG_DST, mid}});
    dnnl::convolution_forward::primitive_desc pd2({dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                                   md, w2d, bd, yd, {c.stride, c.stride}, {1, 1}, {1, 1}},
                                                  clip(-1.0f, 1.0f), eng);
    dnnl::convolution_forward(pd2).execute(
        strm, {{DNNL_ARG_SRC, mid}, {DNNL_ARG_WEIGHTS, w2m}, {DNNL_ARG_BIAS, b2m}, {DNNL_ARG_DST, want}});
    // fused: ReLU6, the depthwise convolution, clip(-1, 1) as post-ops of the 1x1
    dnnl::post_ops po;
    po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, 0.0f, 6.0f);
    po.append_dw(f32, f32, f32, 3, c.stride, 1, 0, {});
    po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, -1.0f, 1.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    memory::desc xa({1, c.ic, c.hw, c.hw}, f32, tag::any), w1a({c.oc, c.ic, 1, 1}, f32, tag::any),
        ma({1, c.oc, c.hw, c.hw}, f32, tag::any);
    dnnl::convolution_forward::primitive_desc pd;
    try {
      pd = dnnl::convolution_forward::primitive_desc(
          {dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, xa, w1a, bd, ma, {1, 1}, {0, 0}, {0, 0}},
          attr, eng);
    } catch (const dnnl::error& e) {
      std::cout << "[ dw expt ] " << c.ic << "->" << c.oc << " " << c.hw << "x" << c.hw << " s" << c.stride
                << ": oneDNN rejects the depthwise post-op (" << e.what() << ")\n";
      continue;
    }
    const std::string impl = pd.impl_info_str();
    std::cout << "[ dw expt ] " << c.ic << "->" << c.oc << " " << c.hw << "x" << c.hw << " s" << c.stride << ": " << impl
              << " (unfused: " << pd1.impl_info_str() << " + " << pd2.impl_info_str() << ")\n";
    RecordProperty("dw_impl_" + std::to_string(c.ic) + "_" + std::to_string(c.hw), impl);
    EXPECT_EQ(pd.dst_desc().dims(), (memory::dims{1, c.oc, oh, oh}));
    auto dw_w = pd.query_md(dnnl::query::exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS);
    auto dw_b = pd.query_md(dnnl::query::exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS);
    memory xr(pd.src_desc(), eng), w1r(pd.weights_desc(), eng), w2r(dw_w, eng), b2r(dw_b, eng), yr(pd.dst_desc(), eng);
    dnnl::reorder(xm, xr).execute(strm, xm, xr);
    dnnl::reorder(w1m, w1r).execute(strm, w1m, w1r);
    dnnl::reorder(w2m, w2r).execute(strm, w2m, w2r);
    dnnl::reorder(b2m, b2r).execute(strm, b2m, b2r);
    dnnl::convolution_forward(pd).execute(strm, {{DNNL_ARG_SRC, xr},
                                                 {DNNL_ARG_WEIGHTS, w1r},
                                                 {DNNL_ARG_BIAS, b1m},
                                                 {DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS, w2r},
                                                 {DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS, b2r},
                                                 {DNNL_ARG_DST, yr}});
    dnnl::reorder(yr, got).execute(strm, yr, got);
    strm.wait();
    Tensor tw(DType::f32, {1, c.oc, oh, oh}), tg(DType::f32, {1, c.oc, oh, oh});
    std::memcpy(tw.raw(), want.get_data_handle(), tw.byte_size());
    std::memcpy(tg.raw(), got.get_data_handle(), tg.byte_size());
    expect_close(tw, tg, 1e-4, 1e-5);
  }
}

}  // namespace test_cpu_fusions_extra
