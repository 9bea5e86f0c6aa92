// Convolutions on oneDNN's Winograd kernel: which ones take it (winograd_pays and the
// candidate rule in src/cpu/nodes/convolution.cpp), that they compute the convolution, and
// that a convolution's scratchpad is the node's working memory in the arena. Expectations
// come from what oneDNN offers at the ISA in use: oneDNN 2.6 has Winograd for AVX-512 only;
// with AVX2 and no AVX-512 kiln's own F(4x4, 3x3) (winograd_f32) takes the dense stride-1 3x3
// layers where winograd_f32::pays, and under SSE4.1 every convolution here takes the direct kernel.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <cstdint>
#include <tuple>
#include <vector>

#include "cpu/dnnl_util.hpp"
#include "cpu/executor.hpp"
#include "cpu/isa.hpp"
#include "cpu/winograd_f32.hpp"
#include "cpu/nodes/node_factory.hpp"

#include "cpu_test_util.hpp"

namespace test_cpu_winograd {

using namespace kiln;
using namespace kiln::test;

namespace {

// The Winograd implementation oneDNN offers for a 3x3 / pad 1 convolution of x (NCHW) to
// `co` channels at `stride`, or "" when it has none at this ISA.
std::string onednn_winograd(const Shape& x, int64_t co, int64_t stride) {
  using dnnl::memory;
  const auto f32 = memory::data_type::f32;
  const int64_t h = (x[2] + 2 - 3) / stride + 1, w = (x[3] + 2 - 3) / stride + 1;
  memory::desc src(x, f32, memory::format_tag::any), wei({co, x[1], 3, 3}, f32, memory::format_tag::any),
      bias({co}, f32, memory::format_tag::a), dst({x[0], co, h, w}, f32, memory::format_tag::any);
  try {
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_winograd, src,
                                      wei, bias, dst, {stride, stride}, {1, 1}, {1, 1});
    return dnnl::convolution_forward::primitive_desc(d, cpu::cpu_engine()).impl_info_str();
  } catch (const dnnl::error&) {
    return "";
  }
}

// x -> 3x3 conv (co channels, `stride`, `group`) -> Relu, with x [1, ci, h, w].
std::shared_ptr<ir::Graph> conv_relu(int64_t ci, int64_t co, int64_t stride = 1, int64_t group = 1) {
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape({ir::Dim(1), ir::Dim(ci), ir::Dim::sym("h"), ir::Dim::sym("w")})});
  auto* c = g->add_node("Conv", {x, g->add_constant("w", random_tensor({co, ci / group, 3, 3}, 3, 0.3f)),
                                 g->add_constant("b", random_tensor({co}, 4))},
                        1, "conv");
  c->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  c->attrs["strides"] = std::vector<int64_t>{stride, stride};
  c->attrs["group"] = group;
  g->add_output(g->add_node("Relu", {c->output(0)}, 1, "relu")->output(0));
  return g;
}

// Whether kiln's own Winograd may run at this ISA at all.
bool kiln_winograd_here() { return cpu::winograd_f32::available() && !cpu::isa_at_least(cpu::Isa::avx512_core); }

// Whether kiln's own Winograd takes a dense stride-1 3x3 convolution of x (NCHW) to co channels with
// pads {top, left, bottom, right} at this ISA.
bool kiln_winograd_expected(const Shape& x, int64_t co, std::vector<int64_t> pads = {1, 1, 1, 1}) {
  cpu::winograd_f32::Geometry g;
  g.batch = x[0], g.ic = x[1], g.oc = co, g.ih = x[2], g.iw = x[3];
  g.oh = x[2] + pads[0] + pads[2] - 2, g.ow = x[3] + pads[1] + pads[3] - 2;
  g.pad_t = pads[0], g.pad_l = pads[1];
  return kiln_winograd_here() && cpu::winograd_f32::pays(g);
}

const cpu::Node& the_conv(const cpu::Graph& g) {
  for (const auto& n : g.nodes())
    if (n->kind() == cpu::NodeKind::Convolution) return *n;
  throw std::runtime_error("no Convolution in\n" + g.describe());
}

// x [1, c, 24, w] for each of `widths` in turn through one executor, against the reference;
// `check` gets each width's plan.
void width_stream(const std::shared_ptr<ir::Graph>& g, int64_t c, const std::vector<int64_t>& widths, uint32_t seed,
                  const std::function<void(const cpu::Graph&, int64_t)>& check) {
  ir::infer_shapes(*g);
  runtime::ReferenceExecutor ref(g);
  cpu::Executor ex(g);
  for (int64_t w : widths) {
    SCOPED_TRACE(w);
    const Tensor x = random_tensor({1, c, 24, w}, seed++);
    expect_close(ref.run({x})[0], ex.run({x})[0], 1e-4, 1e-4);
    const auto& plan = ex.plan_for({{1, c, 24, w}});
    ASSERT_TRUE(plan.cpu) << plan.fallback_reason;
    check(*plan.cpu, w);
  }
}

}  // namespace

TEST(CpuWinograd, PaysForFourByThreeAlwaysAndTwoByThreeOnLargeOutputs) {
  EXPECT_TRUE(cpu::winograd_pays("jit_wino_4x3:avx512_core", 6 * 24, 16, false));
  EXPECT_TRUE(cpu::winograd_pays("jit_wino_4x3:avx512_core", 6 * 24, 16, true));
  EXPECT_TRUE(cpu::winograd_pays("jit_fp32_wino_2x3:avx512_core", 27 * 27, 16, false));
  EXPECT_FALSE(cpu::winograd_pays("jit_fp32_wino_2x3:avx512_core", 27 * 27, 16, true));
  EXPECT_FALSE(cpu::winograd_pays("jit_fp32_wino_2x3:avx512_core", 14 * 14, 128, false));
  EXPECT_TRUE(cpu::winograd_pays("jit_fp32_wino_2x3:avx512_core", 14 * 14, 256, false));
  EXPECT_FALSE(cpu::winograd_pays("jit_fp32_wino_2x3:avx512_core", 7 * 7, 512, false));
  EXPECT_FALSE(cpu::winograd_pays("brgconv:avx512_core", 100 * 100, 64, false));
  EXPECT_FALSE(cpu::winograd_pays("", 100 * 100, 64, false));
}

TEST(CpuWinograd, A3x3ConvolutionTakesItWhereOneDnnHasItAndMatchesTheReference) {
  // shapes where oneDNN picks F(4x4, 3x3) and F(2x2, 3x3) on AVX-512, one of the latter too
  // small to pay and one small but wide enough; each checked against the reference executor
  struct Case {
    Shape x;
    int64_t co;
  } cases[] = {{{1, 64, 24, 100}, 128}, {{1, 32, 30, 30}, 32}, {{1, 128, 7, 7}, 128}, {{1, 256, 14, 14}, 256}};
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_to_string(c.x));
    const std::string offered = onednn_winograd(c.x, c.co, 1);
    const bool kiln = kiln_winograd_expected(c.x, c.co);
    const bool expected = kiln || cpu::winograd_pays(offered, c.x[2] * c.x[3], std::min(c.x[1], c.co), false);
    auto cg = compare_with_reference(conv_relu(c.x[1], c.co), {random_tensor(c.x, 7)}, 1e-4, 1e-4);
    const cpu::Node& conv = the_conv(*cg);
    EXPECT_EQ(conv.impl.find("wino") != std::string::npos, expected) << conv.impl << " (oneDNN offers '" << offered << "')";
    if (expected) {
      EXPECT_EQ(conv.impl, kiln ? std::string(cpu::winograd_f32::impl_name()) : offered);
    }
  }
}

TEST(CpuWinograd, AMinorPartOfAConcatTakesOnlyTheLargerSaving) {
  // x -> [3x3 conv to 32 channels, 1x1 conv to `other`] -> Concat: the 3x3 one takes F(2x2) only
  // when it is half of the Concat or more; its blocked output is then reordered into its slice
  const Shape x{1, 32, 30, 30};
  for (int64_t other : {16, 96}) {
    SCOPED_TRACE(other);
    auto g = make_graph();
    auto* in = g->add_input("x", {DType::f32, ir::PartialShape(x)});
    ir::Value* a = conv3x3(*g, in, 32, 32, 11, "conv", 0.3f);
    auto* pw = g->add_node("Conv", {in, g->add_constant("pw", random_tensor({other, 32, 1, 1}, 13, 0.3f))}, 1, "pw");
    auto* cat_node = g->add_node("Concat", {a, pw->output(0)}, 1, "cat");
    cat_node->attrs["axis"] = int64_t{1};
    g->add_output(cat_node->output(0));
    const std::string offered = onednn_winograd(x, 32, 1);
    const bool minor = 2 * 32 < 32 + other;
    auto cg = compare_with_reference(g, {random_tensor(x, 12)}, 1e-4, 1e-4);
    const std::string impl = find(*cg, "conv")->impl;
    if (kiln_winograd_expected(x, 32)) {  // writes the direct kernel's layout: no Concat to spare
      EXPECT_EQ(impl, cpu::winograd_f32::impl_name());
      continue;
    }
    EXPECT_EQ(impl.find("wino") != std::string::npos, cpu::winograd_pays(offered, 30 * 30, 32, minor)) << impl;
    if (offered.rfind("jit_fp32_wino_2x3", 0) == 0) {
      EXPECT_EQ(impl.find("wino") == std::string::npos, minor) << impl;
    }
  }
}

TEST(CpuWinograd, ConvolutionsItDoesNotPayForKeepTheDirectKernel) {
  // an image's 3 channels, stride 2, grouped: direct at every ISA
  for (auto [g, x] : {std::pair{conv_relu(3, 32), Shape{1, 3, 48, 64}}, std::pair{conv_relu(64, 64, 2), Shape{1, 64, 48, 64}},
                      std::pair{conv_relu(64, 64, 1, 2), Shape{1, 64, 48, 64}}}) {
    SCOPED_TRACE(shape_to_string(x));
    auto cg = compare_with_reference(g, {random_tensor(x, 8)}, 1e-4, 1e-4);
    EXPECT_EQ(the_conv(*cg).impl.find("wino"), std::string::npos) << the_conv(*cg).impl;
  }
}

TEST(CpuWinograd, ItsScratchpadIsTheNodesWorkingMemoryAcrossGrowingAndShrinkingWidths) {
  // The primitive's scratchpad is planned in the thread's arena (Node::scratch_bytes) and
  // given to every run, so plans of other widths sharing the arena must not disturb it.
  width_stream(conv_relu(64, 128), 64, {40, 200, 96, 400, 40, 200}, 20, [](const cpu::Graph& plan, int64_t) {
    const cpu::Node& conv = the_conv(plan);
    if (conv.impl.find("wino") != std::string::npos) {
      EXPECT_GT(conv.scratch_bytes(), 0u) << conv.impl;
    }
  });
}

TEST(CpuWinograd, KilnsFourByThreeMatchesTheReferenceOnPartialTilesPaddingsAndOddChannels) {
  if (!kiln_winograd_here()) GTEST_SKIP() << "kiln's Winograd runs on AVX2 CPUs without AVX-512";
  // outputs not a multiple of the 4x4 tile, paddings 0..2 (asymmetric), channel counts that are
  // not a multiple of the 8-lane block (padded lanes), batch 2, with and without bias and ReLU;
  // each a convolution winograd_f32::pays for. Weights at He initialisation's scale (uniform, variance
  // 2 / (9 ci)), so that outputs are of order 1, as a network's are: F(4x4, 3x3) in f32 is off by
  // about 2e-5 of the outputs' scale (points up to 2, 8 in the output transform), not of each value.
  struct Case {
    Shape x;
    int64_t co;
    std::vector<int64_t> pads;
    bool bias, relu;
  } cases[] = {
      {{1, 32, 37, 41}, 32, {1, 1, 1, 1}, true, true},     {{2, 72, 21, 19}, 36, {1, 1, 1, 1}, true, true},
      {{1, 33, 42, 42}, 35, {0, 0, 0, 0}, false, false},   {{1, 64, 30, 23}, 40, {2, 0, 1, 2}, true, false},
      {{1, 128, 12, 60}, 256, {1, 1, 1, 1}, true, true},   {{1, 256, 14, 14}, 256, {1, 1, 1, 1}, true, true},
      {{2, 64, 20, 20}, 64, {2, 2, 2, 2}, false, true},
      // few channels in and many out: SqueezeNet's Fire modules (16 -> 64), 20 in padded to 24
      {{1, 16, 40, 38}, 64, {1, 1, 1, 1}, true, true},     {{2, 20, 18, 22}, 72, {1, 0, 1, 2}, true, false},
  };
  uint32_t seed = 60;
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_to_string(c.x) + " -> " + std::to_string(c.co));
    ASSERT_TRUE(kiln_winograd_expected(c.x, c.co, c.pads));
    auto g = make_graph();
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(c.x)});
    const float he = std::sqrt(6.0f / static_cast<float>(9 * c.x[1]));
    std::vector<ir::Value*> ins = {x, g->add_constant("w", random_tensor({c.co, c.x[1], 3, 3}, seed++, he))};
    if (c.bias) ins.push_back(g->add_constant("b", random_tensor({c.co}, seed++)));
    auto* conv = g->add_node("Conv", ins, 1, "conv");
    conv->attrs["pads"] = c.pads;
    ir::Value* y = conv->output(0);
    if (c.relu) y = g->add_node("Relu", {y}, 1, "relu")->output(0);
    g->add_output(y);
    transforms::PassLog log;
    CompareOptions opt = fusing(&log);
    opt.atol = 1e-4;
    auto cg = compare_with_reference(g, {random_tensor(c.x, seed++)}, opt);
    EXPECT_EQ(the_conv(*cg).impl, cpu::winograd_f32::impl_name()) << cg->describe();
    EXPECT_EQ(count_type(*cg, "Eltwise"), 0u) << "the ReLU is the convolution's:\n" << cg->describe();
  }
}

TEST(CpuWinograd, KilnsFourByThreeAddsAResidualBeforeTheRelu) {
  if (!kiln_winograd_here()) GTEST_SKIP() << "kiln's Winograd runs on AVX2 CPUs without AVX-512";
  // A ResNet basic block: b = 1x1 projection of the input, then relu(conv(relu(conv_a(b))) + b).
  // The sum is fused into `conv` (b is read by conv_a too, so not into the projection), with
  // and without the last ReLU, odd channels (padded lanes of the summand stay 0), partial tiles,
  // batch 2. `conv` takes ci channels to co; the block's width is co.
  struct Case {
    int64_t n, ci, co, h, w;
    bool relu;
  } cases[] = {{1, 64, 64, 30, 30, true}, {2, 64, 36, 21, 19, true}, {1, 128, 128, 28, 28, false}, {1, 256, 256, 14, 14, true}};
  uint32_t seed = 90;
  for (const Case& c : cases) {
    const Shape x_shape{c.n, 8, c.h, c.w}, conv_in{c.n, c.ci, c.h, c.w};
    SCOPED_TRACE(shape_to_string(conv_in) + " -> " + std::to_string(c.co) + (c.relu ? " + relu" : ""));
    ASSERT_TRUE(kiln_winograd_expected(conv_in, c.co));
    auto g = make_graph();
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(x_shape)});
    auto conv3x3 = [&](ir::Value* in, int64_t ci, int64_t co, const std::string& name) {
      const float he = std::sqrt(6.0f / static_cast<float>(9 * ci));
      auto* n = g->add_node("Conv", {in, g->add_constant(name + "_w", random_tensor({co, ci, 3, 3}, seed++, he)),
                                     g->add_constant(name + "_b", random_tensor({co}, seed++))},
                            1, name);
      n->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
      return n->output(0);
    };
    ir::Value* b = g->add_node("Conv", {x, g->add_constant("pw_w", random_tensor({c.co, 8, 1, 1}, seed++, 0.3f))}, 1, "pw")->output(0);
    ir::Value* t = g->add_node("Relu", {conv3x3(b, c.co, c.ci, "conv_a")}, 1, "relu_a")->output(0);
    ir::Value* y = g->add_node("Add", {conv3x3(t, c.ci, c.co, "conv"), b}, 1, "add")->output(0);
    if (c.relu) y = g->add_node("Relu", {y}, 1, "relu")->output(0);
    g->add_output(y);
    transforms::PassLog log;
    CompareOptions opt = fusing(&log);
    opt.atol = 1e-4;
    auto cg = compare_with_reference(g, {random_tensor(x_shape, seed++)}, opt);
    const cpu::Node* n = find(*cg, "conv");
    ASSERT_NE(n, nullptr) << cg->describe();
    EXPECT_EQ(n->impl, cpu::winograd_f32::impl_name()) << cg->describe();
    EXPECT_NE(std::find(n->fused.begin(), n->fused.end(), "add"), n->fused.end()) << "the sum is conv's:\n"
                                                                                    << cg->describe();
    EXPECT_EQ(count_type(*cg, "Eltwise"), 0u) << cg->describe();
  }
}

TEST(CpuWinograd, KilnsFourByThreeLeavesWhatItDoesNotCompute) {
  if (!kiln_winograd_here()) GTEST_SKIP() << "kiln's Winograd runs on AVX2 CPUs without AVX-512";
  // too few channels in, or few in and few out, too few out, too few tiles (7x7), a dilated window, and a post-op other than
  // ReLU (a Clip, which the fusion passes give the convolution)
  auto check = [](const std::shared_ptr<ir::Graph>& g, const Shape& x) {
    transforms::PassLog log;
    CompareOptions opt = fusing(&log);
    opt.atol = 1e-4;
    auto cg = compare_with_reference(g, {random_tensor(x, 5)}, opt);
    EXPECT_NE(the_conv(*cg).impl, cpu::winograd_f32::impl_name()) << cg->describe();
  };
  EXPECT_TRUE(kiln_winograd_expected({1, 64, 40, 40}, 64));  // what the cases below change
  EXPECT_FALSE(kiln_winograd_expected({1, 8, 40, 40}, 64));
  EXPECT_FALSE(kiln_winograd_expected({1, 16, 40, 40}, 32));
  EXPECT_FALSE(kiln_winograd_expected({1, 64, 40, 40}, 16));
  EXPECT_FALSE(kiln_winograd_expected({1, 512, 7, 7}, 512));
  check(conv_relu(8, 64), {1, 8, 40, 40});
  check(conv_relu(16, 32), {1, 16, 40, 40});
  check(conv_relu(64, 16), {1, 64, 40, 40});
  check(conv_relu(512, 512), {1, 512, 7, 7});
  {
    auto g = make_graph();
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 64, 40, 40})});
    auto* c = g->add_node("Conv", {x, g->add_constant("w", random_tensor({64, 64, 3, 3}, 3, 0.3f))}, 1, "conv");
    c->attrs["dilations"] = std::vector<int64_t>{2, 2};
    c->attrs["pads"] = std::vector<int64_t>{2, 2, 2, 2};
    g->add_output(c->output(0));
    check(g, {1, 64, 40, 40});
  }
  {
    auto g = make_graph();
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 64, 40, 40})});
    auto* c = g->add_node("Conv", {x, g->add_constant("w", random_tensor({64, 64, 3, 3}, 3, 0.3f))}, 1, "conv");
    c->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
    auto* lo = g->add_constant("lo", Tensor::from_vector<float>({0.0f}, {}));
    auto* hi = g->add_constant("hi", Tensor::from_vector<float>({6.0f}, {}));
    auto* clip = g->add_node("Clip", {c->output(0), lo, hi}, 1, "clip");
    auto* pw = g->add_node("Conv", {clip->output(0), g->add_constant("pw", random_tensor({8, 64, 1, 1}, 4, 0.3f))}, 1, "pw");
    g->add_output(pw->output(0));
    transforms::PassLog log;
    CompareOptions opt = fusing(&log);
    opt.atol = 1e-4;
    auto cg = compare_with_reference(g, {random_tensor({1, 64, 40, 40}, 5)}, opt);
    EXPECT_EQ(count_type(*cg, "Eltwise"), 0u) << "the Clip was not fused:\n" << cg->describe();
    EXPECT_NE(find(*cg, "conv")->impl, cpu::winograd_f32::impl_name()) << cg->describe();
  }
}

}  // namespace test_cpu_winograd

namespace test_cpu_winograd {

TEST(CpuWinograd, KilnsFourByThreeRunsEveryWidthOfAModelWhoseShapesVary) {
  // A recogniser's 3x3 layers over a stream of widths: a graph for a new shape takes kiln's
  // Winograd wherever it runs (AVX2, and AVX-512, where oneDNN's Winograd would make a JIT kernel
  // per width), in the ISA's blocked layout. 36 channels between the two convolutions leave the
  // last 16-channel block half padding, which the second one reads: it must hold zeros. The
  // second convolution adds a residual (the first's input, projected) before its ReLU.
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape({ir::Dim(1), ir::Dim(32), ir::Dim(24), ir::Dim::sym("w")})});
  auto conv = [&](ir::Value* in, int64_t ci, int64_t co, uint32_t seed, const std::string& name) {
    const float he = std::sqrt(6.0f / static_cast<float>(9 * ci));
    auto* c = g->add_node("Conv", {in, g->add_constant(name + "_w", random_tensor({co, ci, 3, 3}, seed, he)),
                                   g->add_constant(name + "_b", random_tensor({co}, seed + 1))},
                          1, name);
    c->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
    return c->output(0);
  };
  ir::Value* a = g->add_node("Relu", {conv(x, 32, 36, 1, "conv1")}, 1, "relu1")->output(0);
  ir::Value* proj = g->add_node("Conv", {x, g->add_constant("pw", random_tensor({40, 32, 1, 1}, 5, 0.3f))}, 1, "proj")->output(0);
  ir::Value* y = g->add_node("Add", {conv(a, 36, 40, 3, "conv2"), proj}, 1, "add")->output(0);
  g->add_output(g->add_node("Relu", {y}, 1, "relu2")->output(0));
  width_stream(g, 32, {64, 200, 96, 400, 64, 180}, 30, [](const cpu::Graph& plan, int64_t w) {
    for (auto [name, ci, co] : {std::tuple{"conv1", 32, 36}, std::tuple{"conv2", 36, 40}}) {
      const cpu::Node* n = find(plan, name);
      ASSERT_NE(n, nullptr) << plan.describe();
      cpu::winograd_f32::Geometry geo;  // the rule's own verdict on the layer (few tiles do not pay)
      geo.ic = ci, geo.oc = co, geo.ih = geo.oh = 24, geo.iw = geo.ow = w;
      geo.block = cpu::isa_at_least(cpu::Isa::avx512_core) ? 16 : 8;
      if (cpu::winograd_f32::available() && cpu::winograd_f32::pays(geo)) {
        EXPECT_EQ(n->impl, cpu::winograd_f32::impl_name()) << plan.describe();
        if (std::string(name) == "conv2") {  // the residual sum and the ReLU in its store
          EXPECT_NE(std::find(n->fused.begin(), n->fused.end(), "add"), n->fused.end()) << plan.describe();
          EXPECT_NE(std::find(n->fused.begin(), n->fused.end(), "relu2"), n->fused.end()) << plan.describe();
        }
        EXPECT_EQ(n->outputs[0]->layout_name(), cpu::isa_at_least(cpu::Isa::avx512_core) ? "blocked(16@dim1)" : "blocked(8@dim1)");
      } else {
        EXPECT_NE(n->impl, cpu::winograd_f32::impl_name());
      }
    }
  });
  cpu::winograd_f32::Geometry wide;
  wide.ic = 32, wide.oc = 36, wide.ih = wide.oh = 24, wide.iw = wide.ow = 400;
  wide.block = cpu::isa_at_least(cpu::Isa::avx512_core) ? 16 : 8;
  EXPECT_TRUE(cpu::winograd_f32::pays(wide)) << "the stream has widths it pays for";
}

TEST(CpuWinograd, KilnsFourByThreeInSixteenChannelBlocksWritesZerosInThePadding) {
  // The kernel alone on nChw16c, batch 2, 24 channels in and out: the second block of each is
  // half padding. The input's padding lanes hold NaN (the kernel must not read them), the
  // output's must read 0 after the run whatever the buffer held; the values against a direct
  // convolution computed here (pad 1)
  if (!cpu::winograd_f32::available()) GTEST_SKIP() << "kiln's Winograd needs AVX2";
  cpu::winograd_f32::Geometry g;
  g.batch = 2, g.ic = 24, g.oc = 24, g.ih = 10, g.iw = 13, g.oh = 10, g.ow = 13, g.pad_t = 1, g.pad_l = 1, g.block = 16;
  const Tensor x = random_tensor({g.batch, g.ic, g.ih, g.iw}, 1), w = random_tensor({g.oc, g.ic, 3, 3}, 2, 0.3f),
               b = random_tensor({g.oc}, 3);
  const int64_t pixels = g.ih * g.iw, out_pixels = g.oh * g.ow;
  std::vector<float> src(static_cast<size_t>(g.batch * 2 * pixels * 16), std::nanf("")),
      dst(static_cast<size_t>(g.batch * 2 * out_pixels * 16), std::nanf(""));
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t c = 0; c < g.ic; ++c)
      for (int64_t p = 0; p < pixels; ++p)
        src[static_cast<size_t>(((n * 2 + c / 16) * pixels + p) * 16 + c % 16)] = x.data<float>()[(n * g.ic + c) * pixels + p];
  std::vector<float> packed(cpu::winograd_f32::weights_floats(g.ic, g.oc));
  cpu::winograd_f32::transform_weights(w.data<float>(), g.ic, g.oc, packed.data());
  std::vector<std::byte> scratch(cpu::winograd_f32::scratch_bytes(g, 1) + 64);
  void* aligned = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(scratch.data()) + 63) / 64 * 64);
  cpu::winograd_f32::run(g, src.data(), packed.data(), b.data<float>(), dst.data(), aligned, 1);
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t o = 0; o < 32; ++o)
      for (int64_t y = 0; y < g.oh; ++y)
        for (int64_t xo = 0; xo < g.ow; ++xo) {
          const float got = dst[static_cast<size_t>(((n * 2 + o / 16) * out_pixels + y * g.ow + xo) * 16 + o % 16)];
          if (o >= g.oc) {
            ASSERT_EQ(got, 0.0f) << "padding lane " << o << " of image " << n << " at " << y << ", " << xo;
            continue;
          }
          double want = b.data<float>()[o];
          for (int64_t c = 0; c < g.ic; ++c)
            for (int64_t i = 0; i < 3; ++i)
              for (int64_t j = 0; j < 3; ++j) {
                const int64_t yi = y + i - 1, xi = xo + j - 1;
                if (yi < 0 || yi >= g.ih || xi < 0 || xi >= g.iw) continue;
                want += double(w.data<float>()[((o * g.ic + c) * 3 + i) * 3 + j]) *
                        x.data<float>()[(n * g.ic + c) * pixels + yi * g.iw + xi];
              }
          ASSERT_NEAR(got, want, 1e-4) << "channel " << o << " of image " << n << " at " << y << ", " << xo;
        }
}

}  // namespace test_cpu_winograd

namespace test_cpu_winograd {

// A one-image ci -> co convolution over an h x w map in channel blocks of `block`, for pays().
cpu::winograd_f32::Geometry pays_geometry(int64_t ci, int64_t co, int64_t h, int64_t w, int64_t block) {
  cpu::winograd_f32::Geometry g;
  g.ic = ci, g.oc = co, g.ih = g.oh = h, g.iw = g.ow = w, g.block = block;
  return g;
}

TEST(CpuWinograd, KilnsFourByThreeInSixteenChannelBlocksPaysAsInEight) {
  // with AVX-512 (nChw16c) the rule of AVX2's blocks: against oneDNN's kernels made for every
  // new shape, SqueezeNet's 16 -> 64 and 32 -> 128 expansions pay there too (winograd_f32.cpp)
  auto geo = [](int64_t ci, int64_t co, int64_t h, int64_t w, int64_t block) {
    return pays_geometry(ci, co, h, w, block);
  };
  EXPECT_TRUE(cpu::winograd_f32::pays(geo(16, 64, 52, 52, 16)));    // 169 tiles
  EXPECT_TRUE(cpu::winograd_f32::pays(geo(32, 128, 24, 28, 16)));   // 42 tiles
  EXPECT_FALSE(cpu::winograd_f32::pays(geo(128, 128, 4, 12, 16)));  // 3 tiles
  EXPECT_FALSE(cpu::winograd_f32::pays(geo(8, 64, 52, 52, 16)));    // too few inputs
  for (const auto& [ci, co, h, w] : std::vector<std::array<int64_t, 4>>{
           {128, 256, 6, 52}, {64, 128, 12, 200}, {32, 64, 24, 100}, {16, 128, 24, 400}, {16, 32, 52, 52},
           {32, 48, 24, 28}, {256, 256, 10, 16}, {96, 208, 14, 14}, {64, 192, 26, 26}}) {
    SCOPED_TRACE(cat(ci, " -> ", co, " over ", h, " x ", w));
    for (bool im2col : {false, true})
      EXPECT_EQ(cpu::winograd_f32::pays(geo(ci, co, h, w, 16), im2col), cpu::winograd_f32::pays(geo(ci, co, h, w, 8), im2col));
  }
}

TEST(CpuWinograd, KilnsFourByThreeOnAvx2TakesFewInputChannelsOnlyForManyOutputs) {
  // 16 to 63 channels in: the input transform pays where 64 outputs or more share it, from 40
  // tiles on (winograd_f32.cpp: SqueezeNet's 16 -> 64 and 32 -> 128 faster, GoogLeNet's 16 ->
  // 32 slower); fewer than 16 in never
  auto geo = [](int64_t ci, int64_t co, int64_t h, int64_t w) { return pays_geometry(ci, co, h, w, 8); };
  EXPECT_TRUE(cpu::winograd_f32::pays(geo(16, 64, 52, 52)));    // 169 tiles
  EXPECT_TRUE(cpu::winograd_f32::pays(geo(32, 128, 24, 28)));   // 42 tiles
  EXPECT_FALSE(cpu::winograd_f32::pays(geo(32, 128, 20, 20)));  // 25 tiles
  EXPECT_FALSE(cpu::winograd_f32::pays(geo(16, 32, 52, 52)));   // too few outputs
  EXPECT_FALSE(cpu::winograd_f32::pays(geo(8, 64, 52, 52)));    // too few inputs
  EXPECT_FALSE(cpu::winograd_f32::pays(geo(32, 48, 24, 28)));   // 42 tiles, 48 outputs: the 100-tile rule
  EXPECT_TRUE(cpu::winograd_f32::pays(geo(32, 48, 40, 40)));    // 100 tiles
}

TEST(CpuWinograd, KilnsFourByThreeOnAvx2BeatsTheIm2colGemmOnFewerTilesThanOneDnn) {
  // 64 channels in and out or more: against kiln's im2col GEMM (a new shape's window) from 12
  // tiles, against oneDNN's direct kernel from 40 (or 16 with 256 channels)
  auto geo = [](int64_t ci, int64_t co, int64_t h, int64_t w) { return pays_geometry(ci, co, h, w, 8); };
  EXPECT_FALSE(cpu::winograd_f32::pays(geo(96, 208, 13, 13)));       // 16 tiles
  EXPECT_TRUE(cpu::winograd_f32::pays(geo(96, 208, 13, 13), true));
  EXPECT_TRUE(cpu::winograd_f32::pays(geo(112, 224, 14, 12), true));  // 12 tiles
  EXPECT_FALSE(cpu::winograd_f32::pays(geo(160, 320, 7, 7), true));   // 4 tiles
  EXPECT_FALSE(cpu::winograd_f32::pays(geo(128, 32, 13, 13), true));  // 32 outputs
  EXPECT_TRUE(cpu::winograd_f32::pays(geo(256, 256, 13, 13)));        // 16 tiles, 256 channels
}

}  // namespace test_cpu_winograd
