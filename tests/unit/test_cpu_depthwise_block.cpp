// MobileNet's inverted residual on kiln's kernels: the depthwise row kernel (cpu/depthwise_f32.hpp)
// against the direct sum, and FuseDepthwiseBlock (cpu/passes/fuse_depthwise_block.cpp) on small
// built graphs: the nodes it makes, what it leaves and why, and the DepthwiseBlock node's output
// against the reference executor over strides, windows, channel tails, batches of one (an image
// split between threads) and more, and images whose rows do not fit one ring.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cpu/depthwise_f32.hpp"
#include "cpu/gemm_f32.hpp"
#include "cpu/isa.hpp"

#include "cpu_test_util.hpp"

namespace test_cpu_depthwise_block {

using namespace kiln;
using namespace kiln::test;
namespace dw = kiln::cpu::depthwise_f32;

namespace {

struct Block {
  int64_t n = 1, cin = 16, ce = 48, cout = 16, h = 10, w = 12;
  int64_t k = 3, stride = 1, dil = 1;  // the depthwise window, its stride and dilation (pads dil * k / 2)
  bool expand = true, project = true, residual = true;
  bool clip = true;  // Clip(0, 6) after the expansion and the depthwise convolution (else Relu) ...
  bool hardswish = false;  // ... or HardSwish (MobileNet-v3)
  int64_t ek = 1, estride = 1;  // the expansion's window (pads ek / 2) and stride: 1x1, or an image stem's
  bool from_input = false;      // x is the graph's input itself (else a Relu of it)
};

// Relu -> x: [1x1 (or ek x ek) cin -> ce, Clip] -> k x k depthwise (pads k / 2), Clip -> [1x1 ce ->
// cout] [+ x] (x an intermediate tensor, as in a network: the residual sum may accumulate into it;
// or the input itself)
std::shared_ptr<ir::Graph> block_graph(const Block& b) {
  auto g = b.hardswish ? make_graph(14) : make_graph();  // (HardSwish: opset 14)
  auto* in = g->add_input("in", {DType::f32, ir::PartialShape(Shape{b.n, b.expand ? b.cin : b.ce, b.h, b.w})});
  ir::Value* x = b.from_input ? in : g->add_node("Relu", {in}, 1, "pre")->output(0);
  auto act = [&](ir::Value* v, const std::string& n) {
    if (b.hardswish) return g->add_node("HardSwish", {v}, 1, n)->output(0);
    if (!b.clip) return g->add_node("Relu", {v}, 1, n)->output(0);
    return g->add_node("Clip", {v, g->add_constant(n + "_lo", Tensor::scalar<float>(0.0f)),
                                g->add_constant(n + "_hi", Tensor::scalar<float>(6.0f))},
                       1, n)
        ->output(0);
  };
  ir::Value* e = x;
  if (b.expand) {
    auto* c = g->add_node("Conv", {x, g->add_constant("w1", random_tensor({b.ce, b.cin, b.ek, b.ek}, 1, 0.4f)),
                                   g->add_constant("b1", random_tensor({b.ce}, 2, 0.2f))},
                          1, "expand");
    const int64_t ep = b.ek / 2;
    c->attrs["pads"] = std::vector<int64_t>{ep, ep, ep, ep};
    c->attrs["strides"] = std::vector<int64_t>{b.estride, b.estride};
    e = act(c->output(0), "act1");
  }
  auto* d = g->add_node("Conv", {e, g->add_constant("w2", random_tensor({b.ce, 1, b.k, b.k}, 3, 0.4f)),
                                 g->add_constant("b2", random_tensor({b.ce}, 4, 0.2f))},
                        1, "dw");
  d->attrs["group"] = b.ce;
  const int64_t p = b.dil * (b.k / 2);
  d->attrs["pads"] = std::vector<int64_t>{p, p, p, p};
  d->attrs["strides"] = std::vector<int64_t>{b.stride, b.stride};
  if (b.dil > 1) d->attrs["dilations"] = std::vector<int64_t>{b.dil, b.dil};
  ir::Value* y = act(d->output(0), "act2");
  if (b.project)
    y = g->add_node("Conv", {y, g->add_constant("w3", random_tensor({b.cout, b.ce, 1, 1}, 5, 0.4f)),
                             g->add_constant("b3", random_tensor({b.cout}, 6, 0.2f))},
                    1, "project")
            ->output(0);
  if (b.residual) y = g->add_node("Add", {y, x}, 1, "add")->output(0);
  g->add_output(y);
  return g;
}

CompareOptions agnostic(transforms::PassLog* log) {
  CompareOptions o = fusing(log);
  o.shape_agnostic = true;
  return o;
}

}  // namespace

TEST(DepthwiseF32, RowMatchesTheDirectSum) {
  if (!dw::available()) GTEST_SKIP() << "no AVX2 (" << cpu::isa_description() << "): FuseDepthwiseBlock leaves oneDNN's";
  EXPECT_FALSE(dw::supports(7, 1));
  EXPECT_FALSE(dw::supports(3, 3));
  for (int64_t k : {3, 5})
    for (int64_t s : {1, 2})
      for (int64_t c : {5, 16, 24, 40})  // tails of 8 and 16 lanes
        for (int64_t iw : {1, 2, 7, 9, 13, 21, 25, 30})  // (same_row's cases: groups of 4 and 8, the extra group)
          for (int64_t pad : {int64_t(0), k / 2, k - 1})
            for (bool hs : {false, true}) {
              const int64_t ow = (iw + 2 * pad - k) / s + 1;
              if (ow < 1) continue;
              SCOPED_TRACE(testing::Message() << "k " << k << " stride " << s << " channels " << c << " width " << iw
                                              << " pad " << pad << (hs ? " HardSwish" : ""));
              const uint32_t seed = static_cast<uint32_t>(k * 1000 + s * 100 + c * 10 + iw + pad);
              const std::vector<float> w = random_floats(static_cast<size_t>(c * k * k), seed);
              const std::vector<float> bias = random_floats(static_cast<size_t>(c), seed + 1);
              std::vector<std::vector<float>> in(static_cast<size_t>(k));
              std::vector<const float*> rows(static_cast<size_t>(k));
              for (int64_t i = 0; i < k; ++i) {
                in[i] = random_floats(static_cast<size_t>(iw * c), seed + 2 + static_cast<uint32_t>(i));
                rows[i] = i == 1 ? nullptr : in[i].data();  // a padding row
              }
              std::vector<float> packed(static_cast<size_t>(dw::packed_size(c, k)));
              dw::pack_weights(w.data(), c, k, packed.data());
              dw::Row g;
              g.channels = c, g.in_width = iw, g.out_width = ow, g.k = k, g.stride = s, g.pad_left = pad;
              g.lo = -0.5f, g.hi = 0.75f;
              g.hardswish = hs;  // then v * clamp(v / 6 + 1/2, 0, 1), before the clamp
              std::vector<float> out(static_cast<size_t>(ow * c + 7), 99.0f);  // past the row: untouched
              dw::row(g, rows.data(), packed.data(), bias.data(), out.data());
              for (int64_t x = 0; x < ow; ++x)
                for (int64_t ch = 0; ch < c; ++ch) {
                  double sum = bias[ch];
                  for (int64_t i = 0; i < k; ++i)
                    for (int64_t j = 0; j < k; ++j) {
                      const int64_t ix = x * s - pad + j;
                      if (rows[i] && ix >= 0 && ix < iw) sum += static_cast<double>(in[i][ix * c + ch]) * w[(ch * k + i) * k + j];
                    }
                  if (hs) sum *= std::min(std::max(sum / 6.0 + 0.5, 0.0), 1.0);
                  const double want = std::min(std::max(sum, -0.5), 0.75);
                  ASSERT_NEAR(out[x * c + ch], want, 1e-5) << "at " << x << ", " << ch;
                }
              for (size_t i = static_cast<size_t>(ow * c); i < out.size(); ++i) ASSERT_EQ(out[i], 99.0f);
            }
}

TEST(DepthwiseF32, NaNStaysThroughTheClamp) {
  if (!dw::available()) GTEST_SKIP() << "no AVX2";
  const int64_t c = 16, k = 3;
  std::vector<float> w(static_cast<size_t>(c * k * k), 1.0f), packed(static_cast<size_t>(dw::packed_size(c, k)));
  dw::pack_weights(w.data(), c, k, packed.data());
  std::vector<float> row(static_cast<size_t>(3 * c), 1.0f);
  row[static_cast<size_t>(c)] = std::numeric_limits<float>::quiet_NaN();  // pixel 1, channel 0
  const float* rows[3] = {row.data(), row.data(), row.data()};
  dw::Row g;
  g.channels = c, g.in_width = 3, g.out_width = 1, g.k = k, g.stride = 1, g.pad_left = 0, g.lo = 0.0f, g.hi = 6.0f;
  std::vector<float> out(static_cast<size_t>(c));
  dw::row(g, rows, packed.data(), nullptr, out.data());
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], 6.0f);  // nine ones, clamped
}

TEST(GemmF32Clamps, ChainsOfClampsAndApplyEpilogueMatchTheirDefinition) {
  namespace gemm = kiln::cpu::gemm_f32;
  if (!gemm::available()) GTEST_SKIP() << "no AVX2";
  using A = dnnl::algorithm;
  // Clip(-1, 2), Relu, Clip(0.5, 6): one clamp to [0.5, 2] in the blocks' registers
  const int64_t M = 9, K = 3, N = 40;
  const std::vector<float> a = random_floats(static_cast<size_t>(M * K), 1, -3.0f, 3.0f);
  const std::vector<float> b = random_floats(static_cast<size_t>(K * N), 2), bias = random_floats(static_cast<size_t>(N), 3);
  std::vector<float> packed(static_cast<size_t>(gemm::packed_size(K, N)));
  gemm::pack_b(b.data(), K, N, N, 1, 1.0f, packed.data());
  gemm::Epilogue ep;
  ep.bias = bias.data();
  for (auto [alg, lo, hi] : {std::tuple{A::eltwise_clip, -1.0f, 2.0f}, std::tuple{A::eltwise_relu, 0.0f, 0.0f},
                             std::tuple{A::eltwise_clip_v2, 0.5f, 6.0f}}) {
    gemm::EpilogueOp op;
    op.alg = alg, op.alpha = lo, op.beta = hi;
    ep.ops.push_back(op);
  }
  std::vector<float> c(static_cast<size_t>(M * N)), raw(c.size());
  gemm::run(a.data(), M, K, K, packed.data(), N, c.data(), N, ep);
  gemm::run(a.data(), M, K, K, packed.data(), N, raw.data(), N, {});
  std::vector<float> applied = raw;
  gemm::apply_epilogue(applied.data(), M, N, N, ep);  // the same epilogue on computed values
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      const double want = std::min(std::max(static_cast<double>(raw[i * N + j]) + bias[j], 0.5), 2.0);
      ASSERT_NEAR(c[i * N + j], want, 1e-5) << i << ", " << j;
      ASSERT_NEAR(applied[i * N + j], want, 1e-5) << i << ", " << j;
    }
}

TEST(CpuFuseDepthwiseBlock, AnInvertedResidualIsOneNodeMatchingTheReference) {
  if (!dw::available()) GTEST_SKIP() << "no AVX2: see ...RefusedBelowAvx2";
  std::vector<std::pair<std::string, Block>> cases;
  cases.push_back({"residual", Block{}});
  Block s2;
  s2.stride = 2, s2.residual = false, s2.cout = 24, s2.h = 11, s2.w = 9;
  cases.push_back({"stride 2, odd sizes", s2});
  Block first;  // MobileNet-v2's first block: no expansion
  first.expand = false, first.residual = false, first.ce = 32;
  cases.push_back({"no expansion", first});
  Block alone;
  alone.project = false, alone.residual = false, alone.clip = false;
  cases.push_back({"no projection, Relu", alone});
  Block k5;
  k5.k = 5, k5.ce = 40, k5.cout = 24, k5.residual = false, k5.stride = 2;
  cases.push_back({"5x5 stride 2, channel tails", k5});
  Block batch;
  batch.n = 3, batch.ce = 24, batch.h = 7, batch.w = 7;
  cases.push_back({"batch of 3 on 2 threads: the third image by channels", batch});
  Block big;  // a batch of one too big to keep whole: the image's rows split between the threads
  big.h = 96, big.w = 96, big.ce = 48, big.stride = 2, big.residual = false;  // E 1.8 MB
  cases.push_back({"batch of 1, row bands", big});
  Block wide;  // rows over several GEMMs and a ring that wraps
  wide.h = 40, wide.w = 6, wide.ce = 96, wide.n = 2;
  cases.push_back({"narrow rows: ring wraps", wide});
  Block stem;  // MobileNet-v2's stem and first block: 3x3 stride 2 over the image's 3 channels
  stem.cin = 3, stem.ce = 32, stem.ek = 3, stem.estride = 2, stem.residual = false, stem.from_input = true;
  stem.n = 2, stem.h = 21, stem.w = 18;
  cases.push_back({"stem: 3x3 stride 2 window expansion from the input", stem});
  Block stem_bands = stem;  // one image: its rows split between the threads, each expanding its halo
  stem_bands.n = 1, stem_bands.h = 70, stem_bands.w = 30, stem_bands.stride = 2, stem_bands.from_input = false;
  cases.push_back({"stem of one image, row bands", stem_bands});
  Block stem_odd = stem;  // a batch the threads do not divide; the ring wraps
  stem_odd.n = 3, stem_odd.h = 60, stem_odd.w = 10, stem_odd.ce = 40;
  cases.push_back({"stem, batch of 3", stem_odd});
  Block window_residual;  // a window expansion at stride 1: the residual adds up
  window_residual.cin = 4, window_residual.ce = 24, window_residual.cout = 4, window_residual.ek = 3;
  window_residual.h = 9, window_residual.w = 11, window_residual.n = 2;
  cases.push_back({"3x3 stride 1 window expansion with the residual", window_residual});
  // dilated (DeepLab's backbone: 5x5 at dilation 2): each phase of the columns mod the
  // dilation an undilated row, the window's rows dil apart in the ring
  Block dil5;
  dil5.k = 5, dil5.dil = 2, dil5.h = 13, dil5.w = 11, dil5.ce = 40;
  cases.push_back({"5x5 dilation 2 with the residual", dil5});
  Block dil_batch;
  dil_batch.dil = 3, dil_batch.n = 3, dil_batch.h = 7, dil_batch.w = 8, dil_batch.ce = 24;
  cases.push_back({"3x3 dilation 3, batch of 3: the third image by channels", dil_batch});
  Block dil_narrow;
  dil_narrow.dil = 4, dil_narrow.h = 6, dil_narrow.w = 3, dil_narrow.residual = false, dil_narrow.cout = 8;
  cases.push_back({"3x3 dilation 4 over a map narrower than it", dil_narrow});
  Block dil_bands;
  dil_bands.k = 5, dil_bands.dil = 2, dil_bands.h = 60, dil_bands.w = 20, dil_bands.ce = 32, dil_bands.residual = false;
  cases.push_back({"5x5 dilation 2, one image in row bands: the ring holds the dilated window", dil_bands});
  // MobileNet-v3-small's 5x5 blocks: HardSwish after the expansion and after the depthwise
  // convolution (the kernel applies the latter as it stores), at a map whose one image the
  // threads split by channels, and at a batch of two
  Block v3;
  v3.k = 5, v3.h = 13, v3.w = 13, v3.cin = 24, v3.ce = 144, v3.hardswish = true, v3.project = false, v3.residual = false;
  cases.push_back({"5x5 HardSwish blocks, one image", v3});
  Block v3_batch = v3;
  v3_batch.n = 2, v3_batch.h = 7, v3_batch.w = 9, v3_batch.stride = 2, v3_batch.project = true, v3_batch.cout = 24;
  cases.push_back({"5x5 HardSwish blocks, stride 2, batch of 2, projected", v3_batch});
  // one image by channels, the threads' shares whole GEMM panels of 64 columns, the second
  // share's last panel narrower: 96 channels 64 / 32, 200 channels 128 / 72 (a vector's 8 last).
  // (Shares of 16-column vectors, the panels split between the threads, ran no faster: the
  // narrow products at the split cost what the balance saved, EfficientNet-B0 and
  // MobileNet-v3-small on Zen 4.)
  for (const int64_t ce : {96, 200}) {
    Block split;
    split.k = 5, split.h = 9, split.w = 11, split.cin = 24, split.ce = ce, split.cout = 24;
    cases.push_back({"one image by channels, " + std::to_string(ce) + " of them", split});
  }
  Block dil_alone;
  dil_alone.dil = 2, dil_alone.expand = false, dil_alone.project = false, dil_alone.residual = false, dil_alone.ce = 19;
  cases.push_back({"dilation 2 alone, channel tails", dil_alone});
  for (const auto& [what, b] : cases) {
    SCOPED_TRACE(what);
    transforms::PassLog log;
    auto cg = compare_with_reference(block_graph(b), {random_tensor({b.n, b.expand ? b.cin : b.ce, b.h, b.w}, 7, 2.0f)},
                                     agnostic(&log));
    EXPECT_EQ(count_type(*cg, "DepthwiseBlock"), 1u) << explain(log) << cg->describe();
    EXPECT_EQ(count_type(*cg, "Convolution"), 0u) << cg->describe();
    EXPECT_EQ(log.count_applied("FuseDepthwiseBlock"), 1u) << explain(log);
    const cpu::Node* node = find(*cg, b.expand ? "expand" : "dw");
    ASSERT_NE(node, nullptr) << cg->describe();
    EXPECT_EQ(node->impl.rfind("kiln_dwblock", 0), 0u) << node->impl;
    std::vector<std::string> fused;  // the layers the node runs, in order
    if (b.expand) fused = {"act1", "dw"};
    fused.push_back("act2");
    if (b.project) fused.push_back("project");
    if (b.residual) fused.push_back("add");
    EXPECT_EQ(node->fused, fused);
    if (b.ek > 1) {
      EXPECT_TRUE(log_has(log, true, "3x3 window expansion (im2col)")) << explain(log);
    }
  }
}

// A window over more channels than kiln's im2col GEMM takes (8 x 3 x 3 = 72 columns) stays a
// Convolution; the block forms without it.
TEST(CpuFuseDepthwiseBlock, AWindowOverManyChannelsIsNotItsExpansion) {
  if (!dw::available()) GTEST_SKIP() << "no AVX2: see ...RefusedBelowAvx2";
  Block b;
  b.cin = 8, b.ek = 3, b.estride = 2, b.residual = false, b.h = 12, b.w = 10;
  transforms::PassLog log;
  auto cg = compare_with_reference(block_graph(b), {random_tensor({b.n, b.cin, b.h, b.w}, 7, 2.0f)}, agnostic(&log));
  EXPECT_EQ(count_type(*cg, "DepthwiseBlock"), 1u) << explain(log) << cg->describe();
  EXPECT_EQ(count_type(*cg, "Convolution"), 1u) << cg->describe();
  EXPECT_TRUE(log_has(log, true, "dw -> project: depthwise 3x3, 1x1 projection")) << explain(log);
}

TEST(CpuFuseDepthwiseBlock, TakesTheExpansionOneDnnsDepthwisePostOpWouldFuse) {
  // MobileNet-v2's first strided block (1x1 16 -> 96 at 112x112, Clip, 3x3 depthwise stride 2,
  // Clip), without its projection: oneDNN 2.6 has a fused JIT kernel for the pair on AVX2
  // (FuseConvolutionAndDWConvolution), a primitive made per shape. Where shapes vary the block
  // takes both, on every ISA that runs it, and the other pass says so
  if (!dw::available()) GTEST_SKIP() << "no AVX2: see ...RefusedBelowAvx2";
  Block b;
  b.ce = 96, b.h = b.w = 112, b.stride = 2, b.project = false, b.residual = false;
  transforms::PassLog log;
  auto cg = compare_with_reference(block_graph(b), {random_tensor({1, 16, 112, 112}, 7)}, agnostic(&log));
  EXPECT_EQ(count_type(*cg, "DepthwiseBlock"), 1u) << explain(log) << cg->describe();
  EXPECT_EQ(count_type(*cg, "Convolution"), 0u) << cg->describe();
  EXPECT_EQ(log.count_applied("FuseConvolutionAndDWConvolution"), 0u) << explain(log);
  EXPECT_TRUE(log_has(log, false, "expand -> dw: depthwise convolution not fused: FuseDepthwiseBlock takes both"))
      << explain(log);
}

TEST(CpuFuseDepthwiseBlock, OnlyWhereShapesVaryAndNotForWhatItsKernelsLack) {
  if (!dw::available()) GTEST_SKIP() << "no AVX2: see ...RefusedBelowAvx2";
  Block b;
  {  // fixed shapes: oneDNN's primitives, made once, keep the block
    transforms::PassLog log;
    auto cg = compare_with_reference(block_graph(b), {random_tensor({1, 16, 10, 12}, 7)}, fusing(&log));
    EXPECT_EQ(count_type(*cg, "DepthwiseBlock"), 0u);
    EXPECT_EQ(count_type(*cg, "Convolution"), 3u);
  }
  {  // dilated and strided, or dilated with padding not a multiple of the dilation: no phases
    for (auto [stride, pad, why] : {std::tuple{int64_t(2), int64_t(2), "dw is dilated and strided"},
                                    std::tuple{int64_t(1), int64_t(1), "dw's padding is not a multiple of its dilation"}}) {
      Block r = b;
      r.residual = false;  // (the output's shape changes)
      auto g = block_graph(r);
      for (ir::Node* n : g->nodes())
        if (n->name() == "dw") {
          n->attrs["dilations"] = std::vector<int64_t>{2, 2};
          n->attrs["pads"] = std::vector<int64_t>{pad, pad, pad, pad};
          n->attrs["strides"] = std::vector<int64_t>{stride, stride};
        }
      transforms::PassLog log;
      auto cg = compare_with_reference(g, {random_tensor({1, 16, 10, 12}, 7)}, agnostic(&log));
      EXPECT_EQ(count_type(*cg, "DepthwiseBlock"), 0u);
      EXPECT_TRUE(log_has(log, false, cat("expand -> project: not one DepthwiseBlock: ", why))) << explain(log);
    }
  }
  {  // a 7x7 window
    Block k7 = b;
    k7.k = 7;
    transforms::PassLog log;
    auto cg = compare_with_reference(block_graph(k7), {random_tensor({1, 16, 10, 12}, 7)}, agnostic(&log));
    EXPECT_EQ(count_type(*cg, "DepthwiseBlock"), 0u);
    EXPECT_TRUE(log_has(log, false, "takes 3x3 or 5x5 windows")) << explain(log);
  }
}

TEST(CpuFuseDepthwiseBlock, RefusedBelowAvx2WithTheReason) {
  if (dw::available()) GTEST_SKIP() << "the ISA in use has AVX2: see AnInvertedResidualIsOneNode...";
  transforms::PassLog log;
  auto cg = compare_with_reference(block_graph(Block{}), {random_tensor({1, 16, 10, 12}, 7)}, agnostic(&log));
  EXPECT_EQ(count_type(*cg, "DepthwiseBlock"), 0u);
  EXPECT_TRUE(log_has(log, false, "kiln's GEMM and depthwise kernels need AVX2")) << explain(log);
}

}  // namespace test_cpu_depthwise_block
