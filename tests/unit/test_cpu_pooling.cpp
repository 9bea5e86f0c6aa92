// cpu::Graph Pooling, BatchNorm, Concat, LRN and Resize nodes against the reference
// executor: odd sizes and channel counts, ceil_mode / padding / dilation corner cases,
// blocked inputs from a convolution (padded channel blocks), and the forms that must
// stay on Reference because oneDNN would compute something else.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <limits>
#include <random>

#include "cpu/graph.hpp"
#include "cpu/pool_f32.hpp"
#include "cpu/resize_f32.hpp"
#include "ir/op_registry.hpp"
#include "runtime/reference_executor.hpp"
#include "transforms/specialize_shapes.hpp"

#include "cpu_test_util.hpp"

namespace test_cpu_pooling {

using namespace kiln;
using namespace kiln::test;

namespace {

// Inputs default to [-2, 2).
Tensor pool_random(Shape s, uint32_t seed, float lo = -2.0f, float hi = 2.0f) {
  return random_tensor(std::move(s), seed, lo, hi);
}

const cpu::Node* pool_find(const cpu::Graph& g, const std::string& type) {
  for (auto& n : g.nodes())
    if (type == n->type()) return n.get();
  return nullptr;
}

// A 1x1 convolution keeping the channel count: its output arrives in oneDNN's blocked
// layout (nChw16c on AVX-512, padded when C is not a multiple of the block).
ir::Value* pool_conv(ir::Graph& g, ir::Value* x, int64_t c, size_t spatial, uint32_t seed) {
  Shape ws = {c, c};
  for (size_t i = 0; i < spatial; ++i) ws.push_back(1);
  auto* n = g.add_node("Conv", {x, g.add_constant("w" + std::to_string(seed), pool_random(ws, seed, -0.5f, 0.5f))}, 1,
                       "conv" + std::to_string(seed));
  return n->output(0);
}

// A grouped 1x1 convolution 32 -> 32 channels (2 groups): oneDNN 2.6 gives it the
// channel-blocked nChw16c layout (plain convolutions get channels-last on AVX-512).
ir::Value* pool_conv16(ir::Graph& g, ir::Value* x, size_t spatial, uint32_t seed) {
  Shape ws = {32, 16};
  for (size_t i = 0; i < spatial; ++i) ws.push_back(1);
  auto* n = g.add_node("Conv", {x, g.add_constant("w" + std::to_string(seed), pool_random(ws, seed, -0.5f, 0.5f))}, 1,
                       "gconv" + std::to_string(seed));
  n->attrs["group"] = int64_t(2);
  return n->output(0);
}

const cpu::Edge* pool_output_of(const cpu::Graph& g, const std::string& node_name) {
  for (auto& n : g.nodes())
    if (n->name == node_name) return n->outputs[0];
  return nullptr;
}


struct PoolCase {
  std::string op;
  Shape x;
  std::vector<int64_t> kernel = {}, strides = {}, pads = {}, dilations = {};
  int64_t ceil_mode = 0, count_include_pad = 0;
  std::string auto_pad = {};
  bool expect_onednn = true;
};

std::string pool_case_name(const PoolCase& c) {
  std::string s = c.op + " x" + shape_to_string(c.x);
  auto list = [&](const char* n, const std::vector<int64_t>& v) {
    if (v.empty()) return;
    s += std::string(" ") + n + "=";
    for (int64_t e : v) s += std::to_string(e) + ",";
  };
  list("k", c.kernel);
  list("s", c.strides);
  list("p", c.pads);
  list("d", c.dilations);
  s += " ceil=" + std::to_string(c.ceil_mode) + " incl=" + std::to_string(c.count_include_pad) + " " + c.auto_pad;
  return s;
}

}  // namespace

TEST(CpuPooling, MatchesReferenceOverOddShapesAndBlockedInputs) {
  std::vector<PoolCase> cases = {
      {"MaxPool", {1, 3, 17, 19}, {3, 3}, {2, 2}, {}, {}, 1},                      // squeezenet/googlenet
      {"MaxPool", {1, 17, 14, 14}, {3, 3}, {2, 2}, {}, {}, 1},                     // ceil adds a tail window
      {"MaxPool", {2, 33, 13, 11}, {3, 3}, {2, 2}, {1, 1, 1, 1}},                  // resnet stem
      {"MaxPool", {1, 17, 15, 15}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {}, 1},           // googlenet 3x3 s1
      {"MaxPool", {1, 5, 10, 7}, {2, 3}, {2, 1}, {0, 1, 1, 0}},                    // asymmetric pads
      {"MaxPool", {1, 6, 11, 11}, {3, 3}, {2, 2}, {}, {}, 0, 0, "SAME_UPPER"},
      {"MaxPool", {1, 6, 11, 11}, {4, 4}, {3, 3}, {}, {}, 0, 0, "SAME_LOWER"},
      {"MaxPool", {1, 4, 15, 15}, {3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}},           // dilated
      {"MaxPool", {2, 3, 31}, {5}, {2}, {2, 2}, {}, 1},                             // 1D
      {"MaxPool", {1, 4, 7, 8, 9}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1, 1, 1, 1}},      // 3D
      {"AveragePool", {1, 17, 15, 15}, {2, 2}, {2, 2}},                             // densenet transition
      {"AveragePool", {1, 3, 10, 10}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 1, 0},      // ceil, exclude
      {"AveragePool", {1, 17, 9, 9}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {}, 0, 1},       // include
      {"AveragePool", {1, 5, 10, 7}, {2, 3}, {2, 1}, {0, 1, 1, 0}, {}, 0, 1},       // asymmetric, include
      {"AveragePool", {1, 5, 9, 7}, {3, 2}, {2, 2}, {1, 0, 1, 1}, {}, 1, 1},        // ceil, windows in the pads
      {"AveragePool", {1, 33, 14, 13}, {3, 3}, {2, 2}, {}, {}, 1, 1},               // ceil, no pads: exclude
      {"AveragePool", {1, 6, 11, 11}, {3, 3}, {2, 2}, {}, {}, 0, 1, "SAME_UPPER"},
      {"AveragePool", {1, 6, 11, 11}, {4, 4}, {3, 3}, {}, {}, 0, 0, "SAME_LOWER"},
      {"AveragePool", {1, 4, 13, 12}, {3, 2}, {2, 1}, {2, 1, 2, 1}, {2, 3}},        // dilated, exclude
      {"AveragePool", {2, 3, 31}, {4}, {3}, {1, 2}, {}, 1, 0},                       // 1D
      {"AveragePool", {1, 4, 7, 8, 9}, {2, 3, 2}, {2, 1, 2}, {1, 1, 0, 0, 1, 1}, {}, 0, 1},  // 3D
      {"GlobalAveragePool", {1, 33, 7, 7}},
      {"GlobalAveragePool", {2, 17, 5, 6, 3}},
      {"GlobalAveragePool", {2, 5, 11}},
      {"GlobalMaxPool", {1, 33, 7, 9}},
      {"GlobalMaxPool", {2, 3, 13}},
      // must stay on Reference: a ceil window past the explicit end pad with
      // count_include_pad (ONNX divides by the taps inside the padded input only)
      {"AveragePool", {1, 3, 10, 10}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 1, 1, "", false},
      // ceil_mode drops a last window that would start in the end padding (ONNX's rule), so
      // every window holds an input element and oneDNN runs it: [2, 2] out, not [3, 3]
      {"MaxPool", {1, 3, 4, 4}, {2, 2}, {2, 2}, {0, 0, 1, 1}, {}, 1, 0},
  };
  uint32_t seed = 1;
  for (const auto& c : cases) {
    for (bool blocked : {false, true}) {
      SCOPED_TRACE(pool_case_name(c) + (blocked ? " after conv" : ""));
      auto g = make_graph();
      auto* x = g->add_input("x", {DType::f32, ir::PartialShape(c.x)});
      ir::Value* in = blocked ? pool_conv(*g, x, c.x[1], c.x.size() - 2, seed++) : x;
      auto* n = g->add_node(c.op, {in}, 1, "pool");
      if (!c.kernel.empty()) n->attrs["kernel_shape"] = c.kernel;
      if (!c.strides.empty()) n->attrs["strides"] = c.strides;
      if (!c.pads.empty()) n->attrs["pads"] = c.pads;
      if (!c.dilations.empty()) n->attrs["dilations"] = c.dilations;
      if (c.ceil_mode) n->attrs["ceil_mode"] = c.ceil_mode;
      if (c.op == "AveragePool") n->attrs["count_include_pad"] = c.count_include_pad;
      if (!c.auto_pad.empty()) n->attrs["auto_pad"] = c.auto_pad;
      g->add_output(n->output(0));
      auto cg = compare_with_reference(g, {pool_random(c.x, seed++)});
      ASSERT_EQ(count_type(*cg, "Pooling"), c.expect_onednn ? 1u : 0u) << cg->describe();
      if (c.expect_onednn && c.dilations.empty()) expect_jit(*cg, "Pooling");
      if (c.expect_onednn && !blocked && c.x.size() == 4) {
        // a plain input of a 2-D window that is not the whole image goes to kiln's kernel in
        // channel blocks of 8 where the ISA has AVX2 (oneDNN 2.6 pools plain f32 in C++); a
        // global pool stays on the plain planes
        const cpu::Node* p = pool_find(*cg, "Pooling");
        const Shape& y = p->outputs[0]->shape;
        const bool kiln = cpu::pool_f32::available() && y[2] * y[3] > 1;
        EXPECT_EQ(p->impl == cpu::pool_f32::impl_name(), kiln) << p->impl;
        EXPECT_EQ(p->inputs[0]->layout_name(), kiln ? "blocked(8@dim1)" : "plain") << cg->describe();
      }
      if (c.expect_onednn && blocked) {
        // the pool consumed the convolution's layout: no reorder in between
        const cpu::Node* p = pool_find(*cg, "Pooling");
        // a 2-D pool on channel blocks runs kiln's kernel where the ISA has AVX2
        if (c.x.size() == 4 && !p->inputs[0]->is_plain()) {
          EXPECT_EQ(p->impl == cpu::pool_f32::impl_name(), cpu::pool_f32::available()) << p->impl;
        }
        EXPECT_EQ(p->inputs[0]->name, cg->nodes()[0]->type() == std::string("Reorder") ? cg->nodes()[1]->outputs[0]->name
                                                                                         : cg->nodes()[0]->outputs[0]->name)
            << cg->describe();
      }
    }
  }
}

namespace {

// ONNX pooling of one channel of a [H, W] image, straight from the definition: the taps inside
// the input, the average over them (or over kh * kw with include).
float pool_expected(const std::vector<float>& img, int64_t H, int64_t W, const cpu::pool_f32::Geometry& g, int64_t y,
                    int64_t x) {
  float acc = g.alg == cpu::pool_f32::Alg::max ? -INFINITY : 0.0f;
  int64_t taps = 0;
  for (int64_t i = 0; i < g.kh; ++i)
    for (int64_t j = 0; j < g.kw; ++j) {
      const int64_t h = y * g.sh - g.ph + i * g.dh, w = x * g.sw - g.pw + j * g.dw;
      if (h < 0 || h >= H || w < 0 || w >= W) continue;
      const float v = img[static_cast<size_t>(h * W + w)];
      acc = g.alg == cpu::pool_f32::Alg::max ? std::max(acc, v) : acc + v;
      ++taps;
    }
  if (g.alg == cpu::pool_f32::Alg::avg_include_padding) return acc / static_cast<float>(g.kh * g.kw);
  if (g.alg == cpu::pool_f32::Alg::avg_exclude_padding) return acc / static_cast<float>(taps);
  return acc;
}

}  // namespace

// kiln's kernel alone, on the layouts it takes: channel blocks of 8 and 16 (C not a multiple:
// padded lanes) and channels-last with a partial last vector, across windows cut by the edges,
// strides, dilation and the four-column path's boundaries (widths 1..13); and global pools over
// channels-last rows of 128..207 lanes, which the kernel also splits along the lanes.
TEST(CpuPooling, KilnKernelMatchesTheDefinitionOnBlockedAndChannelsLastLayouts) {
  using cpu::pool_f32::Alg;
  if (!cpu::pool_f32::available()) GTEST_SKIP() << "kiln's pooling kernel needs AVX2";
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  int checked = 0;
  for (int trial = 0; trial < 132; ++trial) {
    const bool global = trial >= 120;
    const int layout = global ? 2 : trial % 3;  // 0: nChw8c, 1: nChw16c, 2: nhwc
    const int64_t N = 1 + trial % 2, C = global ? 128 + static_cast<int64_t>(rng() % 80) : 1 + static_cast<int64_t>(rng() % 37),
                  H = 1 + static_cast<int64_t>(rng() % 9),
                  // some rows wider than the separable max's chunk of output columns (kSpan)
                  W = trial % 10 == 9 ? 140 + static_cast<int64_t>(rng() % 200) : 1 + static_cast<int64_t>(rng() % 13);
    cpu::pool_f32::Geometry g;
    g.alg = static_cast<Alg>(trial % 3 == 0 ? 0 : rng() % 3);
    g.kh = 1 + static_cast<int64_t>(rng() % 3), g.kw = 1 + static_cast<int64_t>(rng() % 3);
    g.sh = 1 + static_cast<int64_t>(rng() % 2), g.sw = 1 + static_cast<int64_t>(rng() % 3);
    g.dh = rng() % 4 == 0 ? 2 : 1, g.dw = rng() % 4 == 0 ? 2 : 1;
    int64_t ekh = (g.kh - 1) * g.dh + 1, ekw = (g.kw - 1) * g.dw + 1;
    g.ph = static_cast<int64_t>(rng() % static_cast<unsigned>(ekh)), g.pw = static_cast<int64_t>(rng() % static_cast<unsigned>(ekw));
    if (global) g.kh = ekh = H, g.kw = ekw = W, g.sh = g.sw = g.dh = g.dw = 1, g.ph = g.pw = 0;
    if (H + 2 * g.ph < ekh || W + 2 * g.pw < ekw) continue;
    g.batch = N, g.ih = H, g.iw = W;
    g.oh = (H + 2 * g.ph - ekh) / g.sh + 1, g.ow = (W + 2 * g.pw - ekw) / g.sw + 1;
    // every window must hold an input element (the node's precondition)
    bool empty = false;
    for (int64_t y = 0; y < g.oh; ++y)
      for (int64_t x = 0; x < g.ow; ++x) {
        bool any = false;
        for (int64_t i = 0; i < g.kh; ++i)
          for (int64_t j = 0; j < g.kw; ++j) {
            const int64_t h = y * g.sh - g.ph + i * g.dh, w = x * g.sw - g.pw + j * g.dw;
            any = any || (h >= 0 && h < H && w >= 0 && w < W);
          }
        empty = empty || !any;
      }
    if (empty) continue;
    const int64_t B = layout == 0 ? 8 : layout == 1 ? 16 : C;
    g.lanes = B;
    g.runs = layout == 2 ? 1 : (C + B - 1) / B;
    const int64_t Cp = g.runs * B;
    auto strides = [&](int64_t h, int64_t w) {
      return layout == 2 ? cpu::pool_f32::Layout{h * w * C, 0, w * C, C}
                         : cpu::pool_f32::Layout{Cp * h * w, B * h * w, B * w, B};
    };
    g.src = strides(H, W);
    g.dst = strides(g.oh, g.ow);
    // images per (n, c), and the layout's bytes (padded lanes zero)
    std::vector<std::vector<float>> img(static_cast<size_t>(N * C), std::vector<float>(static_cast<size_t>(H * W)));
    std::vector<float> src(static_cast<size_t>(N * Cp * H * W), 0.0f), dst(static_cast<size_t>(N * Cp * g.oh * g.ow), 7.0f);
    auto at = [&](const cpu::pool_f32::Layout& l, int64_t n, int64_t c, int64_t h, int64_t w) {
      return static_cast<size_t>(n * l.n_stride + c / B * l.run_stride + h * l.h_stride + w * l.w_stride + c % B);
    };
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w) src[at(g.src, n, c, h, w)] = img[static_cast<size_t>(n * C + c)][static_cast<size_t>(h * W + w)] = u(rng);
    cpu::pool_f32::run(g, cpu::pool_f32::column_taps(g), src.data(), dst.data());
    SCOPED_TRACE("trial " + std::to_string(trial) + " layout " + std::to_string(layout) + " N" + std::to_string(N) + " C" +
                 std::to_string(C) + " " + std::to_string(H) + "x" + std::to_string(W) + " k" + std::to_string(g.kh) + "x" +
                 std::to_string(g.kw) + " s" + std::to_string(g.sh) + "x" + std::to_string(g.sw) + " d" +
                 std::to_string(g.dh) + "x" + std::to_string(g.dw) + " p" + std::to_string(g.ph) + "x" +
                 std::to_string(g.pw) + " alg " + std::to_string(static_cast<int>(g.alg)));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < Cp; ++c)
        for (int64_t y = 0; y < g.oh; ++y)
          for (int64_t x = 0; x < g.ow; ++x) {
            const float got = dst[at(g.dst, n, c, y, x)];
            if (c >= C) {  // padded lanes stay zero
              ASSERT_EQ(got, 0.0f) << "padded lane " << c;
              continue;
            }
            const float want = pool_expected(img[static_cast<size_t>(n * C + c)], H, W, g, y, x);
            ASSERT_NEAR(got, want, 1e-5f * (1.0f + std::fabs(want))) << "n " << n << " c " << c << " y " << y << " x " << x;
          }
    ++checked;
  }
  EXPECT_GT(checked, 70);
}

TEST(CpuPooling, MaxPoolWithIndicesStaysOnReference) {
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 3, 8, 8})});
  auto* n = g->add_node("MaxPool", {x}, 2, "pool");
  n->attrs["kernel_shape"] = std::vector<int64_t>{2, 2};
  g->add_output(n->output(0));
  g->add_output(n->output(1));
  auto cg = compare_with_reference(g, {pool_random({1, 3, 8, 8}, 3)});
  EXPECT_EQ(count_type(*cg, "Pooling"), 0u);
}

TEST(CpuBatchNorm, MatchesReferenceInAnyLayout) {
  struct Case {
    Shape x;
    float eps;
    bool blocked;
  };
  std::vector<Case> cases = {{{2, 3, 5, 7}, 1e-5f, false}, {{1, 17, 9, 9}, 1e-3f, true}, {{1, 33, 6, 5}, 1e-5f, true},
                             {{3, 33}, 1e-5f, false},       {{2, 7, 11}, 1e-5f, true},  {{1, 5, 4, 6, 3}, 1e-2f, true}};
  uint32_t seed = 100;
  for (const auto& c : cases) {
    SCOPED_TRACE(shape_to_string(c.x) + (c.blocked ? " after conv" : ""));
    const int64_t C = c.x[1];
    auto g = make_graph();
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(c.x)});
    ir::Value* in = c.blocked ? pool_conv(*g, x, C, c.x.size() - 2, seed++) : x;
    auto* bn = g->add_node("BatchNormalization",
                           {in, g->add_constant("scale", pool_random({C}, seed++, 0.5f, 2.0f)),
                            g->add_constant("bias", pool_random({C}, seed++)),
                            g->add_constant("mean", pool_random({C}, seed++)),
                            g->add_constant("var", pool_random({C}, seed++, 0.1f, 3.0f))},
                           1, "bn");
    bn->attrs["epsilon"] = c.eps;
    g->add_output(bn->output(0));
    auto cg = compare_with_reference(g, {pool_random(c.x, seed++)});
    ASSERT_EQ(count_type(*cg, "BatchNorm"), 1u) << cg->describe();
    expect_jit(*cg, "BatchNorm");
    if (c.blocked) {
      const cpu::Node* b = pool_find(*cg, "BatchNorm");
      EXPECT_EQ(b->inputs[0]->name.find("/"), std::string::npos) << "reordered before BatchNorm:\n" << cg->describe();
    }
  }
  // training mode (batch statistics) stays on Reference
  auto g = make_graph(15);
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{2, 3, 4, 4})});
  std::vector<ir::Value*> ins = {x};
  for (const char* p : {"s", "b", "m", "v"}) ins.push_back(g->add_constant(p, pool_random({3}, 7, 0.5f, 1.5f)));
  auto* bn = g->add_node("BatchNormalization", ins, 1, "bn");
  bn->attrs["training_mode"] = int64_t(1);
  g->add_output(bn->output(0));
  auto cg = compare_with_reference(g, {pool_random({2, 3, 4, 4}, 8)});
  EXPECT_EQ(count_type(*cg, "BatchNorm"), 0u);
}

TEST(CpuConcat, ChannelConcatOfBlockedInputsStaysBlocked) {
  // a densenet-style block: x -> conv_a, conv_b; concat(conv_a, conv_b, conv_c) -> conv
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 16, 9, 9})});
  auto* a = pool_conv(*g, x, 16, 2, 1);
  auto* b = g->add_node("Conv", {x, g->add_constant("wb", pool_random({32, 16, 1, 1}, 2, -0.5f, 0.5f))}, 1, "cb")->output(0);
  auto* cc = g->add_node("Conv", {x, g->add_constant("wc", pool_random({16, 16, 1, 1}, 3, -0.5f, 0.5f))}, 1, "cc")->output(0);
  auto* cat = g->add_node("Concat", {a, b, cc}, 1, "cat");
  cat->attrs["axis"] = int64_t(1);
  auto* out = pool_conv(*g, cat->output(0), 64, 2, 4);
  g->add_output(out);
  auto cg = compare_with_reference(g, {pool_random({1, 16, 9, 9}, 5)});
  ASSERT_EQ(count_type(*cg, "Concat"), 1u) << cg->describe();
  expect_jit(*cg, "Concat");
  const cpu::Node* c = pool_find(*cg, "Concat");
  for (const cpu::Edge* e : c->inputs) EXPECT_EQ(e->name.find("/"), std::string::npos) << cg->describe();
  if (!c->inputs[0]->is_plain()) {
    EXPECT_FALSE(c->outputs[0]->is_plain()) << cg->describe();
    EXPECT_EQ(count_type(*cg, "Reorder"), 2u) << cg->describe();  // graph input and output only
  }
}

TEST(CpuConcat, DenseBlockInputIsConvertedOnceAndEveryConcatStaysBlocked) {
  // densenet: the block input (plain here) is concatenated with every new feature map;
  // each concat feeds a convolution
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 32, 10, 9})});
  auto conv = [&](ir::Value* in, int64_t ic, const std::string& name, uint32_t seed) {
    auto* n = g->add_node("Conv", {in, g->add_constant(name + "_w", pool_random({16, ic, 3, 3}, seed, -0.2f, 0.2f))}, 1, name);
    n->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
    return n->output(0);
  };
  auto* f1 = conv(x, 32, "f1", 1);
  auto* cat1 = g->add_node("Concat", {x, f1}, 1, "cat1");
  cat1->attrs["axis"] = int64_t(1);
  auto* f2 = conv(cat1->output(0), 48, "f2", 2);
  auto* cat2 = g->add_node("Concat", {x, f1, f2}, 1, "cat2");
  cat2->attrs["axis"] = int64_t(1);
  auto* f3 = conv(cat2->output(0), 64, "f3", 3);
  g->add_output(f3);
  auto cg = compare_with_reference(g, {pool_random({1, 32, 10, 9}, 4)});
  ASSERT_EQ(count_type(*cg, "Concat"), 2u) << cg->describe();
  expect_jit(*cg, "Concat");
  const cpu::Edge* f1_out = pool_output_of(*cg, "f1");
  if (!f1_out->is_plain()) {
    for (const char* c : {"cat1", "cat2"}) {
      EXPECT_EQ(pool_output_of(*cg, c)->layout_name(), f1_out->layout_name()) << cg->describe();
    }
    EXPECT_EQ(count_type(*cg, "Reorder"), 2u) << cg->describe();  // x once (shared), the output
  }
}

TEST(CpuConcat, SingleInputIsAView) {
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 17, 5, 4})});
  auto* c = pool_conv(*g, x, 17, 2, 1);
  auto* cat = g->add_node("Concat", {c}, 1, "cat");
  cat->attrs["axis"] = int64_t(1);
  g->add_output(pool_conv(*g, cat->output(0), 17, 2, 2));
  auto cg = compare_with_reference(g, {pool_random({1, 17, 5, 4}, 3)});
  ASSERT_EQ(count_type(*cg, "Concat"), 1u) << cg->describe();
  const cpu::Node* n = pool_find(*cg, "Concat");
  EXPECT_EQ(n->output_aliases_input(), 0);
  EXPECT_EQ(n->outputs[0]->layout_name(), n->inputs[0]->layout_name());
}

TEST(CpuConcat, MatchesReferenceForMixedLayoutsAxesAndConstants) {
  uint32_t seed = 200;
  // odd channel counts from convolutions: blocked sources at unaligned channel offsets
  {
    auto g = make_graph();
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{2, 3, 7, 5})});
    auto* a = g->add_node("Conv", {x, g->add_constant("wa", pool_random({17, 3, 1, 1}, seed++))}, 1, "ca")->output(0);
    auto* b = g->add_node("Conv", {x, g->add_constant("wb", pool_random({33, 3, 3, 3}, seed++))}, 1, "cb");
    b->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
    auto* cat = g->add_node("Concat", {a, x, b->output(0), a}, 1, "cat");
    cat->attrs["axis"] = int64_t(1);
    g->add_output(cat->output(0));
    auto cg = compare_with_reference(g, {pool_random({2, 3, 7, 5}, seed++)});
    EXPECT_EQ(count_type(*cg, "Concat"), 1u) << cg->describe();
  }
  // all blocked but 3 + 17 channels: offsets not a multiple of the block
  {
    auto g = make_graph();
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 3, 6, 6})});
    auto* a = pool_conv(*g, x, 3, 2, seed++);
    auto* b = g->add_node("Conv", {x, g->add_constant("wb", pool_random({17, 3, 1, 1}, seed++))}, 1, "cb")->output(0);
    auto* cat = g->add_node("Concat", {a, b}, 1, "cat");
    cat->attrs["axis"] = int64_t(1);
    g->add_output(pool_conv(*g, cat->output(0), 20, 2, seed++));
    auto cg = compare_with_reference(g, {pool_random({1, 3, 6, 6}, seed++)});
    EXPECT_EQ(count_type(*cg, "Concat"), 1u) << cg->describe();
  }
  // plain inputs along every axis, with a constant operand, ranks 1..4
  struct Case {
    Shape a, b;
    int64_t axis;
  };
  std::vector<Case> cases = {{{5}, {3}, 0},
                             {{2, 3}, {2, 5}, 1},
                             {{2, 3}, {4, 3}, -2},
                             {{2, 3, 4}, {2, 1, 4}, 1},
                             {{2, 3, 4}, {2, 3, 7}, -1},
                             {{2, 3, 4, 5}, {1, 3, 4, 5}, 0},
                             {{2, 3, 4, 5}, {2, 3, 2, 5}, 2}};
  for (const auto& c : cases) {
    SCOPED_TRACE(shape_to_string(c.a) + " ++ " + shape_to_string(c.b) + " axis " + std::to_string(c.axis));
    auto g = make_graph();
    auto* a = g->add_input("a", {DType::f32, ir::PartialShape(c.a)});
    auto* k = g->add_constant("k", pool_random(c.b, seed++));
    auto* cat = g->add_node("Concat", {a, k, a}, 1, "cat");
    cat->attrs["axis"] = c.axis;
    g->add_output(cat->output(0));
    auto cg = compare_with_reference(g, {pool_random(c.a, seed++)});
    EXPECT_EQ(count_type(*cg, "Concat"), 1u) << cg->describe();
  }
  // integer concatenation stays on Reference
  {
    auto g = make_graph();
    auto* a = g->add_input("a", {DType::i64, ir::PartialShape(Shape{3})});
    auto* cat = g->add_node("Concat", {a, g->add_constant("k", Tensor::from_vector<int64_t>({1, 2}, {2}))}, 1, "cat");
    cat->attrs["axis"] = int64_t(0);
    g->add_output(cat->output(0));
    auto cg = compare_with_reference(g, {Tensor::from_vector<int64_t>({4, 5, 6}, {3})});
    EXPECT_EQ(count_type(*cg, "Concat"), 0u);
  }
}

TEST(CpuLrn, MatchesReferenceForOddSizes) {
  struct Case {
    Shape x;
    int64_t size;
    float alpha, beta, bias;
    bool blocked;
    bool expect_onednn = true;
  };
  std::vector<Case> cases = {
      {{1, 17, 7, 9}, 5, 1e-4f, 0.75f, 1.0f, false},
      {{2, 33, 5, 5}, 5, 1e-4f, 0.75f, 1.0f, true},  // AlexNet / GoogLeNet v1 parameters
      {{1, 16, 6, 6}, 5, 2e-3f, 0.75f, 2.0f, true},
      {{1, 7, 4, 5}, 3, 0.5f, 0.6f, 1.5f, false},
      {{1, 9, 3, 3}, 1, 0.1f, 0.5f, 1.0f, true},
      {{2, 12, 9}, 3, 0.2f, 0.75f, 1.0f, false},         // 1D
      {{1, 10, 3, 4, 5}, 5, 1e-2f, 0.75f, 1.0f, false},  // 3D
      {{1, 8, 4, 4}, 4, 1e-2f, 0.75f, 1.0f, false, false},  // even size: windows differ
  };
  uint32_t seed = 300;
  for (const auto& c : cases) {
    SCOPED_TRACE(shape_to_string(c.x) + " size " + std::to_string(c.size) + (c.blocked ? " after conv" : ""));
    auto g = make_graph();
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(c.x)});
    ir::Value* in = c.blocked ? pool_conv(*g, x, c.x[1], c.x.size() - 2, seed++) : x;
    auto* n = g->add_node("LRN", {in}, 1, "lrn");
    n->attrs["size"] = c.size;
    n->attrs["alpha"] = c.alpha;
    n->attrs["beta"] = c.beta;
    n->attrs["bias"] = c.bias;
    g->add_output(n->output(0));
    auto cg = compare_with_reference(g, {pool_random(c.x, seed++, -3.0f, 3.0f)});
    ASSERT_EQ(count_type(*cg, "LRN"), c.expect_onednn ? 1u : 0u) << cg->describe();
  }
  // every odd size against channel counts below, at and above it, in each layout
  for (int64_t size : {1, 3, 5, 7, 9})
    for (int64_t C : {1, 5, 16, 32, 33})
      for (int layout = 0; layout < 3; ++layout) {
        if (layout == 2 && C != 32) continue;  // nChw16c from the grouped convolution
        SCOPED_TRACE("size " + std::to_string(size) + " C " + std::to_string(C) + " layout " + std::to_string(layout));
        Shape xs = {2, C, 5, 6};
        auto g = make_graph();
        auto* x = g->add_input("x", {DType::f32, ir::PartialShape(xs)});
        ir::Value* in = layout == 0 ? x : layout == 1 ? pool_conv(*g, x, C, 2, seed++) : pool_conv16(*g, x, 2, seed++);
        auto* n = g->add_node("LRN", {in}, 1, "lrn");
        n->attrs["size"] = size;
        n->attrs["alpha"] = 0.02f;
        n->attrs["beta"] = 0.75f;
        n->attrs["bias"] = 1.5f;
        g->add_output(n->output(0));
        auto cg = compare_with_reference(g, {pool_random(xs, seed++, -3.0f, 3.0f)});
        ASSERT_EQ(count_type(*cg, "LRN"), 1u) << cg->describe();
      }
}

namespace {

struct ResizeCase {
  std::string name;
  Shape x;
  std::vector<float> scales;   // or
  std::vector<int64_t> sizes;
  std::string mode, coord, nearest;
  bool expect_onednn;
  bool blocked = false;
  std::string op = "Resize";
  int opset = 13;
};

}  // namespace

TEST(CpuResize, MatchesReferenceOnKilnsKernelOrWhereOneDnnReproducesIt) {
  // Each resize is the graph's output: kiln's kernel takes every 4-D nearest / linear one of the
  // two last dims where the CPU has AVX2 (whatever oneDNN would do: no Reorder after it); the
  // others oneDNN where it reproduces the reference, else the reference
  std::vector<ResizeCase> cases = {
      {"nearest asymmetric floor x2", {1, 3, 7, 9}, {1, 1, 2, 2}, {}, "nearest", "asymmetric", "floor", true},
      {"nearest asymmetric floor x2 blocked", {1, 17, 5, 6}, {1, 1, 2, 2}, {}, "nearest", "asymmetric", "floor", true, true},
      {"nearest asymmetric floor x3,x2", {2, 4, 5, 6}, {1, 1, 3, 2}, {}, "nearest", "asymmetric", "floor", true},
      {"nearest half_pixel x2", {1, 3, 7, 9}, {1, 1, 2, 2}, {}, "nearest", "half_pixel", "round_prefer_floor", true},
      {"nearest half_pixel x3 ceil-pref", {1, 3, 4, 5}, {1, 1, 3, 3}, {}, "nearest", "half_pixel", "round_prefer_ceil", true},
      {"nearest sizes x2,x3", {1, 3, 7, 9}, {}, {1, 3, 14, 27}, "nearest", "asymmetric", "floor", true},
      {"nearest 1D x4", {2, 3, 5}, {1, 1, 4}, {}, "nearest", "asymmetric", "floor", true},
      {"nearest 3D x2", {1, 2, 3, 4, 5}, {1, 1, 2, 2, 2}, {}, "nearest", "asymmetric", "floor", true, true},
      {"linear half_pixel x2", {1, 3, 7, 9}, {1, 1, 2, 2}, {}, "linear", "half_pixel", "", true},
      {"linear half_pixel x2 blocked", {1, 33, 5, 4}, {1, 1, 2, 2}, {}, "linear", "half_pixel", "", true, true},
      {"linear half_pixel x1.5", {1, 3, 4, 6}, {1, 1, 1.5f, 1.5f}, {}, "linear", "half_pixel", "", true},
      {"linear half_pixel /2", {1, 3, 8, 10}, {1, 1, 0.5f, 0.5f}, {}, "linear", "half_pixel", "", true},
      {"linear half_pixel sizes 7->10", {1, 3, 7, 7}, {}, {1, 3, 10, 13}, "linear", "half_pixel", "", true},
      {"linear pytorch_half_pixel x2", {1, 5, 6, 3}, {1, 1, 2, 2}, {}, "linear", "pytorch_half_pixel", "", true},
      {"linear one axis only", {1, 5, 6, 3}, {1, 1, 1, 3}, {}, "linear", "half_pixel", "", true},
      {"linear 3D", {1, 2, 3, 4, 5}, {1, 1, 2, 1.5f, 2}, {}, "linear", "half_pixel", "", true},
      {"upsample nearest", {1, 3, 4, 5}, {1, 1, 2, 2}, {}, "nearest", "", "", true, false, "Upsample", 9},
      {"resize-10 nearest", {1, 3, 4, 5}, {1, 1, 2, 3}, {}, "nearest", "", "", true, false, "Resize", 10},
      // stays on Reference
      {"nearest asymmetric floor /2", {1, 3, 8, 8}, {1, 1, 0.5f, 0.5f}, {}, "nearest", "asymmetric", "floor", false},
      {"nearest half_pixel x1.5", {1, 3, 4, 4}, {1, 1, 1.5f, 1.5f}, {}, "nearest", "half_pixel", "round_prefer_floor", false},
      {"nearest half_pixel ceil x2", {1, 3, 4, 4}, {1, 1, 2, 2}, {}, "nearest", "half_pixel", "ceil", false},
      {"linear align_corners x2", {1, 3, 4, 4}, {1, 1, 2, 2}, {}, "linear", "align_corners", "", false},
      {"linear asymmetric x2", {1, 3, 4, 4}, {1, 1, 2, 2}, {}, "linear", "asymmetric", "", false},
      {"linear scale != out/in", {1, 3, 5, 5}, {1, 1, 1.7f, 1.7f}, {}, "linear", "half_pixel", "", false},
      {"cubic", {1, 3, 4, 4}, {1, 1, 2, 2}, {}, "cubic", "half_pixel", "", false},
      {"channels resized", {1, 3, 4, 4}, {1, 2, 2, 2}, {}, "nearest", "asymmetric", "floor", false},
      {"linear align_corners sizes 5x7 -> 19x30", {2, 3, 5, 7}, {}, {2, 3, 19, 30}, "linear", "align_corners", "", false},
      {"linear half_pixel_symmetric x1.7", {1, 3, 5, 6}, {1, 1, 1.7f, 1.7f}, {}, "linear", "half_pixel_symmetric", "", false,
       false, "Resize", 19},
      {"nearest tf_half_pixel_for_nn x2.5", {1, 2, 4, 6}, {1, 1, 2.5f, 2.5f}, {}, "nearest", "tf_half_pixel_for_nn",
       "round_prefer_ceil", false},
      {"linear align_corners to one row", {1, 2, 6, 9}, {}, {1, 2, 1, 17}, "linear", "align_corners", "", false},
  };
  uint32_t seed = 400;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto g = make_graph(c.opset);
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(c.x)});
    ir::Value* in = c.blocked ? pool_conv(*g, x, c.x[1], c.x.size() - 2, seed++) : x;
    const int64_t rank = static_cast<int64_t>(c.x.size());
    ir::Node* n;
    ir::Value* scales =
        c.scales.empty() ? nullptr : g->add_constant("scales", Tensor::from_vector<float>(c.scales, {rank}));
    if (c.op == "Upsample") {
      n = g->add_node(c.op, {in, scales}, 1, "resize");
    } else if (c.opset == 10) {
      n = g->add_node(c.op, {in, nullptr, scales}, 1, "resize");  // as the frontend normalises Resize-10
    } else {
      ir::Value* sizes = c.sizes.empty() ? nullptr : g->add_constant("sizes", Tensor::from_vector<int64_t>(c.sizes, {rank}));
      n = g->add_node("Resize", {in, nullptr, scales, sizes}, 1, "resize");
      if (!c.coord.empty()) n->attrs["coordinate_transformation_mode"] = c.coord;
      if (!c.nearest.empty()) n->attrs["nearest_mode"] = c.nearest;
    }
    n->attrs["mode"] = c.mode;
    g->add_output(n->output(0));
    auto cg = compare_with_reference(g, {pool_random(c.x, seed++)});
    const bool channels = c.scales.empty() ? c.sizes[1] != c.x[1] : c.scales[1] != 1.0f;
    if (cpu::resize_f32::available() && c.x.size() == 4 && c.mode != "cubic" && !channels) {
      ASSERT_EQ(count_type(*cg, "Resize"), 1u) << cg->describe();
      EXPECT_EQ(pool_find(*cg, "Resize")->impl, cpu::resize_f32::impl_name()) << cg->describe();
      continue;
    }
    ASSERT_EQ(count_type(*cg, "Resize"), c.expect_onednn ? 1u : 0u) << cg->describe();
    if (c.expect_onednn) expect_jit(*cg, "Resize");
  }
}

TEST(CpuResize, KilnsKernelLeavesOutTapsOfWeightZeroAsTheReference) {
  // infinities and NaN in the input: at an output pixel on an input pixel (weight 1 and 0) the
  // reference takes that pixel alone, where 0 * inf would be NaN
  if (!cpu::resize_f32::available()) GTEST_SKIP() << "kiln's resize needs AVX2";
  for (const std::string mode : {"linear", "nearest"}) {
    SCOPED_TRACE(mode);
    auto g = make_graph(13);
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 2, 5, 11})});
    auto* n = g->add_node("Resize", {x, nullptr, nullptr, g->add_constant("sizes", Tensor::from_vector<int64_t>({1, 2, 9, 21}, {4}))},
                          1, "resize");
    n->attrs["mode"] = mode;
    n->attrs["coordinate_transformation_mode"] = std::string("align_corners");
    g->add_output(n->output(0));
    Tensor in = pool_random({1, 2, 5, 11}, 77);
    in.data<float>()[3] = std::numeric_limits<float>::infinity();
    in.data<float>()[11 + 4] = -std::numeric_limits<float>::infinity();
    in.data<float>()[55 + 22 + 6] = std::numeric_limits<float>::quiet_NaN();
    ir::infer_shapes(*g);
    runtime::ReferenceExecutor ref(g);
    const Tensor want = ref.run({in})[0];
    cpu::Graph cg(g);
    ASSERT_EQ(pool_find(cg, "Resize")->impl, cpu::resize_f32::impl_name()) << cg.describe();
    const Tensor got = cg.run({in})[0];
    size_t infinite = 0;
    for (int64_t i = 0; i < want.size(); ++i) {
      const float a = got.data<float>()[i], b = want.data<float>()[i];
      infinite += std::isinf(b);
      if (std::isnan(b)) EXPECT_TRUE(std::isnan(a)) << i;
      else if (std::isinf(b)) EXPECT_EQ(a, b) << i;
      else EXPECT_NEAR(a, b, 1e-5f * (1 + std::fabs(b))) << i;
    }
    EXPECT_GT(infinite, 0u);
  }
}

TEST(CpuLayouts, PoolNormConcatLrnResizeRunOnChannelBlockedInputs) {
  // every kind takes nChw16c from a grouped convolution as it is and writes it back
  using Maker = std::function<ir::Value*(ir::Graph&, ir::Value*)>;
  auto node = [](const std::string& op, std::function<void(ir::Node*)> attrs, std::vector<ir::Value*> extra = {}) {
    return Maker([=](ir::Graph& g, ir::Value* in) {
      std::vector<ir::Value*> ins = {in};
      ins.insert(ins.end(), extra.begin(), extra.end());
      auto* n = g.add_node(op, ins, 1, "op");
      attrs(n);
      return n->output(0);
    });
  };
  struct Case {
    std::string kind;
    Maker make;
  };
  std::vector<Case> cases = {
      {"Pooling", node("MaxPool", [](ir::Node* n) {
         n->attrs["kernel_shape"] = std::vector<int64_t>{3, 3};
         n->attrs["strides"] = std::vector<int64_t>{2, 2};
         n->attrs["ceil_mode"] = int64_t(1);
       })},
      {"Pooling", node("AveragePool", [](ir::Node* n) {
         n->attrs["kernel_shape"] = std::vector<int64_t>{3, 3};
         n->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
         n->attrs["count_include_pad"] = int64_t(1);
       })},
      {"Pooling", node("GlobalAveragePool", [](ir::Node*) {})},
      {"LRN", node("LRN", [](ir::Node* n) { n->attrs["size"] = int64_t(5); })},
      {"BatchNorm", [](ir::Graph& g, ir::Value* in) {
         auto* n = g.add_node("BatchNormalization",
                              {in, g.add_constant("s", pool_random({32}, 1, 0.5f, 2.0f)), g.add_constant("b", pool_random({32}, 2)),
                               g.add_constant("m", pool_random({32}, 3)), g.add_constant("v", pool_random({32}, 4, 0.2f, 2.0f))},
                              1, "op");
         return n->output(0);
       }},
      {"Concat", [](ir::Graph& g, ir::Value* in) {
         auto* n = g.add_node("Concat", {in, pool_conv16(g, in, 2, 77)}, 1, "op");
         n->attrs["axis"] = int64_t(1);
         return n->output(0);
       }},
      {"Resize", [](ir::Graph& g, ir::Value* in) {
         // read by another node (a graph output would take kiln's kernel, plain)
         auto* n = g.add_node("Resize", {in, nullptr, g.add_constant("sc", Tensor::from_vector<float>({1, 1, 2, 2}, {4}))}, 1, "op");
         n->attrs["mode"] = std::string("linear");
         auto* reader = g.add_node("Concat", {n->output(0), n->output(0)}, 1, "reader");
         reader->attrs["axis"] = int64_t(1);
         return reader->output(0);
       }},
  };
  uint32_t seed = 500;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.kind);
    auto g = make_graph();
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 32, 9, 11})});
    auto* blocked = pool_conv16(*g, x, 2, seed++);
    g->add_output(c.make(*g, blocked));
    auto cg = compare_with_reference(g, {pool_random({1, 32, 9, 11}, seed++)});
    ASSERT_EQ(count_type(*cg, c.kind), 1u) << cg->describe();
    expect_jit(*cg, c.kind);
    const cpu::Node* n = pool_find(*cg, c.kind);
    const cpu::Edge* conv_out = pool_output_of(*cg, "gconv" + std::to_string(seed - 2));
    ASSERT_TRUE(conv_out);
    EXPECT_EQ(n->inputs[0], conv_out) << cg->describe();
    EXPECT_EQ(n->outputs[0]->layout_name(), conv_out->layout_name()) << cg->describe();
  }
}

TEST(CpuConcat, ChannelBlocksAtUnalignedOffsets) {
  for (bool plain_first : {true, false}) {
    auto g = make_graph();
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 32, 6, 5})});
    auto* z = g->add_input("z", {DType::f32, ir::PartialShape(Shape{1, 3, 6, 5})});
    auto* a = pool_conv16(*g, x, 2, 1);
    auto* b = pool_conv16(*g, x, 2, 2);
    std::vector<ir::Value*> ins = plain_first ? std::vector<ir::Value*>{z, a, b} : std::vector<ir::Value*>{a, z, b};
    auto* cat = g->add_node("Concat", ins, 1, "cat");
    cat->attrs["axis"] = int64_t(1);
    g->add_output(cat->output(0));
    auto cg = compare_with_reference(g, {pool_random({1, 32, 6, 5}, 3), pool_random({1, 3, 6, 5}, 4)});
    ASSERT_EQ(count_type(*cg, "Concat"), 1u) << cg->describe();
    // the convolutions' outputs in the layout they picked (blocked by 16 or 8, depending on
    // the ISA), read as they are (no Reorder) and written at channel offsets 3 / 35 (not a
    // multiple of the block)
    const cpu::Node* c = pool_find(*cg, "Concat");
    const cpu::Edge* conv_out = pool_output_of(*cg, "gconv1");
    ASSERT_TRUE(conv_out);
    EXPECT_FALSE(conv_out->is_plain()) << cg->describe();
    EXPECT_EQ(c->inputs[plain_first ? 1 : 0], conv_out) << cg->describe();
  }
}

TEST(CpuPooling, RandomGeometriesMatchReference) {
  // a fixed-seed sweep over kernels, strides, dilations, pads, ceil_mode and
  // count_include_pad in 1D/2D/3D: wherever oneDNN takes the node it must agree
  std::mt19937 rng(2024);
  auto pick = [&](int lo, int hi) { return static_cast<int64_t>(lo + static_cast<int>(rng() % static_cast<unsigned>(hi - lo + 1))); };
  int taken = 0, tried = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const size_t sp = static_cast<size_t>(pick(1, 3));
    const bool avg = rng() % 2;
    const bool blocked = rng() % 3 == 0;
    Shape xs = {pick(1, 2), std::vector<int64_t>{1, 3, 17, 33}[rng() % 4]};
    std::vector<int64_t> k, s, d, p(2 * sp);
    for (size_t i = 0; i < sp; ++i) {
      xs.push_back(pick(1, sp == 3 ? 7 : 12));
      k.push_back(pick(1, 4));
      s.push_back(pick(1, 3));
      d.push_back(rng() % 4 == 0 ? 2 : 1);
      const int64_t ek = (k[i] - 1) * d[i] + 1;
      p[i] = rng() % 2 ? pick(0, static_cast<int>(ek - 1)) : 0;
      p[sp + i] = rng() % 2 ? pick(0, static_cast<int>(ek - 1)) : 0;
    }
    auto g = make_graph();
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(xs)});
    ir::Value* in = blocked ? pool_conv(*g, x, xs[1], sp, static_cast<uint32_t>(trial + 1)) : x;
    auto* n = g->add_node(avg ? "AveragePool" : "MaxPool", {in}, 1, "pool");
    n->attrs["kernel_shape"] = k;
    n->attrs["strides"] = s;
    n->attrs["dilations"] = d;
    n->attrs["pads"] = p;
    n->attrs["ceil_mode"] = static_cast<int64_t>(rng() % 2);
    if (avg) n->attrs["count_include_pad"] = static_cast<int64_t>(rng() % 2);
    g->add_output(n->output(0));
    try {
      ir::infer_shapes(*g);
    } catch (const Error&) {
      continue;  // the window does not fit
    }
    if (!n->output(0)->type.shape.is_static() || shape_size(n->output(0)->type.shape.to_shape()) == 0) continue;
    SCOPED_TRACE("trial " + std::to_string(trial) + ": " + n->op_type() + " x" + shape_to_string(xs));
    ++tried;
    auto cg = compare_with_reference(g, {pool_random(xs, static_cast<uint32_t>(trial))});
    taken += static_cast<int>(count_type(*cg, "Pooling"));
    if (HasFatalFailure() || HasNonfatalFailure()) {
      std::cerr << "node attrs: k " << shape_to_string(k) << " s " << shape_to_string(s) << " d " << shape_to_string(d)
                << " p " << shape_to_string(p) << " ceil " << n->attr_i("ceil_mode") << "\n";
      break;
    }
  }
  EXPECT_GT(tried, 150);
  EXPECT_GT(taken, tried / 2);
}

TEST(CpuResize, RandomConfigurationsMatchReference) {
  std::mt19937 rng(7);
  const char* modes[] = {"nearest", "linear"};
  const char* coords[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn"};
  const char* nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  const float scales[] = {0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 0.75f, 1.25f, 0.6f, 4.0f};
  int taken = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const size_t sp = 1 + rng() % 3;
    Shape xs = {1 + static_cast<int64_t>(rng() % 2), 1 + static_cast<int64_t>(rng() % 5)};
    for (size_t i = 0; i < sp; ++i) xs.push_back(1 + static_cast<int64_t>(rng() % (sp == 3 ? 5 : 9)));
    const int64_t rank = static_cast<int64_t>(xs.size());
    auto g = make_graph();
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(xs)});
    ir::Value *sc = nullptr, *sz = nullptr;
    if (rng() % 2) {
      std::vector<float> v = {1, 1};
      for (size_t i = 0; i < sp; ++i) v.push_back(scales[rng() % 9]);
      sc = g->add_constant("scales", Tensor::from_vector<float>(v, {rank}));
    } else {
      std::vector<int64_t> v = {xs[0], xs[1]};
      for (size_t i = 0; i < sp; ++i) v.push_back(1 + static_cast<int64_t>(rng() % 16));
      sz = g->add_constant("sizes", Tensor::from_vector<int64_t>(v, {rank}));
    }
    auto* n = g->add_node("Resize", {x, nullptr, sc, sz}, 1, "resize");
    n->attrs["mode"] = std::string(modes[rng() % 2]);
    n->attrs["coordinate_transformation_mode"] = std::string(coords[rng() % 5]);
    n->attrs["nearest_mode"] = std::string(nearest[rng() % 4]);
    g->add_output(n->output(0));
    try {
      ir::infer_shapes(*g);
    } catch (const Error&) {
      continue;
    }
    if (shape_size(n->output(0)->type.shape.to_shape()) == 0) continue;
    SCOPED_TRACE("trial " + std::to_string(trial) + ": " + n->attr_s("mode") + " " +
                 n->attr_s("coordinate_transformation_mode") + " " + n->attr_s("nearest_mode") + " x" +
                 shape_to_string(xs) + " -> " + shape_to_string(n->output(0)->type.shape.to_shape()));
    auto cg = compare_with_reference(g, {pool_random(xs, static_cast<uint32_t>(trial))});
    taken += static_cast<int>(count_type(*cg, "Resize"));
    if (HasFailure()) break;
  }
  EXPECT_GT(taken, 30);
}

}  // namespace test_cpu_pooling
