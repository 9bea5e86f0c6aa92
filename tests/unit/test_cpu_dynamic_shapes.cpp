// Every runtime node kind under changing input shapes: one cpu::Executor per model runs a
// stream of shapes that grow, shrink, alternate and change the batch (1 and more), each
// inference compared with the reference executor. The plans of one thread share one arena
// and the packed weights, so a node that kept a pointer or a size from another shape's plan
// shows up here as a wrong value (or, under AddressSanitizer, as a bad access).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>

#include "cpu/attention_f32.hpp"
#include "cpu/depthwise_f32.hpp"
#include "cpu/executor.hpp"
#include "cpu/gemm_f32.hpp"
#include "cpu/graph_optimizer.hpp"
#include "cpu/grouped_conv_f32.hpp"
#include "cpu/gru_f32.hpp"
#include "cpu/isa.hpp"
#include "cpu/layer_norm_f32.hpp"
#include "cpu/lstm_f32.hpp"
#include "cpu/nodes/int8_util.hpp"
#include "snippets/generator.hpp"
#include "ir/op_registry.hpp"
#include "runtime/reference_executor.hpp"

#include "cpu_test_util.hpp"
#include "qdq_test_util.hpp"

namespace test_cpu_dynamic_shapes {

using namespace kiln;
using namespace kiln::test;

namespace {

using ir::Dim;

ir::PartialShape dims(std::vector<Dim> d) { return ir::PartialShape(std::move(d)); }

// How an output of the stream is compared with the reference's (default: expect_close 1e-4).
using Compare = std::function<void(const Tensor& want, const Tensor& got)>;

// Runs `shapes` (one entry per inference: every input's shape) through one executor, twice
// over (the second time every plan exists), and checks that each kind in `kinds` ran in the
// last shape's plan. Returns the executor, for checks of its plans.
std::shared_ptr<cpu::Executor> run_stream(const std::shared_ptr<ir::Graph>& g, const std::vector<std::vector<Shape>>& shapes,
                                          const std::vector<std::string>& kinds, const Compare& compare = {},
                                          const cpu::GraphOptions& options = {}) {  // {}: f32
  ir::infer_shapes(*g);
  runtime::ReferenceExecutor ref(g);
  auto executor = std::make_shared<cpu::Executor>(g, options);
  cpu::Executor& ex = *executor;
  uint32_t seed = 1;
  std::vector<Tensor> previous;
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& s : shapes) {
      SCOPED_TRACE(cat("pass ", pass, ", shapes ", shape_to_string(s[0])));
      std::vector<Tensor> in;
      for (size_t i = 0; i < s.size(); ++i) {
        const DType t = g->inputs()[i]->type.dtype;
        if (t == DType::i64) {  // a sequence length
          in.push_back(Tensor::from_vector<int64_t>(std::vector<int64_t>(static_cast<size_t>(shape_size(s[i])), 1), s[i]));
        } else {
          in.push_back(random_tensor(s[i], seed++));
        }
      }
      auto want = ref.run(in);
      auto got = ex.run(in, nullptr, pass ? &previous : nullptr);  // outputs written over the last ones
      EXPECT_EQ(want.size(), got.size());
      if (want.size() != got.size()) return executor;
      for (size_t i = 0; i < want.size(); ++i) {
        if (compare) compare(want[i], got[i]);
        else expect_close(want[i], got[i], 1e-4, 1e-4);
      }
      previous = got;
    }
  const auto& plan = ex.plan_for(shapes.back());
  EXPECT_TRUE(plan.cpu) << plan.fallback_reason;
  if (plan.cpu) {
    for (const std::string& k : kinds) EXPECT_GE(count_type(*plan.cpu, k), 1u) << k << "\n" << plan.cpu->describe();
  }
  return executor;
}

// Nodes of `kind` in the plan of `shapes` (0 without a cpu::Graph).
size_t count_kind(cpu::Executor& ex, const std::vector<Shape>& shapes, cpu::NodeKind kind) {
  const auto& plan = ex.plan_for(shapes);
  if (!plan.cpu) return 0;
  return static_cast<size_t>(std::count_if(plan.cpu->nodes().begin(), plan.cpu->nodes().end(),
                                           [&](const auto& n) { return n->kind() == kind; }));
}

// [N, C, H, W] streams: grow, shrink, alternate, then batch 3.
std::vector<std::vector<Shape>> image_stream(int64_t c) {
  return {{{1, c, 8, 8}}, {{1, c, 8, 24}}, {{1, c, 16, 40}}, {{1, c, 8, 12}},
          {{1, c, 16, 40}}, {{1, c, 8, 8}}, {{3, c, 8, 24}}, {{2, c, 16, 8}}};
}

// Every node of `kind` in the plans of `stream` runs kiln's kernel `impl` (any of kiln's when
// empty) when the ISA in use has it (`available`: nothing made per shape), else a oneDNN one.
void expect_kiln_kernel(const std::shared_ptr<ir::Graph>& g, const std::vector<std::vector<Shape>>& stream,
                        cpu::NodeKind kind, bool available, const std::string& impl) {
  cpu::Executor ex(g);
  size_t seen = 0;
  for (const auto& s : stream) {
    const auto& plan = ex.plan_for(s);
    ASSERT_TRUE(plan.cpu) << plan.fallback_reason;
    for (const auto& n : plan.cpu->nodes()) {
      if (n->kind() != kind) continue;
      ++seen;
      if (available && impl.empty()) {  // one of kiln's kernels, whichever
        EXPECT_EQ(n->impl.rfind("kiln", 0), 0u) << n->name << ": " << n->impl;
      } else if (available) {
        EXPECT_EQ(n->impl, impl) << n->name;
      } else {
        EXPECT_EQ(n->impl.find("kiln"), std::string::npos) << n->name;
      }
    }
  }
  EXPECT_GE(seen, stream.size());
}

void expect_attention_impl(const std::shared_ptr<ir::Graph>& g, const std::vector<std::vector<Shape>>& stream) {
  expect_kiln_kernel(g, stream, cpu::NodeKind::Attention, cpu::attention_f32::available(), cpu::attention_f32::impl_name());
}

// kiln's MultiHeadAttention over x [n, L, hidden] (as query, key and value) with an additive mask
// [n, 1, 1, L]: inputs "x" and "mask".
std::shared_ptr<ir::Graph> self_attention_graph(int64_t hidden, int64_t heads, float scale) {
  auto g = make_graph();
  g->opset_imports["kiln"] = 1;
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), Dim::sym("L"), hidden})});
  auto* mask = g->add_input("mask", {DType::f32, dims({Dim::sym("n"), 1, 1, Dim::sym("L")})});
  ir::Node* a = g->add_node("MultiHeadAttention", {x, x, x, mask}, 1, "mha", "kiln");
  a->attrs["num_heads"] = ir::Attribute(heads);
  a->attrs["scale"] = ir::Attribute(scale);
  g->add_output(a->output(0));
  return g;
}

ir::Value* conv(ir::Graph& g, ir::Value* x, int64_t ci, int64_t co, uint32_t seed, const std::string& name) {
  return conv3x3(g, x, ci, co, seed, name, 0.5f);
}

}  // namespace

TEST(CpuDynamicShapes, ConvolutionPoolingConcatAndInPlaceSums) {
  // conv + relu (post-op), a residual sum, pooling of both kinds, a channel concat written in place
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), 4, Dim::sym("h"), Dim::sym("w")})});
  auto* a = g->add_node("Relu", {conv(*g, x, 4, 16, 1, "c1")}, 1, "r1")->output(0);
  auto* b = conv(*g, a, 16, 16, 3, "c2");
  auto* sum = g->add_node("Add", {b, a}, 1, "sum")->output(0);
  auto* mp = g->add_node("MaxPool", {sum}, 1, "mp");
  mp->attrs["kernel_shape"] = std::vector<int64_t>{2, 2};
  mp->attrs["strides"] = std::vector<int64_t>{2, 2};
  auto* ap = g->add_node("AveragePool", {mp->output(0)}, 1, "ap");
  ap->attrs["kernel_shape"] = std::vector<int64_t>{3, 3};
  ap->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  auto* c3 = conv(*g, mp->output(0), 16, 16, 5, "c3");
  auto* cat_ = g->add_node("Concat", {c3, ap->output(0)}, 1, "cat");
  cat_->attrs["axis"] = int64_t(1);
  g->add_output(cat_->output(0));
  run_stream(g, image_stream(4), {"Convolution", "Pooling", "Concat"});
}

namespace {

// MobileNet's layers: Conv (k x k, pads k / 2, random weights and bias), Clip(0, 6)
ir::Value* conv(ir::Graph& g, ir::Value* v, int64_t ci, int64_t co, int64_t k, int64_t stride, int64_t group,
                uint32_t seed, const std::string& n) {
  auto* c = g.add_node("Conv", {v, g.add_constant(n + "_w", random_tensor({co, ci / group, k, k}, seed, 0.4f)),
                                g.add_constant(n + "_b", random_tensor({co}, seed + 1, 0.2f))}, 1, n);
  c->attrs["group"] = group;
  c->attrs["pads"] = std::vector<int64_t>(4, k / 2);
  c->attrs["strides"] = std::vector<int64_t>{stride, stride};
  return c->output(0);
}
ir::Value* clip6(ir::Graph& g, ir::Value* v, const std::string& n) {
  return g.add_node("Clip", {v, g.add_constant(n + "_lo", Tensor::scalar<float>(0.0f)),
                             g.add_constant(n + "_hi", Tensor::scalar<float>(6.0f))}, 1, n)->output(0);
}

}  // namespace

TEST(CpuDynamicShapes, InvertedResidualBlocksOverEveryShapeAndBatch) {
  // MobileNet-v2's blocks: expansion + Clip, 3x3 depthwise (stride 2, then 1) + Clip,
  // projection, a residual sum; one DepthwiseBlock node each where kiln's kernels run (AVX2)
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), 8, Dim::sym("h"), Dim::sym("w")})});
  auto clip = [&](ir::Value* v, const std::string& n) { return clip6(*g, v, n); };
  auto conv = [&](ir::Value* v, int64_t ci, int64_t co, int64_t k, int64_t stride, int64_t group, uint32_t seed,
                  const std::string& n) { return test_cpu_dynamic_shapes::conv(*g, v, ci, co, k, stride, group, seed, n); };
  auto* a = clip(conv(x, 8, 16, 3, 1, 1, 1, "stem"), "a0");
  auto* b1 = conv(clip(conv(clip(conv(a, 16, 48, 1, 1, 1, 3, "e1"), "a1"), 48, 48, 3, 2, 48, 5, "d1"), "a2"), 48, 24, 1,
                  1, 1, 7, "p1");
  auto* e2 = clip(conv(b1, 24, 72, 1, 1, 1, 9, "e2"), "a3");
  auto* p2 = conv(clip(conv(e2, 72, 72, 3, 1, 72, 11, "d2"), "a4"), 72, 24, 1, 1, 1, 13, "p2");
  g->add_output(g->add_node("Add", {p2, b1}, 1, "sum")->output(0));
  const bool kiln = cpu::depthwise_f32::available();
  auto ex = run_stream(g, image_stream(8), kiln ? std::vector<std::string>{"DepthwiseBlock"} : std::vector<std::string>{});
  for (const auto& s : image_stream(8))
    EXPECT_EQ(count_kind(*ex, s, cpu::NodeKind::DepthwiseBlock), kiln ? 2u : 0u) << shape_to_string(s[0]);
}

TEST(CpuDynamicShapes, AStemAsItsFirstBlocksExpansionOverEveryShapeAndBatch) {
  // MobileNet-v2's stem (3x3 stride 2 over 3 channels) + Clip, then its first block (3x3
  // depthwise + Clip, projection): one DepthwiseBlock, the stem its im2col expansion (AVX2)
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), 3, Dim::sym("h"), Dim::sym("w")})});
  auto* stem = clip6(*g, conv(*g, x, 3, 16, 3, 2, 1, 1, "stem"), "stem_clip");
  auto* d = clip6(*g, conv(*g, stem, 16, 16, 3, 1, 16, 3, "dw"), "dw_clip");
  g->add_output(conv(*g, d, 16, 8, 1, 1, 1, 5, "project"));
  const bool kiln = cpu::depthwise_f32::available();
  auto ex = run_stream(g, image_stream(3), kiln ? std::vector<std::string>{"DepthwiseBlock"} : std::vector<std::string>{});
  for (const auto& s : image_stream(3)) {
    EXPECT_EQ(count_kind(*ex, s, cpu::NodeKind::DepthwiseBlock), kiln ? 1u : 0u) << shape_to_string(s[0]);
    EXPECT_EQ(count_kind(*ex, s, cpu::NodeKind::Convolution), kiln ? 0u : 3u) << shape_to_string(s[0]);
  }
}

TEST(CpuDynamicShapes, EfficientNetBlocksTakeTheirSwishesIntoKilnsKernelsAtEveryShapeAndBatch) {
  // EfficientNet's stem (3x3 stride 2 over 3 channels) and an MBConv block (expansion, 3x3
  // depthwise, projection, a residual sum), each convolution but the projection followed by a
  // written-out Swish (Sigmoid, Mul): where kiln's kernels run (AVX2), the stem a Convolution
  // and the block a DepthwiseBlock, every Swish in their epilogues, no Subgraph; elsewhere
  // oneDNN's convolutions with swish post-ops (no snippets target either). Images large enough
  // that a Swish would otherwise leave for the snippets (an output of 4096 values or more).
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), 3, Dim::sym("h"), Dim::sym("w")})});
  auto swish = [&](ir::Value* v, const std::string& n) {
    return g->add_node("Mul", {v, g->add_node("Sigmoid", {v}, 1, n + "_sig")->output(0)}, 1, n)->output(0);
  };
  auto* stem = swish(conv(*g, x, 3, 16, 3, 2, 1, 1, "stem"), "stem_swish");
  auto* e = swish(conv(*g, stem, 16, 64, 1, 1, 1, 3, "expand"), "expand_swish");
  auto* d = swish(conv(*g, e, 64, 64, 3, 1, 64, 5, "dw"), "dw_swish");
  g->add_output(g->add_node("Add", {conv(*g, d, 64, 16, 1, 1, 1, 7, "project"), stem}, 1, "sum")->output(0));
  const std::vector<std::vector<Shape>> stream = {{{1, 3, 64, 64}}, {{2, 3, 48, 80}}, {{1, 3, 96, 40}},
                                                  {{3, 3, 40, 56}}, {{1, 3, 64, 64}}};
  const bool kiln = cpu::depthwise_f32::available() && cpu::gemm_f32::available();
  auto ex = run_stream(g, stream, kiln ? std::vector<std::string>{"DepthwiseBlock"} : std::vector<std::string>{});
  for (const auto& s : stream) {
    SCOPED_TRACE(shape_to_string(s[0]));
    EXPECT_EQ(count_kind(*ex, s, cpu::NodeKind::Subgraph), 0u);
    EXPECT_EQ(count_kind(*ex, s, cpu::NodeKind::DepthwiseBlock), kiln ? 1u : 0u);
    const auto& plan = ex->plan_for(s);
    ASSERT_TRUE(plan.cpu) << plan.fallback_reason;
    std::set<std::string> fused;
    for (const auto& n : plan.cpu->nodes()) fused.insert(n->fused.begin(), n->fused.end());
    for (const char* m : {"stem_swish", "expand_swish", "dw_swish"}) EXPECT_EQ(fused.count(m), 1u) << m << "\n" << plan.cpu->describe();
  }
}

TEST(CpuDynamicShapes, SqueezeExciteBlocksOverEveryShapeAndBatch) {
  // MobileNet-v3's squeeze-and-excitation (pool, 1x1 + Relu, 1x1 + HardSigmoid, Mul) between an
  // expansion and a projection: one SqueezeExcite node (FuseSqueezeExcite) in every plan
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), 8, Dim::sym("h"), Dim::sym("w")})});
  auto* e = g->add_node("Relu", {conv(*g, x, 8, 24, 1, 1, 1, 1, "expand")}, 1, "expand_relu")->output(0);
  auto* p = g->add_node("GlobalAveragePool", {e}, 1, "pool")->output(0);
  auto* h = g->add_node("Relu", {conv(*g, p, 24, 8, 1, 1, 1, 3, "fc1")}, 1, "fc1_relu")->output(0);
  auto* gate = g->add_node("HardSigmoid", {conv(*g, h, 8, 24, 1, 1, 1, 5, "fc2")}, 1, "gate");
  gate->attrs["alpha"] = 1.0f / 6;
  auto* scaled = g->add_node("Mul", {e, gate->output(0)}, 1, "scale")->output(0);
  g->add_output(conv(*g, scaled, 24, 8, 1, 1, 1, 7, "project"));
  auto ex = run_stream(g, image_stream(8), {"SqueezeExcite"});
  for (const auto& s : image_stream(8)) {
    EXPECT_EQ(count_kind(*ex, s, cpu::NodeKind::SqueezeExcite), 1u) << shape_to_string(s[0]);
    EXPECT_EQ(count_kind(*ex, s, cpu::NodeKind::Pooling), 0u) << shape_to_string(s[0]);
  }
}

TEST(CpuDynamicShapes, StemsAndPointwiseConvolutionsOnKilnsGemm) {
  // an image stem (3 channels, 3x3, stride 2: im2col rows), an odd small window (2x3, strides 2
  // and 1, dilated columns, uneven pads), a 1x1 convolution with a residual sum: kiln's GEMM
  // where it runs (AVX2), nothing made per shape; oneDNN's primitives below
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), 3, Dim::sym("h"), Dim::sym("w")})});
  auto* stem = g->add_node("Conv", {x, g->add_constant("s_w", random_tensor({16, 3, 3, 3}, 1, 0.5f)),
                                    g->add_constant("s_b", random_tensor({16}, 2, 0.2f))}, 1, "stem");
  stem->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  stem->attrs["strides"] = std::vector<int64_t>{2, 2};
  auto* a = g->add_node("Relu", {stem->output(0)}, 1, "r0")->output(0);
  auto* odd = g->add_node("Conv", {x, g->add_constant("o_w", random_tensor({16, 3, 2, 3}, 3, 0.5f))}, 1, "odd");
  odd->attrs["pads"] = std::vector<int64_t>{0, 2, 1, 1};
  odd->attrs["strides"] = std::vector<int64_t>{2, 1};
  odd->attrs["dilations"] = std::vector<int64_t>{1, 2};
  auto* pw = g->add_node("Conv", {a, g->add_constant("p_w", random_tensor({16, 16, 1, 1}, 4, 0.5f)),
                                  g->add_constant("p_b", random_tensor({16}, 5, 0.2f))}, 1, "pw")->output(0);
  g->add_output(g->add_node("Add", {pw, a}, 1, "sum")->output(0));
  g->add_output(odd->output(0));
  run_stream(g, image_stream(3), {"Convolution"});
  expect_kiln_kernel(g, image_stream(3), cpu::NodeKind::Convolution, cpu::gemm_f32::available(), "");
}

namespace {

// SqueezeNet's head on an input x [n, 3, h, w] of symbolic dims: a stem (3x3 stride 2 over 3
// channels into 32) and a ReLU, a 3x3 MaxPool of stride 2 (`ceil` its ceil_mode); its output.
ir::Value* squeezenet_head(ir::Graph& g, bool ceil) {
  auto* x = g.add_input("x", {DType::f32, dims({Dim::sym("n"), 3, Dim::sym("h"), Dim::sym("w")})});
  auto* stem = g.add_node("Relu", {conv(g, x, 3, 32, 3, 2, 1, 1, "stem")}, 1, "stem_relu")->output(0);
  auto* pool = g.add_node("MaxPool", {stem}, 1, "pool");
  pool->attrs["kernel_shape"] = std::vector<int64_t>{3, 3};
  pool->attrs["strides"] = std::vector<int64_t>{2, 2};
  if (ceil) pool->attrs["ceil_mode"] = int64_t(1);
  return pool->output(0);
}

}  // namespace

TEST(CpuDynamicShapes, AStemReadByAPoolWritesChannelBlocks) {
  // SqueezeNet's head: a stem (3x3 stride 2 over 3 channels, im2col rows) and a ReLU, a 3x3
  // MaxPool, a 1x1 convolution: where kiln's GEMM runs the stem writes its product into the
  // ISA's channel blocks (8 below AVX-512, straight from the asm pass; 16 with it, scattered
  // from C's rows), the pool keeps them and the 1x1 reads them in place: no Reorder but the
  // output's. Below AVX2 oneDNN's kernels, the same results.
  auto g = make_graph();
  ir::Value* pool = squeezenet_head(*g, true);
  g->add_output(g->add_node("Relu", {conv(*g, pool, 32, 16, 1, 1, 1, 3, "squeeze")}, 1, "sq_relu")->output(0));
  const std::vector<std::vector<Shape>> stream = {{{1, 3, 30, 34}}, {{2, 3, 17, 23}}, {{1, 3, 40, 22}}, {{3, 3, 12, 12}}};
  auto ex = run_stream(g, stream, {"Convolution", "Pooling"});
  const bool blocks = cpu::gemm_f32::available();
  const int64_t block = cpu::isa_at_least(cpu::Isa::avx512_core) ? 16 : 8;
  for (const auto& s : stream) {
    SCOPED_TRACE(shape_to_string(s[0]));
    const auto& plan = ex->plan_for(s);
    ASSERT_TRUE(plan.cpu);
    const cpu::Node* c = nullptr;
    for (const auto& n : plan.cpu->nodes())
      if (n->name == "stem") c = n.get();
    ASSERT_NE(c, nullptr) << plan.cpu->describe();
    if (!blocks) continue;  // (oneDNN's kernels choose: SSE4.1's convolution writes nChw8c too)
    EXPECT_EQ(c->impl.rfind("kiln_im2col", 0), 0u) << c->impl;
    EXPECT_EQ(c->outputs[0]->layout_name(), cat("blocked(", block, "@dim1)")) << plan.cpu->describe();
    EXPECT_EQ(count_type(*plan.cpu, "Reorder"), 1u) << plan.cpu->describe();  // the output's
  }
}

TEST(CpuDynamicShapes, PointwiseConvolutionsOverChannelBlocksSplitByPixelsOrColumns) {
  // The head above with a 1x1 of 48 outputs (its blocks of 6 pixels shared by the team: parts of
  // each image) and of 1040 (wider than 512: panels of 64 columns, a last one of 16, shared by the
  // team), and of 40 and 1000 (a last 8 columns past a multiple of 16: SqueezeNet's classifier),
  // over maps of 2 to 16 blocks a row and batches of 1 to 3: below AVX-512 kiln's blocked
  // kernel, the reference's results at every shape (each shape twice: a plan made and reused).
  for (int64_t n : {int64_t{48}, int64_t{1040}, int64_t{40}, int64_t{1000}}) {
    SCOPED_TRACE(cat(n, " outputs"));
    auto g = make_graph();
    ir::Value* pool = squeezenet_head(*g, false);
    g->add_output(g->add_node("Relu", {conv(*g, pool, 32, n, 1, 1, 1, 3, "pw")}, 1, "pw_relu")->output(0));
    const std::vector<std::vector<Shape>> stream = {
        {{1, 3, 30, 34}}, {{2, 3, 17, 23}}, {{3, 3, 12, 12}}, {{1, 3, 66, 70}}, {{2, 3, 9, 9}}};
    auto ex = run_stream(g, stream, {"Convolution", "Pooling"});
    if (!cpu::gemm_f32::available() || cpu::isa_at_least(cpu::Isa::avx512_core)) continue;
    for (const auto& s : stream) {
      for (const auto& node : ex->plan_for(s).cpu->nodes()) {
        if (node->name == "pw") {
          EXPECT_EQ(node->impl.rfind("kiln_gemm", 0), 0u) << shape_to_string(s[0]) << ": " << node->impl;
        }
      }
    }
  }
}

TEST(CpuDynamicShapes, PointwiseConvolutionsReadChannelBlocksAndWriteChannelsLast) {
  // A 1x1 into 20 outputs (no whole channel block) after a 3x3 window that writes the ISA's
  // channel blocks (kiln's im2col GEMM): where kiln's GEMM runs (AVX2, AVX-512) the 1x1 gathers
  // its rows from those blocks and writes its own output channels-last, no Reorder before it
  // (SqueezeNet's 1000-channel classifier, GoogLeNet's 1x1s into 24 channels with AVX-512's
  // blocks of 16); the reference's results at every shape, with and without a residual.
  for (bool residual : {false, true}) {
    SCOPED_TRACE(residual ? "with a residual" : "alone");
    auto g = make_graph();
    auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), 32, Dim::sym("h"), Dim::sym("w")})});
    auto* y = residual ? g->add_input("y", {DType::f32, dims({Dim::sym("n"), 20, Dim::sym("h"), Dim::sym("w")})}) : nullptr;
    auto* win = g->add_node("Relu", {conv(*g, x, 32, 64, 3, 1, 1, 1, "win")}, 1, "win_relu")->output(0);
    ir::Value* pw = conv(*g, win, 64, 20, 1, 1, 1, 3, "pw");
    if (residual) pw = g->add_node("Add", {pw, y}, 1, "res")->output(0);
    g->add_output(g->add_node("Relu", {pw}, 1, "pw_relu")->output(0));
    std::vector<std::vector<Shape>> stream = {{{1, 32, 12, 14}}, {{2, 32, 9, 11}}, {{1, 32, 20, 16}}};
    if (residual)
      for (auto& s : stream) s.push_back({s[0][0], 20, s[0][2], s[0][3]});
    auto ex = run_stream(g, stream, {"Convolution"});
    if (!cpu::gemm_f32::available()) continue;
    const int64_t block = cpu::isa_at_least(cpu::Isa::avx512_core) ? 16 : 8;
    for (const auto& s : stream) {
      SCOPED_TRACE(shape_to_string(s[0]));
      const auto& plan = ex->plan_for(s);
      const cpu::Node* n = find(*plan.cpu, "pw");
      ASSERT_NE(n, nullptr) << plan.cpu->describe();
      EXPECT_EQ(n->impl.rfind("kiln_gemm", 0), 0u) << n->impl;
      const cpu::Node* p = producer(*plan.cpu, n->inputs[0]);
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(p->name, "win") << plan.cpu->describe();
      EXPECT_EQ(n->inputs[0]->layout_name(), cat("blocked(", block, "@dim1)")) << plan.cpu->describe();
      EXPECT_EQ(n->outputs[0]->layout_name(), "blocked()") << "channels-last\n" << plan.cpu->describe();
    }
  }
}

TEST(CpuDynamicShapes, HardSwishConvolutionsOnKilnsGemm) {
  // MobileNet-v3's stem (3x3 stride 2) and a 1x1 expansion, each followed by HardSwish: the
  // activation a post-op of kiln's GEMM (nothing made per shape) where it runs (AVX2)
  auto g = make_graph(14);
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), 3, Dim::sym("h"), Dim::sym("w")})});
  auto* stem = g->add_node("HardSwish", {conv(*g, x, 3, 16, 3, 2, 1, 1, "stem")}, 1, "hs0")->output(0);
  g->add_output(g->add_node("HardSwish", {conv(*g, stem, 16, 48, 1, 1, 1, 3, "expand")}, 1, "hs1")->output(0));
  run_stream(g, image_stream(3), {"Convolution"});
  expect_kiln_kernel(g, image_stream(3), cpu::NodeKind::Convolution, cpu::gemm_f32::available(), "");
  cpu::Executor ex(g);
  for (const auto& n : ex.plan_for(image_stream(3).back()).cpu->nodes())
    EXPECT_NE(n->type(), std::string("Eltwise")) << n->name << ": HardSwish not fused";
}

namespace {

// BatchNormalization of `c` channels (random scale and shift, mean, positive variance) and a Relu
ir::Value* bn_relu(ir::Graph& g, ir::Value* v, int64_t c, uint32_t seed, const std::string& n) {
  auto* bn = g.add_node("BatchNormalization",
                        {v, g.add_constant(n + "_s", random_tensor({c}, seed, 0.5f)), g.add_constant(n + "_t", random_tensor({c}, seed + 1, 0.2f)),
                         g.add_constant(n + "_m", random_tensor({c}, seed + 2, 0.2f)),
                         g.add_constant(n + "_v", random_tensor({c}, seed + 3, 0.5f, 1.5f))},
                        1, n);
  return g.add_node("Relu", {bn->output(0)}, 1, n + "_relu")->output(0);
}

ir::Value* pointwise(ir::Graph& g, ir::Value* v, int64_t ci, int64_t co, uint32_t seed, const std::string& n) {
  return g.add_node("Conv", {v, g.add_constant(n + "_w", random_tensor({co, ci, 1, 1}, seed, 0.3f)),
                             g.add_constant(n + "_b", random_tensor({co}, seed + 1, 0.2f))}, 1, n)->output(0);
}

}  // namespace

TEST(CpuDynamicShapes, DenseBlocksKeepChannelBlocksThroughPointwiseConvolutionsAndConcats) {
  // DenseNet's layers: BatchNorm + Relu -> 1x1 -> BatchNorm + Relu -> 3x3, its output
  // concatenated to the layer's input; and a ResNet tail, a 1x1 onto a residual sum. The 3x3
  // convolutions write channel blocks; kiln's 1x1 convolutions take them as they are (gathered
  // into rows per thread, or for the team on the small maps), so no Reorder sits before one and
  // every Concat copies rows. Channels multiples of 16 (AVX-512's blocks).
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), 16, Dim::sym("h"), Dim::sym("w")})});
  std::vector<ir::Value*> features = {conv3x3(*g, x, 16, 32, 1, "stem", 0.2f)};
  int64_t c = 32;
  for (int layer = 0; layer < 4; ++layer) {  // each layer reads the concatenation of all before it
    const std::string n = cat("l", layer);
    const uint32_t seed = 10u + 10u * static_cast<uint32_t>(layer);
    ir::Value* in = features[0];
    if (features.size() > 1) {
      auto* cat_ = g->add_node("Concat", features, 1, n + "_cat");
      cat_->attrs["axis"] = int64_t(1);
      in = cat_->output(0);
    }
    ir::Value* y = pointwise(*g, bn_relu(*g, in, c, seed, n + "_bn1"), c, 48, seed + 4, n + "_conv1");
    features.push_back(conv3x3(*g, bn_relu(*g, y, 48, seed + 6, n + "_bn2"), 48, 16, seed + 8, n + "_conv2", 0.15f));
    c += 16;
  }
  auto* all = g->add_node("Concat", features, 1, "all");
  all->attrs["axis"] = int64_t(1);
  ir::Value* t = conv3x3(*g, all->output(0), c, 32, 60, "t3x3", 0.1f);
  ir::Value* sum = g->add_node("Add", {pointwise(*g, t, 32, 32, 62, "t1x1"), t}, 1, "t_sum")->output(0);
  ir::Value* relu = g->add_node("Relu", {sum}, 1, "t_relu")->output(0);
  g->add_output(relu);
  // a narrow 1x1 (one group of 16 output channels: the team splits its pixels, not its columns)
  g->add_output(conv3x3(*g, pointwise(*g, relu, 32, 16, 64, "narrow"), 16, 16, 66, "n3x3", 0.2f));
  // small maps (the team's GEMM) and large ones (rows per thread; 41 x 47: a last chunk of 7 pixels, a
  // block of 6 in place and one gathered), batch 1 and more
  const std::vector<std::vector<Shape>> stream = {{{1, 16, 8, 8}},  {{1, 16, 41, 47}}, {{2, 16, 8, 24}},
                                                  {{1, 16, 12, 8}}, {{2, 16, 40, 48}}, {{1, 16, 8, 8}}};
  // whole-network tolerance: Winograd's rounding at the large map, four layers deep
  auto ex = run_stream(g, stream, {"Convolution", "Concat"},
                       [](const Tensor& want, const Tensor& got) { expect_close(want, got, 1e-3, 1e-4); });
  if (!cpu::gemm_f32::available()) return;  // oneDNN's 1x1 convolutions below AVX2
  for (const auto& s : stream) {
    const auto& plan = ex->plan_for(s);
    ASSERT_TRUE(plan.cpu);
    size_t pointwise_seen = 0;
    for (const auto& n : plan.cpu->nodes()) {
      if (n->kind() == cpu::NodeKind::Concat) {  // copied by rows, or written in place: not oneDNN's
        EXPECT_TRUE(n->impl.rfind("rows", 0) == 0 || n->impl == "in_place") << n->name << ": " << n->impl;
      }
      if (n->kind() != cpu::NodeKind::Convolution || n->name.find("conv1") == std::string::npos) continue;
      ++pointwise_seen;
      EXPECT_EQ(n->impl.rfind("kiln_gemm", 0), 0u) << n->name << ": " << n->impl;
      const cpu::Node* p = producer(*plan.cpu, n->inputs[0]);
      ASSERT_NE(p, nullptr);
      EXPECT_NE(p->kind(), cpu::NodeKind::Reorder) << n->name << " reads a Reorder\n" << plan.cpu->describe();
      EXPECT_FALSE(n->outputs[0]->is_plain()) << n->name;
      EXPECT_EQ(n->outputs[0]->layout_name(), n->inputs[0]->layout_name()) << n->name;
    }
    EXPECT_EQ(pointwise_seen, 4u);
  }
}

TEST(CpuDynamicShapes, SmallMapsTakeWinogradAgainstTheIm2colGemmUntilTheShapeIsHot) {
  // A 3x3 over 64 channels and few tiles (12-32): in a new shape's graph with AVX2 or AVX-512 kiln's
  // Winograd beats the im2col GEMM the window would take there; below AVX-512 not oneDNN's
  // direct kernel (winograd_f32::pays): Winograd as a quick node, then the hot rebuild's direct
  // kernel. With AVX-512 oneDNN's kernels there ran slower: Winograd in the hot rebuild too, so
  // no quick node. Fewer than 12 tiles keep the im2col GEMM (a quick node); 100 or more take
  // Winograd in every graph.
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), 64, Dim::sym("h"), Dim::sym("w")})});
  auto* c = g->add_node("Conv", {x, g->add_constant("w", random_tensor({96, 64, 3, 3}, 11, 0.1f)),
                                 g->add_constant("b", random_tensor({96}, 12, 0.2f))}, 1, "conv");
  c->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  g->add_output(g->add_node("Relu", {c->output(0)}, 1, "relu")->output(0));
  struct Case {
    Shape x;
    const char* impl;  // expected where kiln's GEMM runs (AVX2 at least)
    bool quick;
  } cases[] = {{{2, 64, 13, 13}, "kiln_wino", true},   // 32 tiles
               {{1, 64, 14, 12}, "kiln_wino", true},   // 12 tiles
               {{1, 64, 7, 7}, "kiln_im2col", true},   // 4 tiles
               {{1, 64, 40, 40}, "kiln_wino", false}};  // 100 tiles
  std::vector<std::vector<Shape>> stream;
  for (const Case& k : cases) stream.push_back({k.x});
  auto ex = run_stream(g, stream, {"Convolution"});
  const bool kiln = cpu::gemm_f32::available();  // AVX2 and AVX-512 alike
  const bool avx512 = cpu::isa_at_least(cpu::Isa::avx512_core);
  for (const Case& k : cases) {
    SCOPED_TRACE(shape_to_string(k.x));
    const cpu::Node* n = find(*ex->plan_for({k.x}).cpu, "conv");
    ASSERT_NE(n, nullptr);
    if (!kiln) {
      EXPECT_EQ(n->impl.rfind("kiln_wino", 0), std::string::npos) << n->impl;
      // with AVX-512, oneDNN's: a quick one is its direct JIT kernel in place of brgconv
      if (n->quick_impl) {
        EXPECT_EQ(n->impl.rfind("jit", 0), 0u) << n->impl;
      }
      continue;
    }
    EXPECT_EQ(n->impl.rfind(k.impl, 0), 0u) << n->impl;
    const bool winograd = std::string(k.impl) == "kiln_wino";
    EXPECT_EQ(n->quick_impl, k.quick && !(winograd && avx512));
  }
  // the 32-tile shape turns hot: below AVX-512 oneDNN's first choice, with AVX-512 still kiln's
  // Winograd (nothing to rebuild); the same results
  const bool quick_first = ex->plan_for({{2, 64, 13, 13}}).cpu->quick_nodes() > 0;
  EXPECT_EQ(quick_first, kiln && !avx512);
  runtime::ReferenceExecutor ref(g);
  const Tensor in = random_tensor({2, 64, 13, 13}, 13);
  const auto want = ref.run({in});
  std::vector<ProfilingInfo> profile;
  for (size_t r = 0; r <= cpu::Executor::kHotRuns; ++r) expect_close(want[0], ex->run({in}, &profile)[0], 1e-4, 1e-4);
  EXPECT_EQ(ex->hot_rebuilds(), quick_first ? 1u : 0u);
  bool seen = false;
  for (const ProfilingInfo& p : profile)
    if (p.node_name == "conv") {
      seen = true;
      EXPECT_EQ(p.exec_type.rfind("kiln", 0) == 0, kiln && avx512) << p.node_name << ": " << p.exec_type;
    }
  EXPECT_TRUE(seen);
}

TEST(CpuDynamicShapes, WindowConvolutionsOnKilnsGemmUntilTheShapeIsHot) {
  // Windows over many channels that kiln's Winograd does not take (maps too small for it, or 16
  // channels into fewer than 64): a 3x3 over the model's input (a channels-last gather), a 3x3 at stride 2 into 56 channels (a last
  // group of 8 columns; fewer than 64, which Winograd takes from 12 tiles) over its producer's channel blocks, a dilated 3x3, a 3x3 onto a residual
  // sum (a sum post-op), a 5x5 with uneven pads.
  // Where kiln's GEMM runs (AVX2, AVX-512): im2col rows and the GEMM, nothing made per shape,
  // each a quick node; a frequent shape's hot rebuild takes oneDNN's direct kernels instead.
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), 16, Dim::sym("h"), Dim::sym("w")})});
  auto window = [&](ir::Value* v, int64_t ci, int64_t co, int64_t k, int64_t stride, int64_t dil,
                    std::vector<int64_t> pads, uint32_t seed, const std::string& n) {
    auto* c = g->add_node("Conv", {v, g->add_constant(n + "_w", random_tensor({co, ci, k, k}, seed, 0.2f)),
                                   g->add_constant(n + "_b", random_tensor({co}, seed + 1, 0.2f))}, 1, n);
    c->attrs["pads"] = pads;
    c->attrs["strides"] = std::vector<int64_t>{stride, stride};
    c->attrs["dilations"] = std::vector<int64_t>{dil, dil};
    return c->output(0);
  };
  auto* a = g->add_node("Relu", {window(x, 16, 56, 3, 1, 1, {1, 1, 1, 1}, 1, "w_in")}, 1, "r_in")->output(0);
  auto* b = g->add_node("Relu", {window(a, 56, 56, 3, 2, 1, {1, 1, 1, 1}, 3, "w_s2")}, 1, "r_s2")->output(0);
  auto* d = g->add_node("Relu", {window(b, 56, 56, 3, 1, 2, {2, 2, 2, 2}, 5, "w_dil")}, 1, "r_dil")->output(0);
  auto* e = window(d, 56, 56, 3, 1, 1, {1, 1, 1, 1}, 7, "w_sum");
  auto* sum = g->add_node("Relu", {g->add_node("Add", {e, b}, 1, "res")->output(0)}, 1, "r_res")->output(0);
  g->add_output(window(sum, 56, 64, 5, 1, 1, {2, 1, 2, 3}, 9, "w_5x5"));
  const std::vector<std::vector<Shape>> stream = {{{1, 16, 20, 24}}, {{1, 16, 12, 16}}, {{2, 16, 24, 20}},
                                                  {{1, 16, 9, 13}},  {{3, 16, 16, 16}}, {{1, 16, 20, 24}}};
  auto ex = run_stream(g, stream, {"Convolution"});
  const bool kiln = cpu::gemm_f32::available();  // AVX2 and AVX-512 alike
  const std::vector<std::string> windows = {"w_in", "w_s2", "w_dil", "w_sum", "w_5x5"};
  for (const auto& s : stream) {
    SCOPED_TRACE(shape_to_string(s[0]));
    const auto& plan = ex->plan_for(s);
    ASSERT_TRUE(plan.cpu);
    size_t seen = 0;
    for (const auto& n : plan.cpu->nodes()) {
      if (n->kind() != cpu::NodeKind::Convolution) continue;
      ++seen;
      EXPECT_EQ(n->impl.rfind("kiln_im2col", 0) == 0, kiln) << n->name << ": " << n->impl;
      if (kiln) {
        EXPECT_TRUE(n->quick_impl) << n->name;
      } else if (n->quick_impl) {  // with AVX-512, oneDNN's direct JIT kernel in place of brgconv
        EXPECT_EQ(n->impl.rfind("jit", 0), 0u) << n->name << ": " << n->impl;
      }
    }
    EXPECT_EQ(seen, windows.size()) << plan.cpu->describe();
  }
  // a frequent shape: the hot rebuild runs oneDNN's kernels, with the same results
  runtime::ReferenceExecutor ref(g);
  const Tensor in = random_tensor({2, 16, 14, 18}, 99);
  const auto want = ref.run({in});
  std::vector<ProfilingInfo> profile;
  expect_close(want[0], ex->run({in}, &profile)[0], 1e-4, 1e-4);
  const bool quick_first = ex->plan_for({in.shape()}).cpu->quick_nodes() > 0;
  EXPECT_TRUE(quick_first || !kiln);
  for (size_t r = 1; r <= cpu::Executor::kHotRuns; ++r) expect_close(want[0], ex->run({in}, &profile)[0], 1e-4, 1e-4);
  EXPECT_EQ(ex->hot_rebuilds(), quick_first ? 1u : 0u);
  for (const ProfilingInfo& p : profile) {
    if (p.node_type == "Convolution") {
      EXPECT_NE(p.exec_type.rfind("kiln", 0), 0u) << p.node_name << ": " << p.exec_type;
    }
  }
}

TEST(CpuDynamicShapes, ElementwiseBinaryResizeAndLrn) {
  // a broadcast binary, an elementwise chain (a snippets kernel), nearest upsampling, LRN, BatchNorm alone
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), 8, Dim::sym("h"), Dim::sym("w")})});
  auto* y = g->add_input("y", {DType::f32, dims({Dim::sym("n"), 8, Dim::sym("h"), Dim::sym("w")})});
  auto* m = g->add_node("Mul", {x, g->add_constant("s", random_tensor({8, 1, 1}, 2))}, 1, "scale")->output(0);
  auto* e = g->add_node("Tanh", {g->add_node("Add", {m, y}, 1, "add")->output(0)}, 1, "tanh")->output(0);
  auto* sg = g->add_node("Sigmoid", {e}, 1, "sig")->output(0);
  auto* bn = g->add_node("BatchNormalization",
                         {sg, g->add_constant("g", random_tensor({8}, 3, 0.5f, 1.5f)), g->add_constant("be", random_tensor({8}, 4)),
                          g->add_constant("mu", random_tensor({8}, 5)), g->add_constant("var", random_tensor({8}, 6, 0.5f, 1.5f))},
                         1, "bn");
  auto* lrn = g->add_node("LRN", {bn->output(0)}, 1, "lrn");
  lrn->attrs["size"] = int64_t(3);
  auto* rs = g->add_node("Resize", {lrn->output(0), nullptr, g->add_constant("scales", Tensor::from_vector<float>({1, 1, 2, 2}, {4}))},
                         1, "up");
  rs->attrs["mode"] = std::string("nearest");
  rs->attrs["nearest_mode"] = std::string("floor");
  rs->attrs["coordinate_transformation_mode"] = std::string("asymmetric");
  g->add_output(rs->output(0));
  std::vector<std::vector<Shape>> stream;
  for (const auto& s : image_stream(8)) stream.push_back({s[0], s[0]});
  run_stream(g, stream, {"Resize", "LRN", "BatchNorm"});
}

TEST(CpuDynamicShapes, ElementwiseAndBinaryNodesWithoutSnippets) {
  // snippets_mode=DISABLE: the chain of the test above runs as one oneDNN node per op, a
  // broadcast Binary (a per-channel scale), a same-shape Binary and Eltwise nodes, each made
  // per shape, where the snippets kernel otherwise takes them all
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), 8, Dim::sym("h"), Dim::sym("w")})});
  auto* y = g->add_input("y", {DType::f32, dims({Dim::sym("n"), 8, Dim::sym("h"), Dim::sym("w")})});
  auto* m = g->add_node("Mul", {x, g->add_constant("s", random_tensor({8, 1, 1}, 2))}, 1, "scale")->output(0);
  auto* e = g->add_node("Tanh", {g->add_node("Add", {m, y}, 1, "add")->output(0)}, 1, "tanh")->output(0);
  auto* d = g->add_node("Sub", {e, x}, 1, "sub")->output(0);  // reads x again: not in place over it
  g->add_output(g->add_node("Sigmoid", {d}, 1, "sig")->output(0));
  std::vector<std::vector<Shape>> stream;
  for (const auto& s : image_stream(8)) stream.push_back({s[0], s[0]});
  cpu::GraphOptions options;
  options.snippets_mode = cpu::SnippetsMode::disable;
  auto ex = run_stream(g, stream, {"Binary", "Eltwise"}, {}, options);
  for (const auto& s : stream) {
    EXPECT_EQ(count_kind(*ex, s, cpu::NodeKind::Subgraph), 0u) << shape_to_string(s[0]);
    EXPECT_GE(count_kind(*ex, s, cpu::NodeKind::Binary), 2u) << shape_to_string(s[0]);
  }
}

TEST(CpuDynamicShapes, ARegNetBlocksGroupedConvolutionAndSqueezeExciteAtEveryShape) {
  // RegNet's block: a grouped 3x3 convolution (oneDNN, blocked channels) with a ReLU, then
  // squeeze-excite: GlobalAveragePool, two 1x1 convolutions, Sigmoid, and the Mul of the
  // convolution's output by the [N, C, 1, 1] scales. The Mul is tokenized alone, on the
  // template's symbolic shapes; in the blocked layout it runs as oneDNN's binary, which must be
  // made with the plan's static shapes: made from the shared body, it was a Reference node
  // (where kiln's GEMM runs the 1x1 convolutions, channels-last, the grouped one (24 channels:
  // not a power of two) and the Mul run channels-last too: no Reorders on either side of it)
  auto g = make_graph();
  auto* x0 = g->add_input("x", {DType::f32, dims({Dim::sym("n"), 24, Dim::sym("h"), Dim::sym("w")})});
  auto* x = g->add_node("Relu", {g->add_node("Conv", {x0, g->add_constant("w0", random_tensor({24, 24, 1, 1}, 9, 0.5f))},
                                             1, "expand")->output(0)}, 1, "expand_relu")->output(0);
  auto* gc = g->add_node("Conv", {x, g->add_constant("gw", random_tensor({24, 8, 3, 3}, 2, 0.5f)),
                                  g->add_constant("gb", random_tensor({24}, 3))}, 1, "grouped");
  gc->attrs["group"] = int64_t(3);  // 8 channels a group, as RegNet-Y-400MF's
  gc->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  auto* a = g->add_node("Relu", {gc->output(0)}, 1, "relu")->output(0);
  auto* p = g->add_node("GlobalAveragePool", {a}, 1, "squeeze")->output(0);
  auto* f1 = g->add_node("Conv", {p, g->add_constant("w1", random_tensor({6, 24, 1, 1}, 4, 0.5f)),
                                  g->add_constant("b1", random_tensor({6}, 5))}, 1, "fc1")->output(0);
  auto* r1 = g->add_node("Relu", {f1}, 1, "fc1_relu")->output(0);
  auto* f2 = g->add_node("Conv", {r1, g->add_constant("w2", random_tensor({24, 6, 1, 1}, 6, 0.5f)),
                                  g->add_constant("b2", random_tensor({24}, 7))}, 1, "fc2")->output(0);
  auto* sc = g->add_node("Sigmoid", {f2}, 1, "scales")->output(0);
  auto* m = g->add_node("Mul", {a, sc}, 1, "excite")->output(0);
  g->add_output(g->add_node("Conv", {m, g->add_constant("w3", random_tensor({8, 24, 1, 1}, 8, 0.5f))}, 1, "project")
                    ->output(0));  // as RegNet: a 1x1 convolution reads it, the Mul alone in its Subgraph
  auto ex = run_stream(g, image_stream(24), {"Convolution"});
  for (const auto& s : image_stream(24)) {
    const auto& plan = ex->plan_for(s);
    ASSERT_TRUE(plan.cpu);
    size_t seen = 0;
    for (const auto& n : plan.cpu->nodes()) {
      if (n->name.find("excite") == std::string::npos || n->impl == "undef") continue;
      ++seen;
      EXPECT_NE(n->impl.rfind("ref", 0), 0u) << shape_to_string(s[0]) << " " << n->name << ": " << n->impl << "\n"
                                             << plan.cpu->describe();
    }
    EXPECT_EQ(seen, 1u) << plan.cpu->describe();
    if (!cpu::gemm_f32::available()) continue;
    const cpu::Node* grouped = nullptr;
    for (const auto& n : plan.cpu->nodes())
      if (n->name == "grouped") grouped = n.get();
    ASSERT_TRUE(grouped) << plan.cpu->describe();
    // a new shape's graph: kiln's grouped convolution where the ISA has it, else oneDNN's JIT kernel
    if (cpu::grouped_conv_f32::available())
      EXPECT_EQ(grouped->impl, cpu::grouped_conv_f32::impl_name());
    else
      EXPECT_EQ(grouped->impl.rfind("jit", 0), 0u) << grouped->impl;
    for (const auto& n : plan.cpu->nodes()) {
      if (n->kind() != cpu::NodeKind::Reorder) continue;
      EXPECT_TRUE(n->inputs[0] != grouped->outputs[0] && n->outputs[0] != grouped->inputs[0])
          << shape_to_string(s[0]) << ": " << n->name << "\n" << plan.cpu->describe();
    }
  }
}

TEST(CpuDynamicShapes, GroupedConvolutionsOfEveryWidthStrideAndPaddingAtEveryShape) {
  // Grouped convolutions of 8, 16, 24 and 32 output channels a group (RegNet's, ResNeXt's),
  // 3x3 at strides 1 and 2, a dilated one, asymmetric padding, a 1x3 window, with bias and a
  // ReLU, over maps from 1 pixel high up: kiln's kernel in a new shape's graph where the ISA has
  // it; then a shape run until hot, rebuilt with oneDNN's JIT kernels with AVX-512 (kiln's kept
  // below it). Against the reference
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), 16, Dim::sym("h"), Dim::sym("w")})});
  struct Layer {
    int64_t in, out, group, kh, kw, stride, dilation;
    std::vector<int64_t> pads;
  };
  const std::vector<Layer> layers = {{16, 16, 2, 3, 3, 1, 1, {1, 1, 1, 1}},  // 8 in, 8 out a group
                                     {16, 32, 2, 3, 3, 2, 1, {1, 1, 1, 1}},  // 16 out a group, stride 2
                                     {32, 48, 2, 3, 3, 1, 2, {2, 2, 2, 2}},  // 24 out, dilated
                                     {48, 64, 2, 3, 3, 2, 1, {0, 1, 2, 0}},  // 32 out, asymmetric pads
                                     {64, 64, 4, 1, 3, 1, 1, {0, 1, 0, 1}}};  // 16 a group, a 1x3 window
  ir::Value* v = x;
  for (size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    const std::string name = cat("grouped", i);
    auto* c = g->add_node("Conv", {v, g->add_constant(name + "_w", random_tensor({l.out, l.in / l.group, l.kh, l.kw},
                                                                                  uint32_t(10 + i), 0.3f)),
                                   g->add_constant(name + "_b", random_tensor({l.out}, uint32_t(20 + i)))}, 1, name);
    c->attrs["group"] = l.group;
    c->attrs["strides"] = std::vector<int64_t>{l.stride, l.stride};
    c->attrs["dilations"] = std::vector<int64_t>{l.dilation, l.dilation};
    c->attrs["pads"] = l.pads;
    v = g->add_node("Relu", {c->output(0)}, 1, name + "_relu")->output(0);
  }
  g->add_output(v);
  auto stream = image_stream(16);
  stream.push_back({{1, 16, 1, 3}});
  stream.push_back({{2, 16, 5, 37}});
  auto ex = run_stream(g, stream, {"Convolution"});
  for (const auto& s : stream) {
    const auto& plan = ex->plan_for(s);
    ASSERT_TRUE(plan.cpu);
    size_t kiln = 0;
    for (const auto& n : plan.cpu->nodes())
      if (n->impl == cpu::grouped_conv_f32::impl_name()) ++kiln;
    EXPECT_EQ(kiln, cpu::grouped_conv_f32::available() ? layers.size() : 0u) << plan.cpu->describe();
  }
  // a frequent shape: with AVX-512 the hot rebuild takes oneDNN's kernels, with the same
  // results; with AVX2 kiln's kernel stays (faster there: nothing to rebuild)
  runtime::ReferenceExecutor ref(g);
  const Tensor in = random_tensor({2, 16, 12, 20}, 99);
  const auto want = ref.run({in});
  for (size_t r = 0; r <= cpu::Executor::kHotRuns; ++r) expect_close(want[0], ex->run({in})[0], 1e-4, 1e-4);
  const bool rebuilt = cpu::grouped_conv_f32::available() && cpu::isa_at_least(cpu::Isa::avx512_core);
  EXPECT_EQ(ex->hot_rebuilds(), rebuilt ? 1u : 0u);
}

namespace {

// ResNeXt-50 32x4d's first-stage block, small: a 1x1 convolution, a grouped 3x3 one of groups
// of 4 channels (here 8 of them) with a ReLU, a 1x1 convolution; the input [N, 16, H, W].
std::shared_ptr<ir::Graph> groups_of_four_block(const std::vector<Dim>& in_dims) {
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, dims(in_dims)});
  auto* a = g->add_node("Relu", {conv(*g, x, 16, 32, 1, "reduce")}, 1, "reduce_relu")->output(0);
  auto* c = g->add_node("Conv", {a, g->add_constant("gw", random_tensor({32, 4, 3, 3}, 2, 0.5f)),
                                 g->add_constant("gb", random_tensor({32}, 3))}, 1, "grouped");
  c->attrs["group"] = int64_t(8);
  c->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  auto* r = g->add_node("Relu", {c->output(0)}, 1, "grouped_relu")->output(0);
  g->add_output(conv(*g, r, 32, 16, 1, "expand"));
  return g;
}

const cpu::Node* node_named(const cpu::Graph& graph, const std::string& name) {
  for (const auto& n : graph.nodes())
    if (n->name == name) return n.get();
  return nullptr;
}

}  // namespace

TEST(CpuDynamicShapes, GroupsOfFourChannelsRunKilnsKernelAtEveryShapeAndWhenHot) {
  // kiln's kernel takes two groups of 4 to a vector. oneDNN 2.6 has no JIT kernel for such
  // groups below AVX-512 (its GEMM-based convolution, 3x slower than ONNX Runtime); on AVX-512
  // its JIT kernel wants channel blocks, Reorders on either side between kiln's channels-last
  // 1x1 convolutions. So on every ISA the hot rebuild keeps kiln's kernel: nothing to rebuild
  auto g = groups_of_four_block({Dim::sym("n"), 16, Dim::sym("h"), Dim::sym("w")});
  auto stream = image_stream(16);
  stream.push_back({{1, 16, 1, 3}});
  auto ex = run_stream(g, stream, {"Convolution"});
  const bool kiln = cpu::grouped_conv_f32::available() && cpu::gemm_f32::available();
  for (const auto& s : stream) {
    const auto& plan = ex->plan_for(s);
    ASSERT_TRUE(plan.cpu);
    const cpu::Node* grouped = node_named(*plan.cpu, "grouped");
    ASSERT_TRUE(grouped) << plan.cpu->describe();
    if (kiln) {
      EXPECT_EQ(grouped->impl, cpu::grouped_conv_f32::impl_name()) << shape_to_string(s[0]);
    }
  }
  runtime::ReferenceExecutor ref(g);
  const Tensor in = random_tensor({2, 16, 12, 20}, 99);
  const auto want = ref.run({in});
  for (size_t r = 0; r <= cpu::Executor::kHotRuns; ++r) expect_close(want[0], ex->run({in})[0], 1e-4, 1e-4);
  // the graph that runs now is the shape's hot rebuild where its graph had quick nodes (oneDNN's
  // 1x1 convolutions over 16 and 32 channels on AVX-512)
  std::vector<ProfilingInfo> profile;
  expect_close(want[0], ex->run({in}, &profile)[0], 1e-4, 1e-4);
  const auto row = std::find_if(profile.begin(), profile.end(), [](const ProfilingInfo& p) { return p.node_name == "grouped"; });
  ASSERT_NE(row, profile.end());
  EXPECT_EQ(row->exec_type.rfind("kiln_grouped_conv", 0) == 0, kiln) << row->exec_type;
}

TEST(CpuDynamicShapes, GroupsOfFourChannelsAtFixedShapesRunKilnsKernelWhereOneDnnHasNoJitKernel) {
  // fixed shapes: oneDNN's kernel where it has a JIT one (AVX-512), kiln's below it
  auto g = groups_of_four_block({2, 16, 13, 21});
  ir::infer_shapes(*g);
  runtime::ReferenceExecutor ref(g);
  cpu::Executor ex(g);
  const Tensor in = random_tensor({2, 16, 13, 21}, 5);
  expect_close(ref.run({in})[0], ex.run({in})[0], 1e-4, 1e-4);
  const auto& plan = ex.plan_for({{2, 16, 13, 21}});
  ASSERT_TRUE(plan.cpu);
  const cpu::Node* grouped = node_named(*plan.cpu, "grouped");
  ASSERT_TRUE(grouped) << plan.cpu->describe();
  const bool kiln = cpu::grouped_conv_f32::available() && cpu::gemm_f32::available() &&
                    !cpu::isa_at_least(cpu::Isa::avx512_core);
  EXPECT_EQ(grouped->impl == cpu::grouped_conv_f32::impl_name(), kiln) << grouped->impl;
}

TEST(CpuDynamicShapes, AGroupedConvolutionWhosePaddingExceedsItsWindow) {
  // pads larger than the window (1x1 at stride 8, 5 columns of padding before: the first
  // output pixel reads padding only), as a crafted model may have: zeros, not a read outside
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), 16, Dim::sym("h"), Dim::sym("w")})});
  auto* c = g->add_node("Conv", {x, g->add_constant("gw", random_tensor({16, 8, 1, 1}, 3, 0.5f))}, 1, "grouped");
  c->attrs["group"] = int64_t(2);
  c->attrs["strides"] = std::vector<int64_t>{8, 8};
  c->attrs["pads"] = std::vector<int64_t>{5, 5, 0, 0};
  g->add_output(c->output(0));
  run_stream(g, {{{1, 16, 1, 1}}, {{2, 16, 3, 9}}, {{1, 16, 8, 17}}}, {"Convolution"});
}

TEST(CpuDynamicShapes, AnAtrousConvolutionOverASmallMapRunsTheGemmsOfTheTapsThatReadIt) {
  // DeepLab's atrous pyramid: 3x3 convolutions of dilation 12 and 24 (pads equal) beside a 1x1
  // one, concatenated. Where the map is no larger than the dilation along both axes, every tap
  // but the centre reads padding only: kiln's GEMM runs the centre weights as a 1x1
  // convolution. Where the taps that read the input read at most 3 times the map's pixels,
  // kiln's GEMM runs each of them (conv_taps_f32); elsewhere oneDNN's kernel runs the whole
  // window. Against the reference every way
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), 16, Dim::sym("h"), Dim::sym("w")})});
  auto* a = g->add_node("Relu", {conv(*g, x, 16, 16, 1, "c1")}, 1, "r1")->output(0);
  std::vector<ir::Value*> branches;
  for (int64_t d : {12, 24}) {
    const std::string name = cat("atrous", d);
    auto* c = g->add_node("Conv", {a, g->add_constant(name + "_w", random_tensor({8, 16, 3, 3}, uint32_t(d), 0.5f)),
                                   g->add_constant(name + "_b", random_tensor({8}, uint32_t(d + 1)))}, 1, name);
    c->attrs["dilations"] = std::vector<int64_t>{d, d};
    c->attrs["pads"] = std::vector<int64_t>{d, d, d, d};
    branches.push_back(g->add_node("Relu", {c->output(0)}, 1, name + "_relu")->output(0));
  }
  auto* cat_node = g->add_node("Concat", branches, 1, "pyramid");
  cat_node->attrs["axis"] = int64_t(1);
  g->add_output(cat_node->output(0));
  // 8x8 and 8x12: both one tap; 8x24 and 16x8 at dilation 12 and 16x40 at 24: the taps; 16x40
  // at dilation 12: the whole window
  auto ex = run_stream(g, image_stream(16), {"Convolution"});
  size_t taps = 0, whole = 0;
  for (const auto& s : image_stream(16)) {
    const auto& plan = ex->plan_for(s);
    ASSERT_TRUE(plan.cpu);
    for (const auto& n : plan.cpu->nodes()) {
      if (n->name.rfind("atrous", 0) != 0 || n->kind() != cpu::NodeKind::Convolution) continue;
      const int64_t d = n->name == "atrous12" ? 12 : 24, h = s[0][2], w = s[0][3];
      const bool centre = h <= d && w <= d;
      // the live taps are the pairs of a live row tap and a live column tap: the side taps of
      // an axis read its size less the dilation, where that is positive
      const int64_t live = (h + 2 * std::max<int64_t>(0, h - d)) * (w + 2 * std::max<int64_t>(0, w - d));
      SCOPED_TRACE(cat(shape_to_string(s[0]), " ", n->name, ": ", n->impl));
      if (!cpu::gemm_f32::available()) {
        EXPECT_EQ(n->impl.find("kiln"), std::string::npos);
      } else if (centre) {
        EXPECT_EQ(n->impl, cpu::gemm_f32::impl_name());
      } else if (live <= 3 * h * w) {
        EXPECT_EQ(n->impl, cat("kiln_taps_", cpu::gemm_f32::impl_name() + 5));
        ++taps;
      } else {
        EXPECT_EQ(n->impl.find("kiln"), std::string::npos);
        ++whole;
      }
    }
  }
  if (cpu::gemm_f32::available()) {
    EXPECT_GT(taps, 0u);
    EXPECT_GT(whole, 0u);
  }
}

TEST(CpuDynamicShapes, AStridedPointwiseConvolutionRunsOnTheGemmOfThePixelsItReads) {
  // A ResNet's downsampling block: the 3x3 stride-2 branch beside the 1x1 stride-2 shortcut,
  // summed, then a 1x1 convolution at strides 2 and 3. kiln's GEMM runs both strided 1x1
  // convolutions over the pixels they read (odd sizes too: 9 x 13 -> 5 x 7, and 5 x 3); against
  // the reference at every shape
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), 16, Dim::sym("h"), Dim::sym("w")})});
  auto* a = g->add_node("Relu", {conv(*g, x, 16, 16, 1, "c1")}, 1, "r1")->output(0);
  auto* branch = test_cpu_dynamic_shapes::conv(*g, a, 16, 24, 3, 2, 1, 3, "branch");
  auto* shortcut = test_cpu_dynamic_shapes::conv(*g, a, 16, 24, 1, 2, 1, 5, "shortcut");
  auto* sum = g->add_node("Relu", {g->add_node("Add", {branch, shortcut}, 1, "sum")->output(0)}, 1, "sum_relu")->output(0);
  auto* c = g->add_node("Conv", {sum, g->add_constant("s23_w", random_tensor({8, 24, 1, 1}, 7, 0.4f))}, 1, "s23");
  c->attrs["strides"] = std::vector<int64_t>{2, 3};
  g->add_output(c->output(0));
  auto stream = image_stream(16);
  stream.push_back({{2, 16, 9, 13}});
  stream.push_back({{1, 16, 1, 7}});
  auto ex = run_stream(g, stream, {"Convolution"});
  for (const auto& s : stream) {
    const auto& plan = ex->plan_for(s);
    ASSERT_TRUE(plan.cpu);
    size_t strided = 0;
    for (const auto& n : plan.cpu->nodes()) {
      if (n->name != "shortcut" && n->name != "s23") continue;
      ++strided;
      SCOPED_TRACE(cat(shape_to_string(s[0]), " ", n->name, ": ", n->impl));
      if (cpu::gemm_f32::available())
        EXPECT_EQ(n->impl, cpu::gemm_f32::impl_name());
      else
        EXPECT_EQ(n->impl.find("kiln"), std::string::npos);
    }
    EXPECT_EQ(strided, 2u) << plan.cpu->describe();
  }
}

TEST(CpuDynamicShapes, AStridedPointwiseConvolutionWithALargeBGathersForTheTeamInGroups) {
  // A strided 1x1 whose packed B passes 512 KiB (2048 -> 64 channels) runs one GEMM for the
  // team on its pixels gathered 4 MiB at a time: 24 x 22 output pixels of 2048 channels are two
  // groups (23 rows, then 1), and three images of 15 x 15 two groups (34 rows, then 11) whose
  // boundary falls inside the third image; a small map (4 x 3) one group. Against the reference.
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), 2048, Dim::sym("h"), Dim::sym("w")})});
  auto* shortcut = test_cpu_dynamic_shapes::conv(*g, x, 2048, 64, 1, 2, 1, 5, "shortcut");
  g->add_output(g->add_node("Relu", {shortcut}, 1, "relu")->output(0));
  const std::vector<std::vector<Shape>> stream = {{{1, 2048, 48, 44}}, {{3, 2048, 30, 30}}, {{1, 2048, 8, 5}}};
  auto ex = run_stream(g, stream, {"Convolution"});
  for (const auto& s : stream) {
    const auto& plan = ex->plan_for(s);
    ASSERT_TRUE(plan.cpu);
    for (const auto& n : plan.cpu->nodes()) {
      if (n->name != "shortcut" || !cpu::gemm_f32::available()) continue;
      EXPECT_EQ(n->impl, cpu::gemm_f32::impl_name());
    }
  }
}

TEST(CpuDynamicShapes, DeconvolutionsOverEveryShapeAndBatch) {
  // a 3x3 convolution into blocked channels, then ConvTranspose 2x2 stride 2 (a decoder's
  // upsampling) and a 3x3 stride 1 one with pads: oneDNN's deconvolution made per shape,
  // Reorders where the layouts differ
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), 4, Dim::sym("h"), Dim::sym("w")})});
  auto* a = g->add_node("Relu", {conv(*g, x, 4, 16, 1, "c1")}, 1, "r1")->output(0);
  auto* up = g->add_node("ConvTranspose", {a, g->add_constant("up_w", random_tensor({16, 8, 2, 2}, 2, 0.5f)),
                                           g->add_constant("up_b", random_tensor({8}, 3))}, 1, "up");
  up->attrs["strides"] = std::vector<int64_t>{2, 2};
  auto* dc = g->add_node("ConvTranspose", {up->output(0), g->add_constant("dc_w", random_tensor({8, 6, 3, 3}, 4, 0.5f))},
                         1, "dc");
  dc->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  g->add_output(g->add_node("Neg", {dc->output(0)}, 1, "neg")->output(0));
  auto ex = run_stream(g, image_stream(4), {"Deconvolution"});
  for (const auto& s : image_stream(4)) EXPECT_EQ(count_kind(*ex, s, cpu::NodeKind::Deconvolution), 2u) << shape_to_string(s[0]);
}

TEST(CpuDynamicShapes, SequencesThroughFullyConnectedSoftmaxLayerNormReduceAndViews) {
  // [n, L, 16]: MatMul + bias (FullyConnected), Softmax, LayerNormalization, a transpose,
  // a flattening view, a reduction over L, an activations-free MatMul of two activations
  auto g = make_graph(17);
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), Dim::sym("L"), 16})});
  auto* fc = g->add_node("MatMul", {x, g->add_constant("w", random_tensor({16, 24}, 1, 0.3f))}, 1, "fc")->output(0);
  auto* fb = g->add_node("Add", {fc, g->add_constant("b", random_tensor({24}, 2))}, 1, "fc_bias")->output(0);
  auto* sm = g->add_node("Softmax", {fb}, 1, "sm")->output(0);
  auto* ln = g->add_node("LayerNormalization",
                         {sm, g->add_constant("ls", random_tensor({24}, 3)), g->add_constant("lb", random_tensor({24}, 4))}, 1, "ln");
  auto* t = g->add_node("Transpose", {ln->output(0)}, 1, "t");
  t->attrs["perm"] = std::vector<int64_t>{0, 2, 1};
  auto* scores = g->add_node("MatMul", {ln->output(0), t->output(0)}, 1, "scores")->output(0);  // [n, L, L]
  auto* red = g->add_node("ReduceMean", {scores}, 1, "mean");
  red->attrs["axes"] = std::vector<int64_t>{1};
  red->attrs["keepdims"] = int64_t(0);
  auto* flat = g->add_node("Flatten", {t->output(0)}, 1, "flat");
  flat->attrs["axis"] = int64_t(1);
  g->add_output(red->output(0));
  g->add_output(flat->output(0));
  std::vector<std::vector<Shape>> stream = {{{1, 5, 16}}, {{1, 40, 16}}, {{1, 7, 16}}, {{1, 40, 16}},
                                            {{1, 1, 16}}, {{4, 12, 16}}, {{2, 33, 16}}, {{1, 5, 16}}};
  run_stream(g, stream, {"FullyConnected", "MatMul", "Softmax", "LayerNorm", "Reduce", "Transpose", "View"});
}

TEST(CpuDynamicShapes, PositionRowsFollowTheLength) {
  // BERT's embeddings: word rows by token plus position rows 2..L+1 (a Range from the
  // input's shape), normalised. Every new length folds the position Gather again, as a view of
  // the table's rows (fold_as_view): each plan must read its own length's rows.
  auto g = make_graph(17);
  auto* ids = g->add_input("ids", {DType::i64, dims({Dim::sym("n"), Dim::sym("L")})});
  auto* shape = g->add_node("Shape", {ids}, 1, "shape")->output(0);
  auto* len = g->add_node("Gather", {shape, g->add_constant("one", Tensor::scalar<int64_t>(1))}, 1, "len")->output(0);
  auto* two = g->add_constant("two", Tensor::scalar<int64_t>(2));  // positions 2..L+1: the rows past a prefix
  auto* end = g->add_node("Add", {len, two}, 1, "end")->output(0);
  auto* pos = g->add_node("Range", {two, end, g->add_constant("step", Tensor::scalar<int64_t>(1))}, 1, "range")->output(0);
  auto* prow = g->add_node("Gather", {g->add_constant("pos_table", random_tensor({48, 16}, 1)), pos}, 1, "position");
  auto* wrow = g->add_node("Gather", {g->add_constant("word_table", random_tensor({4, 16}, 2)), ids}, 1, "word");
  auto* sum = g->add_node("Add", {wrow->output(0), prow->output(0)}, 1, "embed")->output(0);
  auto* ln = g->add_node("LayerNormalization",
                         {sum, g->add_constant("ls", random_tensor({16}, 3)), g->add_constant("lb", random_tensor({16}, 4))}, 1, "ln");
  g->add_output(ln->output(0));
  run_stream(g, {{{1, 5}}, {{1, 40}}, {{1, 7}}, {{1, 46}}, {{1, 1}}, {{3, 12}}, {{2, 33}}, {{1, 5}}}, {"LayerNorm"});
}

TEST(CpuDynamicShapes, LstmOverEveryLengthAndBatch) {
  auto g = bidirectional_lstm_graph(dims({Dim::sym("T"), Dim::sym("n"), 6}));
  std::vector<std::vector<Shape>> stream = {{{3, 1, 6}}, {{20, 1, 6}}, {{5, 1, 6}}, {{20, 3, 6}}, {{1, 2, 6}}, {{9, 4, 6}}};
  run_stream(g, stream, {"LSTM"});
  expect_kiln_kernel(g, stream, cpu::NodeKind::LSTM, cpu::lstm_f32::available(), cpu::lstm_f32::impl_name());
}

TEST(CpuDynamicShapes, GruOverEveryLengthAndBatch) {
  // a bidirectional GRU as PyTorch exports it (linear_before_reset) from an initial state, its
  // directions side by side ([T, n, 16]) into a forward one without bias or linear_before_reset
  // and with a hidden size of 5 (vector tails): kiln's gru_f32 takes the length and batch at run time
  auto g = make_graph(14);
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("T"), Dim::sym("n"), 6})});
  auto* h0 = g->add_input("h0", {DType::f32, dims({2, Dim::sym("n"), 8})});
  auto* a = g->add_node("GRU", {x, g->add_constant("W", random_tensor({2, 24, 6}, 1, 0.5f)),
                                g->add_constant("R", random_tensor({2, 24, 8}, 2, 0.5f)),
                                g->add_constant("B", random_tensor({2, 48}, 3, 0.5f)), nullptr, h0},
                        2, "bigru");
  a->attrs["hidden_size"] = int64_t(8);
  a->attrs["direction"] = std::string("bidirectional");
  a->attrs["linear_before_reset"] = int64_t(1);
  auto* t = g->add_node("Transpose", {a->output(0)}, 1, "sides");  // [T, 2, n, 8] -> [T, n, 2, 8]
  t->attrs["perm"] = std::vector<int64_t>{0, 2, 1, 3};
  auto* y = g->add_node("Reshape", {t->output(0), g->add_constant("to", Tensor::from_vector<int64_t>({0, 0, 16}, {3}))},
                        1, "flat")->output(0);
  auto* b = g->add_node("GRU", {y, g->add_constant("W2", random_tensor({1, 15, 16}, 4, 0.5f)),
                                g->add_constant("R2", random_tensor({1, 15, 5}, 5, 0.5f))},
                        1, "gru2");
  b->attrs["hidden_size"] = int64_t(5);
  g->add_output(b->output(0));
  g->add_output(a->output(1));
  const std::vector<std::vector<Shape>> stream = {{{3, 1, 6}, {2, 1, 8}},  {{20, 1, 6}, {2, 1, 8}}, {{5, 1, 6}, {2, 1, 8}},
                                                  {{20, 3, 6}, {2, 3, 8}}, {{1, 2, 6}, {2, 2, 8}},  {{9, 4, 6}, {2, 4, 8}}};
  const bool kiln = cpu::gru_f32::available();  // else the reference kernel runs both
  run_stream(g, stream, kiln ? std::vector<std::string>{"GRU"} : std::vector<std::string>{});
  if (kiln) expect_kiln_kernel(g, stream, cpu::NodeKind::GRU, true, cpu::gru_f32::impl_name());
}

TEST(CpuDynamicShapes, GroupNormOverEveryLengthAndBatch) {
  // Conv1d -> GroupNorm(4 groups of 8) as PyTorch exports it (Reshape [n, 4, -1] ->
  // InstanceNormalization -> Reshape back -> Mul -> Add) -> GELU: wav2vec2's first layer
  auto g = make_graph(13);
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), 1, Dim::sym("T")})});
  auto* c = g->add_node("Conv", {x, g->add_constant("cw", random_tensor({8, 1, 10}, 1, 0.5f))}, 1, "conv");
  c->attrs["strides"] = std::vector<int64_t>{5};
  auto* grouped = g->add_node("Reshape", {c->output(0), g->add_constant("g", Tensor::from_vector<int64_t>({0, 4, -1}, {3}))},
                              1, "group")->output(0);
  auto* n = g->add_node("InstanceNormalization", {grouped, g->add_constant("ones", Tensor::from_vector<float>({1, 1, 1, 1}, {4})),
                                                  g->add_constant("zeros", Tensor::from_vector<float>({0, 0, 0, 0}, {4}))},
                        1, "norm");
  auto* back = g->add_node("Reshape", {n->output(0), g->add_node("Shape", {c->output(0)}, 1, "shape")->output(0)}, 1, "back");
  auto* w = g->add_node("Mul", {back->output(0), g->add_constant("w", random_tensor({8, 1}, 2))}, 1, "weight")->output(0);
  auto* b = g->add_node("Add", {w, g->add_constant("b", random_tensor({8, 1}, 3))}, 1, "bias")->output(0);
  g->add_output(g->add_node("Relu", {b}, 1, "act")->output(0));
  const std::vector<std::vector<Shape>> stream = {{{1, 1, 1600}}, {{1, 1, 8000}}, {{2, 1, 3999}}, {{1, 1, 15}}, {{3, 1, 800}}};
  run_stream(g, stream, {"InstanceNorm"});
}

TEST(CpuDynamicShapes, AttentionWithAMaskOverEveryLengthAndBatch) {
  // self-attention over [n, L, 16] with an additive mask [n, 1, 1, L]: the scores and the mask
  // copy live in the arena (Node::scratch), sized per plan; a plan that kept another length's
  // sizes or buffers reads or writes outside them (AddressSanitizer) or gives wrong values
  auto g = self_attention_graph(16, 4, 0.5f);
  std::vector<std::vector<Shape>> stream = {{{1, 8, 16}, {1, 1, 1, 8}},   {{1, 40, 16}, {1, 1, 1, 40}},
                                            {{3, 12, 16}, {3, 1, 1, 12}}, {{1, 40, 16}, {1, 1, 1, 40}},
                                            {{2, 3, 16}, {2, 1, 1, 3}},   {{4, 33, 16}, {4, 1, 1, 33}}};
  run_stream(g, stream, {"Attention"});
  expect_attention_impl(g, stream);
}

TEST(CpuDynamicShapes, AttentionOverPaddedBatchesOfEveryLength) {
  // A padded batch, as a tokenizer makes it: sequence i of the batch attends to its first
  // valid_i keys, the rest masked with Hugging Face's finfo(f32).min (attention_f32 leaves those
  // keys out, attended_keys); lengths grow, shrink and alternate, batches of 1 to 4, one sequence
  // with a single key and one without padding, against the reference executor. The outputs at
  // padded query positions are compared too: they attend to the valid keys like any other row.
  auto g = self_attention_graph(32, 2, 0.25f);
  ir::infer_shapes(*g);
  runtime::ReferenceExecutor ref(g);
  cpu::Executor ex(g, {});
  const std::vector<std::vector<int64_t>> batches = {{20}, {40, 31}, {7, 12, 1, 12}, {40}, {9, 3}, {64, 50, 33}};
  std::vector<std::vector<Shape>> stream;
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& valid : batches) {
      const int64_t n = static_cast<int64_t>(valid.size()), L = *std::max_element(valid.begin(), valid.end());
      SCOPED_TRACE(cat("pass ", pass, ", n ", n, ", L ", L));
      Tensor m(DType::f32, {n, 1, 1, L});
      for (int64_t b = 0; b < n; ++b)
        for (int64_t t = 0; t < L; ++t) m.data<float>()[b * L + t] = t < valid[static_cast<size_t>(b)] ? 0.0f : -3.4028235e38f;
      const std::vector<Tensor> in = {random_tensor({n, L, 32}, static_cast<uint32_t>(L)), m};
      expect_close(ref.run(in)[0], ex.run(in)[0], 1e-4, 1e-4);
      if (pass == 0) stream.push_back({{n, L, 32}, {n, 1, 1, L}});
    }
  expect_attention_impl(g, stream);
}

TEST(CpuDynamicShapes, GroupedQueryCausalAttentionOverEveryLength) {
  // ONNX Attention (opset 23), [n, heads, L, 8] with 4 query heads on 2 kv heads, causal
  auto g = make_graph(23);
  auto* q = g->add_input("q", {DType::f32, dims({Dim::sym("n"), 4, Dim::sym("L"), 8})});
  auto* k = g->add_input("k", {DType::f32, dims({Dim::sym("n"), 2, Dim::sym("L"), 8})});
  auto* v = g->add_input("v", {DType::f32, dims({Dim::sym("n"), 2, Dim::sym("L"), 8})});
  ir::Node* a = g->add_node("Attention", {q, k, v}, 1, "attention");
  a->attrs["is_causal"] = ir::Attribute(int64_t{1});
  g->add_output(a->output(0));
  std::vector<std::vector<Shape>> stream;
  for (auto [n, L] : std::vector<std::pair<int64_t, int64_t>>{{1, 5}, {2, 19}, {1, 70}, {3, 2}, {1, 5}})
    stream.push_back({{n, 4, L, 8}, {n, 2, L, 8}, {n, 2, L, 8}});
  run_stream(g, stream, {"Attention"});
  expect_attention_impl(g, stream);
}

TEST(CpuDynamicShapes, NewShapesTakeQuickPrimitivesAndAFrequentShapeTheFastest) {
  // A 3x3 convolution whose width varies. A graph for a new shape takes oneDNN's direct JIT
  // kernel where its first choice is a brgemm one (many kernels to generate per shape); once
  // a shape has run Executor::kHotRuns times, its graph is built again with the first choice.
  // A FullyConnected beside it keeps kiln's GEMM in the rebuilt graph (the faster one).
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, dims({1, 16, 8, Dim::sym("w")})});
  auto* v = g->add_input("v", {DType::f32, dims({Dim::sym("n"), 16})});
  g->add_node("Relu", {conv(*g, x, 16, 32, 5, "c")}, 1, "r");
  g->add_output(g->nodes().back()->output(0));
  // (with a fused Relu: below AVX2 its oneDNN primitive is then oneDNN's first choice, not a
  // quick runtime-M one that a hot rebuild would replace)
  auto* fc = g->add_node("MatMul", {v, g->add_constant("fw", random_tensor({16, 8}, 9))}, 1, "fc");
  g->add_output(g->add_node("Relu", {fc->output(0)}, 1, "fr")->output(0));
  ir::infer_shapes(*g);
  const Shape shape = {1, 16, 8, 40}, vshape = {3, 16};
  // what oneDNN picks first on this CPU: a graph of static shapes builds with it
  auto fixed = g->clone();
  fixed->inputs()[0]->type.shape = ir::PartialShape(shape);
  fixed->inputs()[1]->type.shape = ir::PartialShape(vshape);
  ir::infer_shapes(*fixed);
  cpu::Graph first_choice(fixed);
  const std::string best = first_choice.describe();
  const bool brgemm_first = best.find("[brgconv") != std::string::npos;

  runtime::ReferenceExecutor ref(g);
  cpu::Executor ex(g);
  auto exec_type = [](const std::vector<ProfilingInfo>& rows, const char* type) {
    for (const ProfilingInfo& r : rows)
      if (r.node_type == type && r.status == ProfilingInfo::Status::executed) return r.exec_type;
    return std::string("(none)");
  };
  std::vector<std::string> seen, seen_fc;
  for (size_t i = 0; i <= cpu::Executor::kHotRuns + 1; ++i) {
    const std::vector<Tensor> in = {random_tensor(shape, static_cast<uint32_t>(i + 1)),
                                    random_tensor(vshape, static_cast<uint32_t>(i + 100))};
    std::vector<ProfilingInfo> rows;
    auto got = ex.run(in, &rows);
    const auto want = ref.run(in);
    for (size_t o = 0; o < want.size(); ++o) expect_close(want[o], got[o], 1e-4, 1e-4);
    seen.push_back(exec_type(rows, "Convolution"));
    seen_fc.push_back(exec_type(rows, "FullyConnected"));
  }
  if (cpu::gemm_f32::available()) {  // before and after a rebuild (profiles show ':' as '_')
    EXPECT_EQ(seen_fc.front().rfind("kiln_gemm", 0), 0u) << seen_fc.front();
    EXPECT_EQ(seen_fc.back().rfind("kiln_gemm", 0), 0u) << seen_fc.back();
  }
  SCOPED_TRACE(best);
  if (brgemm_first) {
    EXPECT_EQ(seen.front().rfind("jit", 0), 0u) << seen.front();
    EXPECT_EQ(seen.back().rfind("brgconv", 0), 0u) << seen.back();
    EXPECT_EQ(ex.hot_rebuilds(), 1u);
    EXPECT_EQ(ex.graphs_built(), 2u);
  } else {  // e.g. AVX2 or SSE4.1: the first choice is quick already, nothing to rebuild
    EXPECT_EQ(seen.front(), seen.back());
    EXPECT_EQ(ex.hot_rebuilds(), 0u);
    EXPECT_EQ(ex.graphs_built(), 1u);
  }
}

TEST(CpuDynamicShapes, AtBf16ANewShapesConvolutionsComputeInF32UntilTheShapeIsHotWhenAskedTo) {
  // inference_precision = bf16, two 3x3 convolutions and a FullyConnected whose input sizes vary,
  // kiln_convolutions_until_hot = f32. A new shape's graph computes the convolutions in f32, as
  // f32 mode does (oneDNN's bf16 convolutions are JIT kernels made per shape); once the shape has
  // run Executor::kHotRuns times its graph is built again with them in bf16. The FullyConnected
  // stays bf16 throughout. With kiln_convolutions_until_hot = bf16 the convolutions are bf16 from
  // the first run.
  if (!cpu::bf16_available()) GTEST_SKIP() << "no bf16 on " << cpu::isa_description();
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), 16, 8, Dim::sym("w")})});
  auto* v = g->add_input("v", {DType::f32, dims({Dim::sym("m"), 32})});
  auto* c1 = g->add_node("Relu", {conv(*g, x, 16, 32, 3, "c1")}, 1, "r1");
  g->add_output(g->add_node("Relu", {conv(*g, c1->output(0), 32, 32, 1, "c2")}, 1, "r2")->output(0));
  g->add_output(g->add_node("MatMul", {v, g->add_constant("fw", random_tensor({32, 8}, 9))}, 1, "fc")->output(0));
  ir::infer_shapes(*g);
  runtime::ReferenceExecutor ref(g);
  cpu::GraphOptions bf16;
  bf16.bf16 = true;
  cpu::GraphOptions until_hot = bf16;
  until_hot.convolutions_until_hot = cpu::GraphOptions::UntilHot::f32;  // kiln_convolutions_until_hot = f32
  cpu::Executor ex(g, until_hot);
  auto exec_types = [](const std::vector<ProfilingInfo>& rows, const std::string& type) {
    std::vector<std::string> out;
    for (const ProfilingInfo& r : rows)
      if (r.node_type == type && r.status == ProfilingInfo::Status::executed) out.push_back(r.exec_type);
    return out;
  };
  auto in_bf16 = [](const std::string& exec_type) { return exec_type.find("bf16") != std::string::npos; };
  auto max_abs = [](const Tensor& t) {
    double m = 0;
    for (int64_t i = 0; i < t.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(t.data<float>()[i])));
    return m;
  };
  const std::vector<Shape> hot = {{1, 16, 8, 24}, {5, 32}};
  for (size_t i = 0; i <= cpu::Executor::kHotRuns + 1; ++i) {
    // another shape between the runs of the hot one: its graph is new each time it is made
    for (const std::vector<Shape>& s : {hot, std::vector<Shape>{{2, 16, 8, 11 + static_cast<int64_t>(i)}, {3, 32}}}) {
      SCOPED_TRACE(cat("run ", i, ", shapes ", shape_to_string(s[0])));
      const std::vector<Tensor> in = {random_tensor(s[0], static_cast<uint32_t>(i + 1)),
                                      random_tensor(s[1], static_cast<uint32_t>(i + 50))};
      std::vector<ProfilingInfo> rows;
      auto got = ex.run(in, &rows);
      const auto want = ref.run(in);
      const std::vector<std::string> convs = exec_types(rows, "Convolution"), fcs = exec_types(rows, "FullyConnected");
      const bool rebuilt = s == hot && i >= cpu::Executor::kHotRuns;  // the kHotRuns-th run rebuilt it
      ASSERT_FALSE(fcs.empty());
      if (cpu::bf16_native()) {  // (oneDNN's emulated bf16 matmul is named gemm:jit)
        EXPECT_TRUE(in_bf16(fcs[0])) << fcs[0];
      }
      if (rebuilt) {
        ASSERT_FALSE(convs.empty());
        for (const std::string& t : convs) EXPECT_TRUE(in_bf16(t)) << t;
        // bf16 keeps 8 mantissa bits: about 3 significant digits per operand, errors of a few
        // percent of the output's range after two convolutions
        expect_close(want[0], got[0], 2e-2, 5e-2 * max_abs(want[0]));
      } else {
        // kiln's depthwise block is no candidate here; f32 kernels of kiln's or oneDNN's
        for (const std::string& t : convs) EXPECT_FALSE(in_bf16(t)) << t;
        expect_close(want[0], got[0], 1e-4, 1e-4);  // f32, as the reference
      }
      expect_close(want[1], got[1], 2e-2, 2e-2 * max_abs(want[1]));
    }
  }
  EXPECT_EQ(ex.hot_rebuilds(), 1u);
  // the plan's account says so
  const auto& log = ex.plan_for(hot).log.entries;
  EXPECT_TRUE(std::any_of(log.begin(), log.end(), [](const transforms::PassLog::Entry& e) {
    return e.pass == cpu::kConvolutionsInF32UntilHot && e.applied;
  }));

  // kiln_convolutions_until_hot = bf16: bf16 from a new shape's first run, on oneDNN's direct JIT
  // kernel where its first choice is brgconv (quicker to create: Node::quick_impl), and built
  // again with its first choice once the shape is hot
  cpu::Executor eager(g, bf16);
  const std::vector<Tensor> in = {random_tensor(hot[0], 7), random_tensor(hot[1], 8)};
  std::vector<ProfilingInfo> rows;
  eager.run(in, &rows);
  const std::vector<std::string> convs = exec_types(rows, "Convolution");
  ASSERT_FALSE(convs.empty());
  for (const std::string& t : convs) EXPECT_TRUE(in_bf16(t)) << t;
  const size_t quick = eager.plan_for(hot).cpu->quick_nodes();
  for (const auto& n : eager.plan_for(hot).cpu->nodes()) {
    if (n->quick_impl) {
      EXPECT_EQ(n->impl.rfind("jit", 0), 0u) << n->name << ": " << n->impl;
    }
  }
  for (size_t i = 1; i <= cpu::Executor::kHotRuns; ++i) {
    rows.clear();
    eager.run(in, &rows);
  }
  EXPECT_EQ(eager.hot_rebuilds(), quick > 0 ? 1u : 0u);
  for (const std::string& t : exec_types(rows, "Convolution")) EXPECT_TRUE(in_bf16(t)) << t;
}

TEST(CpuDynamicShapes, FusionAnswersAreAskedOncePerLayerForAllShapes) {
  // Whether a convolution / matmul keeps an optimised kernel with a post-op is asked of
  // oneDNN once per layer and chain, not once per shape: every plan after the first takes the
  // answer (and fuses alike), and every shape still computes what the reference does.
  auto g = make_graph(17);
  auto* x = g->add_input("x", {DType::f32, dims({1, 8, 8, Dim::sym("w")})});
  g->add_node("Relu", {conv(*g, x, 8, 16, 3, "c")}, 1, "r");
  auto* t = g->add_node("Transpose", {g->nodes().back()->output(0)}, 1, "t");
  t->attrs["perm"] = ir::Attribute(std::vector<int64_t>{0, 2, 3, 1});
  auto* fc = g->add_node("MatMul", {t->output(0), g->add_constant("wf", random_tensor({16, 4}, 4, 0.3f))}, 1, "fc");
  g->add_output(g->add_node("Relu", {fc->output(0)}, 1, "fr")->output(0));
  const std::vector<std::vector<Shape>> stream = {{{1, 8, 8, 8}}, {{1, 8, 8, 24}}, {{1, 8, 8, 40}}, {{1, 8, 8, 12}}};
  run_stream(g, stream, {"Convolution", "FullyConnected"});
  cpu::Executor ex(g);
  size_t first = 0;
  for (size_t i = 0; i < stream.size(); ++i) {
    const auto& plan = ex.plan_for(stream[i]);
    ASSERT_TRUE(plan.cpu) << plan.fallback_reason;
    for (const auto& n : plan.cpu->nodes()) {
      if (n->kind() != cpu::NodeKind::Convolution && n->kind() != cpu::NodeKind::FullyConnected) continue;
      EXPECT_EQ(n->fused.size(), 1u) << n->name << " at shape " << i;  // each took its Relu
    }
    if (i == 0) first = ex.fusion_decisions().size();
  }
  // the convolution's, and the matmul's unless kiln's GEMM runs it (AVX-512, AVX2): its epilogue
  // takes the Relu whatever oneDNN would do, so oneDNN is not asked
  EXPECT_EQ(first, cpu::gemm_f32::available() ? 1u : 2u);
  EXPECT_EQ(ex.fusion_decisions().size(), first);  // no new question for the later shapes
  // a model of static shapes keeps none: its one plan asks once anyway
  auto fixed = g->clone();
  fixed->inputs()[0]->type.shape = ir::PartialShape(Shape{1, 8, 8, 8});
  ir::infer_shapes(*fixed);
  cpu::Executor st(fixed);
  ASSERT_TRUE(st.plan_for({{1, 8, 8, 8}}).cpu);
  EXPECT_EQ(st.fusion_decisions().size(), 0u);
}

TEST(CpuDynamicShapes, AFullyConnectedsFusedChainMatchesTheReferenceAtEveryRowCount) {
  // Gemm (transB, alpha, beta, a bias per column) on [n, 40], then a per-column Mul and a Tanh
  // fused into it: kiln's GEMM packs alpha * B^T and runs the chain in its epilogue (AVX-512, AVX2),
  // oneDNN otherwise. Row counts across its 6-row blocks, below and above.
  auto g = make_graph(13);
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), 40})});
  auto* gemm = g->add_node("Gemm", {x, g->add_constant("w", random_tensor({70, 40}, 3, 0.3f)),
                                    g->add_constant("c", random_tensor({70}, 4))}, 1, "gemm");
  gemm->attrs["transB"] = int64_t(1);
  gemm->attrs["alpha"] = 0.5f;
  gemm->attrs["beta"] = 2.0f;
  auto* mul = g->add_node("Mul", {gemm->output(0), g->add_constant("s", random_tensor({70}, 5))}, 1, "mul");
  g->add_output(g->add_node("Tanh", {mul->output(0)}, 1, "tanh")->output(0));
  const std::vector<std::vector<Shape>> stream = {{{1, 40}}, {{6, 40}}, {{7, 40}}, {{31, 40}}, {{2, 40}}};
  run_stream(g, stream, {"FullyConnected"});
  cpu::Executor ex(g);
  for (const auto& s : stream) {
    const auto& plan = ex.plan_for(s);
    ASSERT_TRUE(plan.cpu) << plan.fallback_reason;
    for (const auto& n : plan.cpu->nodes()) {
      if (std::string(n->type()) != "FullyConnected") continue;
      EXPECT_EQ(n->fused.size(), 2u) << n->name;  // the Mul and the Tanh
      if (cpu::gemm_f32::available()) {
        EXPECT_EQ(n->impl, cpu::gemm_f32::impl_name());
      }
    }
  }
}

TEST(CpuDynamicShapes, LayerNormsTakeTheirRowsAtRunTime) {
  // Add + LayerNormalization (fused into SkipLayerNorm) and a plain LayerNormalization over
  // [n, L, 40]: kiln's kernel with AVX-512 (nothing made per row count), oneDNN otherwise
  auto g = make_graph(17);
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), Dim::sym("L"), 40})});
  auto* y = g->add_input("y", {DType::f32, dims({Dim::sym("n"), Dim::sym("L"), 40})});
  auto* sum = g->add_node("Add", {x, y}, 1, "add");
  auto* ln1 = g->add_node("LayerNormalization", {sum->output(0), g->add_constant("g1", random_tensor({40}, 3)),
                                                 g->add_constant("b1", random_tensor({40}, 4))}, 1, "ln1");
  auto* ln2 = g->add_node("LayerNormalization", {ln1->output(0), g->add_constant("g2", random_tensor({40}, 5))}, 1, "ln2");
  g->add_output(ln2->output(0));
  g->add_output(ln1->output(0));
  const std::vector<std::vector<Shape>> stream = {{{1, 5, 40}, {1, 5, 40}}, {{2, 9, 40}, {2, 9, 40}}, {{1, 1, 40}, {1, 1, 40}}};
  run_stream(g, stream, {"SkipLayerNorm", "LayerNorm"});
  expect_kiln_kernel(g, stream, cpu::NodeKind::LayerNorm, cpu::layer_norm_f32::available(),
                     cpu::layer_norm_f32::impl_name());
}

TEST(CpuDynamicShapes, SkipLayerNormWithItsBiasAtEveryRowCount) {
  // com.microsoft SkipLayerNormalization with gamma, beta and its own bias (input + skip + bias,
  // normalised): the bias as kiln's kernel takes it, or as oneDNN's binary post-op below AVX2
  auto g = make_graph(17);
  g->opset_imports["com.microsoft"] = 1;
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), Dim::sym("L"), 24})});
  auto* y = g->add_input("y", {DType::f32, dims({Dim::sym("n"), Dim::sym("L"), 24})});
  auto* ln = g->add_node("SkipLayerNormalization",
                         {x, y, g->add_constant("gamma", random_tensor({24}, 3)), g->add_constant("beta", random_tensor({24}, 4)),
                          g->add_constant("bias", random_tensor({24}, 5))}, 1, "skip_ln", "com.microsoft");
  ln->attrs["epsilon"] = 1e-5f;
  g->add_output(ln->output(0));
  run_stream(g, {{{1, 5, 24}, {1, 5, 24}}, {{2, 9, 24}, {2, 9, 24}}, {{1, 1, 24}, {1, 1, 24}}}, {"SkipLayerNorm"});
}

TEST(CpuDynamicShapes, AFullyConnectedTakesItsRowsAtRunTime) {
  // [n, L, 16] x [16, 24], one without a post-op and one with a fused Relu, over four shapes.
  // With AVX-512 or AVX2 kiln's GEMM runs both (nothing made per M; the Relu in its epilogue).
  // Below AVX2 oneDNN does: one matmul with a runtime M for the plain one (its gemm kernel, a
  // quick implementation), a primitive per shape for the fused one.
  auto g = make_graph(17);
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), Dim::sym("L"), 16})});
  auto* plain = g->add_node("MatMul", {x, g->add_constant("w", random_tensor({16, 24}, 1, 0.3f))}, 1, "plain");
  auto* fused = g->add_node("MatMul", {x, g->add_constant("w2", random_tensor({16, 8}, 2, 0.3f))}, 1, "fused");
  auto* relu = g->add_node("Relu", {fused->output(0)}, 1, "relu");
  g->add_output(g->add_node("Softmax", {plain->output(0)}, 1, "sm")->output(0));
  g->add_output(relu->output(0));
  const std::vector<std::vector<Shape>> stream = {{{1, 5, 16}}, {{1, 40, 16}}, {{3, 7, 16}}, {{1, 1, 16}}};
  run_stream(g, stream, {"FullyConnected"});
  cpu::Executor ex(g);
  const bool kiln_gemm = cpu::gemm_f32::available();
  for (const auto& s : stream) {
    const auto& plan = ex.plan_for(s);
    ASSERT_TRUE(plan.cpu) << plan.fallback_reason;
    for (const auto& n : plan.cpu->nodes()) {
      if (std::string(n->type()) != "FullyConnected") continue;
      SCOPED_TRACE(n->name + " " + n->impl);
      const bool has_post_ops = !n->fused.empty();
      EXPECT_EQ(n->name == "plain", !has_post_ops);
      if (kiln_gemm) {
        EXPECT_EQ(n->impl, cpu::gemm_f32::impl_name());
        EXPECT_FALSE(n->quick_impl);  // as fast as oneDNN's: no second compile when the shape repeats
      } else {
        EXPECT_EQ(n->quick_impl, !has_post_ops);
        if (!has_post_ops) {
          EXPECT_NE(n->impl.find("gemm"), std::string::npos);
        }
      }
    }
  }
}

TEST(CpuDynamicShapes, AnElementwiseChainCompilesItsKernelsOnceForEveryLength) {
  // Add -> Tanh -> Mul over two [n, L] inputs, no broadcasting: one snippets Subgraph whose
  // kernels take a fixed number of elements (a chunk of 4096, and 256 for the rest, the last
  // partial one through a padded copy), so a new length compiles nothing. Lengths around
  // both chunk sizes, checked against the reference executor.
  auto g = make_graph(17);
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), Dim::sym("L")})});
  auto* y = g->add_input("y", {DType::f32, dims({Dim::sym("n"), Dim::sym("L")})});
  auto* t = g->add_node("Tanh", {g->add_node("Add", {x, y}, 1, "add")->output(0)}, 1, "tanh")->output(0);
  g->add_output(g->add_node("Mul", {t, x}, 1, "mul")->output(0));
  auto stream_of = [](const std::vector<Shape>& shapes) {
    std::vector<std::vector<Shape>> s;
    for (const Shape& sh : shapes) s.push_back({sh, sh});
    return s;
  };
  const auto first = stream_of({{1, 37}, {1, 4096}, {3, 4096 + 999}, {1, 256}, {2, 128}});
  run_stream(g, first, {});  // (no Subgraph where the CPU has no snippets target: SSE4.1)
  cpu::Executor ex(g);
  for (const auto& s : first) ex.plan_for(s);
  const auto& plan = ex.plan_for(first.back());
  ASSERT_TRUE(plan.cpu);
  bool jit = false;
  for (const auto& n : plan.cpu->nodes())
    if (n->kind() == cpu::NodeKind::Subgraph) jit = n->impl.rfind("snippet_", 0) == 0;
  if (!jit) GTEST_SKIP() << "no snippets kernel at this ISA:\n" << plan.cpu->describe();
  const size_t misses = snippets::kernel_cache_stats().misses;
  const auto later = stream_of({{1, 5}, {5, 1001}, {1, 4096 * 3 + 17}, {7, 300}});
  run_stream(g, later, {});
  EXPECT_EQ(snippets::kernel_cache_stats().misses, misses) << "a new length compiled a kernel";
}

}  // namespace test_cpu_dynamic_shapes

namespace test_cpu_dynamic_shapes {

namespace {

// ORT's dynamic quantization of a float op: DynamicQuantizeLinear(x) -> `op`(q, W, q_zp, w_zp)
// -> Cast -> Mul(q_scale * w_scale) [-> Add(bias)]: the form `kiln quantize --dynamic` writes
// (s8 weights, zero point 0) or ORT's quantizer with u8 weights and their zero point.
ir::Value* dynamic_quantized(ir::Graph& g, ir::Value* x, const std::string& op, Tensor w, Tensor w_zero_point,
                             float w_scale, Tensor bias, const std::string& name) {
  ir::Node* q = g.add_node("DynamicQuantizeLinear", {x}, {name + "_q", name + "_qs", name + "_qz"}, name + "_dql");
  ir::Node* mm = g.add_node(op, {q->output(0), g.add_constant(name + "_w", std::move(w)), q->output(2),
                                 g.add_constant(name + "_wz", std::move(w_zero_point))},
                            1, name);
  if (op == "ConvInteger") mm->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  ir::Node* cast = g.add_node("Cast", {mm->output(0)}, 1, name + "_cast");
  cast->attrs["to"] = int64_t{1};  // FLOAT
  ir::Value* scale =
      g.add_node("Mul", {q->output(1), g.add_constant(name + "_ws", Tensor::scalar<float>(w_scale))}, 1, name + "_scale")->output(0);
  ir::Value* y = g.add_node("Mul", {cast->output(0), scale}, 1, name + "_mul")->output(0);
  if (!bias.defined()) return y;
  return g.add_node("Add", {y, g.add_constant(name + "_b", std::move(bias))}, 1, name + "_bias")->output(0);
}

Tensor i8_zero() {
  Tensor z(DType::i8, Shape{});
  z.data<int8_t>()[0] = 0;
  return z;
}

}  // namespace

TEST(CpuDynamicShapes, QdqResidualBlockOverEveryShape) {
  // The QDQ residual block of the static int8 tests with [n, 8, h, w] inputs: where the int8
  // kernels are exact its convolutions, the residual sum, the u8 MaxPool and the Quantize /
  // Dequantize at its ends are integer nodes made per shape from the one template; elsewhere
  // the pairs compute in f32. Against the reference: where a layer's float result lies within
  // rounding of a tie the two round it apart, and the step travels through the layers after
  // it (measured: 1-3% of the values a step or two of y apart, on every ISA and shape).
  auto g = qdq_block(dims({Dim::sym("n"), 8, Dim::sym("h"), Dim::sym("w")}));
  const std::vector<std::string> kinds = cpu::int8_network_kernels()
                                             ? std::vector<std::string>{"QLinearConv", "QuantizeLinear", "DequantizeLinear", "Pooling"}
                                             : std::vector<std::string>{"Convolution"};
  run_stream(g, image_stream(8), kinds,
             [](const Tensor& want, const Tensor& got) { expect_within_steps(want, got, 0.012, 2, 0.05); });
}

TEST(CpuDynamicShapes, DynamicallyQuantizedProjectionsOverEveryLengthAndBatch) {
  // Two projections of a transformer as ORT's dynamic quantizer writes them, [n, L, 32] ->
  // [n, L, 24] -> Relu -> [n, L, 16]: each new shape quantizes its activations at run time
  // (DynamicQuantize) and multiplies them in integers (MatMulInteger, its scales and bias in
  // the store). Exact integer products: as close to the reference as float rounding allows.
  auto g = make_graph(13);
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), Dim::sym("L"), 32})});
  ir::Value* p1 = dynamic_quantized(*g, x, "MatMulInteger", random_ints(DType::i8, {32, 24}, 1, -127, 127), i8_zero(),
                                    0.004f, random_tensor({24}, 2), "proj1");
  ir::Value* r = g->add_node("Relu", {p1}, 1, "relu")->output(0);
  g->add_output(dynamic_quantized(*g, r, "MatMulInteger", random_ints(DType::i8, {24, 16}, 3, -127, 127), i8_zero(),
                                  0.003f, random_tensor({16}, 4), "proj2"));
  const std::vector<std::vector<Shape>> stream = {{{1, 5, 32}}, {{1, 40, 32}}, {{3, 12, 32}}, {{1, 7, 32}},
                                                  {{2, 33, 32}}, {{1, 1, 32}}, {{4, 9, 32}}};
  auto ex = run_stream(g, stream, {"DynamicQuantize"});
  EXPECT_GE(count_kind(*ex, stream.back(), cpu::NodeKind::MatMulInteger), 2u);
}

TEST(CpuDynamicShapes, DynamicallyQuantizedConvolutionsOverEveryShape) {
  // DynamicQuantizeLinear -> ConvInteger (3x3) -> Cast -> scale [-> bias] over images of every
  // size and batch: s8 weights with a bias, and u8 weights with a zero point of their own
  for (DType wt : {DType::i8, DType::u8}) {
    SCOPED_TRACE(dtype_name(wt));
    auto g = make_graph(13);
    auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), 4, Dim::sym("h"), Dim::sym("w")})});
    const bool s8 = wt == DType::i8;
    g->add_output(dynamic_quantized(*g, x, "ConvInteger", random_ints(wt, {8, 4, 3, 3}, 5, s8 ? -127 : 0, s8 ? 127 : 255),
                                    s8 ? i8_zero() : u8_scalar(131), 0.002f, s8 ? random_tensor({8, 1, 1}, 6) : Tensor(),
                                    "conv"));
    auto ex = run_stream(g, image_stream(4), {"DynamicQuantize"});
    EXPECT_GE(count_kind(*ex, image_stream(4).back(), cpu::NodeKind::ConvInteger), 1u);
  }
}

TEST(CpuDynamicShapes, SlicesCastsBranchesAndReferenceOpsOverEveryShape) {
  // [n, L, 8]: a Slice of the sequence (a view of the input's bytes when n is 1, a kernel
  // otherwise), an ArgMax cast to int32 and back to float (the Cast node), a CumSum (no node of
  // its own: the Reference node), and an If on a condition computed from the data (a branch
  // per inference, its graphs made for this shape)
  auto g = make_graph(13);
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), Dim::sym("L"), 8})});
  auto* big = g->add_node("Mul", {x, g->add_constant("ten", Tensor::scalar<float>(10.0f))}, 1, "big")->output(0);
  auto* sl = g->add_node("Slice", {big, g->add_constant("starts", Tensor::from_vector<int64_t>({1}, {1})),
                                   g->add_constant("ends", Tensor::from_vector<int64_t>({INT64_MAX}, {1})),
                                   g->add_constant("axes", Tensor::from_vector<int64_t>({1}, {1}))},
                         1, "slice")->output(0);
  ir::Node* am = g->add_node("ArgMax", {sl}, 1, "argmax");  // [n, L - 1, 1] int64
  am->attrs["axis"] = int64_t{2};
  ir::Node* to_int = g->add_node("Cast", {am->output(0)}, 1, "to_int");
  to_int->attrs["to"] = int64_t{6};  // INT32
  ir::Node* to_float = g->add_node("Cast", {to_int->output(0)}, 1, "to_float");
  to_float->attrs["to"] = int64_t{1};
  ir::Value* sum = g->add_node("Add", {sl, to_float->output(0)}, 1, "add_index")->output(0);
  ir::Node* cs = g->add_node("CumSum", {sum, g->add_constant("axis", Tensor::scalar<int64_t>(1))}, {"cs"}, "cumsum");
  ir::Node* mean = g->add_node("ReduceMean", {x}, 1, "mean");
  mean->attrs["keepdims"] = int64_t{0};
  ir::Value* cond =
      g->add_node("Greater", {mean->output(0), g->add_constant("zero", Tensor::scalar<float>(0.0f))}, 1, "positive")->output(0);
  auto branch = [](bool then) {
    auto b = make_graph(13);
    ir::Value* in = b->add_input("cs", {DType::f32, ir::PartialShape()});
    ir::Node* n = then ? b->add_node("Relu", {in}, 1, "relu") : b->add_node("Neg", {in}, 1, "neg");
    b->add_output(n->output(0));
    return b;
  };
  ir::Node* iff = g->add_node("If", {cond, cs->output(0)}, 1, "if");
  iff->attrs["then_branch"] = ir::Attribute(branch(true));
  iff->attrs["else_branch"] = ir::Attribute(branch(false));
  iff->attrs["kiln_captures"] = ir::Attribute(std::vector<std::string>{"cs"});
  g->add_output(iff->output(0));
  const std::vector<std::vector<Shape>> stream = {{{1, 5, 8}}, {{1, 40, 8}}, {{3, 12, 8}}, {{1, 7, 8}},
                                                  {{2, 33, 8}}, {{1, 2, 8}}, {{1, 5, 8}}};
  auto ex = run_stream(g, stream, {"Cast", "Reference", "If"});
  EXPECT_GE(count_kind(*ex, stream.back(), cpu::NodeKind::SliceView), 1u) << "a slice of one sequence is a view";
  EXPECT_EQ(count_kind(*ex, {{3, 12, 8}}, cpu::NodeKind::SliceView), 0u) << "a slice of three is no contiguous run";
}

}  // namespace test_cpu_dynamic_shapes
