// The integer node kinds against the reference kernels, exactly: ConvInteger (u8 / s8
// activations and weights, scalar and per-channel weight zero points, run-time and constant
// activation zero points, groups, strides, dilations, padding, 1D / 2D / 3D, products at the
// 8-bit extremes that a saturating kernel would get wrong) and DynamicQuantizeLinear (range,
// rounding ties, all zeros, NaN, a blocked input layout), and the two chained as ORT's
// dynamic quantizer writes them.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cpu/depthwise_s8.hpp"
#include "cpu/gemm_s16.hpp"
#include "cpu/isa.hpp"
#include "cpu/nodes/int8_util.hpp"
#include "cpu/weights_cache.hpp"
#include "cpu_test_util.hpp"

namespace test_cpu_int8 {

using namespace kiln;
using namespace kiln::test;

namespace {

template <typename T>
Tensor random_int(Shape s, uint32_t seed, int lo, int hi) {
  return random_ints(std::is_same_v<T, uint8_t> ? DType::u8 : DType::i8, std::move(s), seed, lo, hi);
}

template <typename T>
Tensor filled(Shape s, int v) {
  Tensor t(std::is_same_v<T, uint8_t> ? DType::u8 : DType::i8, std::move(s));
  for (int64_t i = 0; i < t.size(); ++i) t.data<T>()[i] = static_cast<T>(v);
  return t;
}

struct ConvCase {
  static constexpr int kRunTime = -1000, kNone = -1001;  // zx: else a constant
  ConvCase(Shape x_, Tensor w_, Tensor zw_ = Tensor(), bool x_signed_ = false, int zx_ = kRunTime)
      : x(std::move(x_)), w(std::move(w_)), zw(std::move(zw_)), x_signed(x_signed_), zx(zx_) {}
  Shape x;       // [N, C, spatial...]
  Tensor w;      // [M, C/group, kernel...]
  Tensor zw;     // undefined: no weight zero point
  bool x_signed = false;
  int zx = kRunTime;
  std::map<std::string, ir::Attribute> attrs;
};

// x (graph input) [, x_zp] -> ConvInteger -> y (i32), on the reference and a cpu::Graph.
// `jit`: oneDNN has an optimised kernel for the case on the ISA in use. Returns the node's
// implementation.
std::string check_conv_integer(const ConvCase& c, const Tensor& x, uint8_t zx_runtime = 0, bool jit = true) {
  auto g = make_graph(13);
  ir::Value* xv = g->add_input("x", {c.x_signed ? DType::i8 : DType::u8, ir::PartialShape(c.x)});
  std::vector<ir::Value*> in = {xv, g->add_constant("w", c.w)};
  std::vector<Tensor> feeds = {x};
  if (c.zx == ConvCase::kRunTime) {
    in.push_back(g->add_input("x_zp", {xv->type.dtype, ir::PartialShape(Shape{})}));
    Tensor z(xv->type.dtype, Shape{});
    *static_cast<uint8_t*>(z.raw()) = zx_runtime;
    feeds.push_back(z);
  } else if (c.zx != ConvCase::kNone) {
    in.push_back(g->add_constant("x_zp", c.x_signed ? filled<int8_t>({}, c.zx) : filled<uint8_t>({}, c.zx)));
  } else if (c.zw.defined()) {
    in.push_back(nullptr);
  }
  if (c.zw.defined()) in.push_back(g->add_constant("w_zp", c.zw));
  ir::Node* conv = g->add_node("ConvInteger", in, {"y"}, "conv_integer");
  conv->attrs = c.attrs;
  g->add_output(conv->output(0));
  auto cg = compare_with_reference(g, feeds, 0.0, 0.0);
  EXPECT_EQ(count_type(*cg, "ConvInteger"), 1u);
  EXPECT_EQ(count_type(*cg, "Reference"), 0u);
  if (jit) expect_jit(*cg, "ConvInteger");
  for (const auto& n : cg->nodes())
    if (n->type() == std::string("ConvInteger")) return n->impl;
  return "";
}

std::map<std::string, ir::Attribute> window(std::vector<int64_t> pads, std::vector<int64_t> strides = {},
                                            std::vector<int64_t> dil = {}, int64_t group = 1) {
  std::map<std::string, ir::Attribute> a;
  a["pads"] = ir::Attribute(pads);
  if (!strides.empty()) a["strides"] = ir::Attribute(strides);
  if (!dil.empty()) a["dilations"] = ir::Attribute(dil);
  if (group > 1) a["group"] = ir::Attribute(group);
  return a;
}

}  // namespace

TEST(CpuInt8, ConvIntegerU8WeightsScalarZeroPointRunTimeActivationZeroPoint) {
  ConvCase c{{2, 5, 9, 11}, random_int<uint8_t>({7, 5, 3, 3}, 1, 0, 255), filled<uint8_t>({}, 143)};
  c.attrs = window({1, 1, 1, 1});
  check_conv_integer(c, random_int<uint8_t>(c.x, 2, 0, 255), 127);
  check_conv_integer(c, random_int<uint8_t>(c.x, 3, 0, 255), 0);
}

// Without VNNI (AVX2), a 2-D ConvInteger without groups runs on kiln's exact 16-bit GEMM: the
// weights less their zero points packed, x less its run-time zero point widened (a 1x1
// stride-1 window straight from the rows, the others through im2col), every case exact.
TEST(CpuInt8, ConvIntegerWithoutVnniRunsOnTheSixteenBitGemm) {
  const bool s16 = !cpu::exact_int8_kernels() && cpu::gemm_s16::available();
  auto expect_impl = [&](const std::string& impl, const char* how) {
    if (s16) EXPECT_EQ(impl, cat("kiln_gemm:avx2_s16 (", how, ")"));
    else EXPECT_EQ(impl.rfind("kiln_gemm", 0), std::string::npos) << impl;  // oneDNN's convolution
  };
  Tensor zw(DType::i8, Shape{19});  // per channel, both signs; 19 columns: a partial panel
  for (int i = 0; i < 19; ++i) zw.data<int8_t>()[i] = static_cast<int8_t>(i * 13 - 120);
  // s8 x s8, padded, strided, dilated, two images, run-time zero point
  ConvCase a{{2, 5, 11, 9}, random_int<int8_t>({19, 5, 3, 3}, 20, -128, 127), zw, /*x_signed=*/true};
  a.attrs = window({1, 2, 0, 1}, {2, 1}, {1, 2});
  expect_impl(check_conv_integer(a, random_int<int8_t>(a.x, 21, -128, 127), static_cast<uint8_t>(-100)), "im2col");
  // u8 x u8 at the extremes (255 - 0) x (255 - 0) in every product, an odd K (3 x 1 x 1 channels)
  ConvCase b{{1, 3, 6, 7}, filled<uint8_t>({4, 3, 1, 1}, 255), filled<uint8_t>({}, 0)};
  b.attrs = window({0, 0, 0, 0});
  expect_impl(check_conv_integer(b, filled<uint8_t>(b.x, 255), 0), "1x1");
  // u8 x s8 1x1, scalar weight zero point, constant activation zero point
  ConvCase c{{1, 16, 5, 5}, random_int<int8_t>({24, 16, 1, 1}, 22, -128, 127), filled<int8_t>({}, -5), false, 77};
  c.attrs = window({0, 0, 0, 0});
  expect_impl(check_conv_integer(c, random_int<uint8_t>(c.x, 23, 0, 255)), "1x1");
  // a 1x1 window with a stride is not the rows themselves
  c.attrs = window({0, 0, 0, 0}, {2, 2});
  expect_impl(check_conv_integer(c, random_int<uint8_t>(c.x, 24, 0, 255)), "im2col");
}

// Without VNNI (AVX2), a 2-D depthwise ConvInteger (one channel per group) runs on kiln's exact
// depthwise kernel: the weights less their zero points as floats, x less its run-time zero point
// converted per row; sums below 2^24 stay exact in f32. Every case exact against the reference.
TEST(CpuInt8, ConvIntegerDepthwiseWithoutVnniRunsOnKilnsDepthwiseKernel) {
  const bool kiln_dw = !cpu::exact_int8_kernels() && cpu::depthwise_s8::available();
  auto expect_impl = [&](const std::string& impl) {
    if (kiln_dw) EXPECT_EQ(impl, "kiln_depthwise:avx2_s8");
    else EXPECT_NE(impl, "kiln_depthwise:avx2_s8");
  };
  // u8 x u8, per-channel weight zero points, 19 channels (two blocks of 8 and a tail of 3),
  // padded, strided, dilated, two images, run-time activation zero point
  Tensor zw(DType::u8, Shape{19});
  for (int i = 0; i < 19; ++i) zw.data<uint8_t>()[i] = static_cast<uint8_t>(i * 13);
  ConvCase a{{2, 19, 12, 11}, random_int<uint8_t>({19, 1, 3, 3}, 30, 0, 255), zw};
  a.attrs = window({1, 2, 0, 1}, {2, 1}, {1, 2}, 19);
  expect_impl(check_conv_integer(a, random_int<uint8_t>(a.x, 31, 0, 255), 200));
  // s8 x s8 5x5 at the extremes: (-128 - 127) x (-128 - 127) in every product
  ConvCase b{{1, 16, 9, 9}, filled<int8_t>({16, 1, 5, 5}, -128), filled<int8_t>({}, 127), /*x_signed=*/true};
  b.attrs = window({2, 2, 2, 2}, {}, {}, 16);
  expect_impl(check_conv_integer(b, filled<int8_t>(b.x, -128), 127));
  // u8 x s8 without zero points, 8 channels, a 1-pixel-wide output row (one pixel at a time)
  ConvCase c{{1, 8, 5, 3}, random_int<int8_t>({8, 1, 3, 3}, 32, -128, 127), Tensor(), false, ConvCase::kNone};
  c.attrs = window({1, 0, 1, 0}, {1, 2}, {}, 8);
  expect_impl(check_conv_integer(c, random_int<uint8_t>(c.x, 33, 0, 255)));
}

TEST(CpuInt8, ConvIntegerGroupedStridedDilatedS8PerChannelZeroPoints) {
  Tensor zw(DType::i8, Shape{4});
  for (int i = 0; i < 4; ++i) zw.data<int8_t>()[i] = static_cast<int8_t>(i * 37 - 60);
  ConvCase c{{1, 6, 13, 10}, random_int<int8_t>({4, 3, 3, 2}, 4, -128, 127), zw, /*x_signed=*/true, /*zx=*/-7};
  c.attrs = window({0, 1, 2, 1}, {2, 1}, {2, 2}, 2);
  // below AVX-512 oneDNN 2.6 runs this grouped, dilated int8 convolution on its reference kernel
  check_conv_integer(c, random_int<int8_t>(c.x, 5, -128, 127), 0, cpu::isa_at_least(cpu::Isa::avx512_core));
}

TEST(CpuInt8, ConvIntegerDepthwiseAndNoZeroPoints) {
  ConvCase dw{{1, 8, 7, 7}, random_int<uint8_t>({8, 1, 3, 3}, 6, 0, 255), filled<uint8_t>({}, 90), false, 12};
  dw.attrs = window({1, 1, 1, 1}, {}, {}, 8);
  check_conv_integer(dw, random_int<uint8_t>(dw.x, 7, 0, 255));
  ConvCase none{{1, 3, 6, 6}, random_int<uint8_t>({2, 3, 2, 2}, 8, 0, 255), Tensor(), false, ConvCase::kNone};
  none.attrs = window({0, 0, 0, 0});
  check_conv_integer(none, random_int<uint8_t>(none.x, 9, 0, 255));
}

TEST(CpuInt8, ConvInteger1DAnd3D) {
  ConvCase d1{{2, 4, 17}, random_int<uint8_t>({3, 4, 5}, 10, 0, 255), filled<uint8_t>({}, 3)};
  d1.attrs = window({2, 2}, {3});
  check_conv_integer(d1, random_int<uint8_t>(d1.x, 11, 0, 255), 200);
  ConvCase d3{{1, 3, 5, 6, 4}, random_int<int8_t>({4, 3, 2, 3, 2}, 12, -128, 127), filled<int8_t>({}, -3), false, 5};
  d3.attrs = window({1, 0, 1, 0, 1, 1});
  check_conv_integer(d3, random_int<uint8_t>(d3.x, 13, 0, 255));
}

// Every product at the extremes: pairs of 255 * -128 and 255 * 127 overflow the 16-bit
// pairwise sums of kernels without VNNI unless the weights are split.
TEST(CpuInt8, ConvIntegerExtremeProductsAreExactOnEveryIsa) {
  for (int wv : {0, 255}) {
    ConvCase c{{1, 16, 6, 6}, filled<uint8_t>({16, 16, 3, 3}, wv), filled<uint8_t>({}, wv == 0 ? 128 : 0), false, 0};
    c.attrs = window({1, 1, 1, 1});
    check_conv_integer(c, filled<uint8_t>(c.x, 255));
  }
  ConvCase s{{1, 16, 5, 5}, filled<int8_t>({16, 16, 3, 3}, -128), Tensor(), true, -128};
  s.attrs = window({0, 0, 0, 0});
  check_conv_integer(s, filled<int8_t>(s.x, 127));
}

TEST(CpuInt8, DynamicQuantizeMatchesTheReferenceExactly) {
  auto g = make_graph(13);
  ir::Value* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{3, 1000})});
  ir::Node* q = g->add_node("DynamicQuantizeLinear", {x}, {"y", "scale", "zp"}, "dql");
  for (ir::Value* o : q->outputs()) g->add_output(o);
  Tensor in = random_tensor({3, 1000}, 21, -3.0f, 7.0f);
  float* p = in.data<float>();
  p[5] = -3.0f;  // the ends of the range, and ties half way between two steps
  p[6] = 7.0f;
  const float scale = 10.0f / 255.0f;
  for (int i = 7; i < 40; ++i) p[i] = (static_cast<float>(i) - 20.5f) * scale;
  auto cg = compare_with_reference(g, {in}, 0.0, 0.0);
  EXPECT_EQ(count_type(*cg, "DynamicQuantize"), 1u);
  // all zeros (scale 0), and a NaN (skipped by the range, quantized to 0)
  compare_with_reference(g, {Tensor(DType::f32, Shape{3, 1000})}, 0.0, 0.0);
  in.data<float>()[17] = std::numeric_limits<float>::quiet_NaN();
  compare_with_reference(g, {in}, 0.0, 0.0);
}

// f32 Conv with 17 output channels (a blocked layout that pads them) -> DynamicQuantizeLinear
// -> ConvInteger -> Cast -> Mul by the scales: the chain ORT's dynamic quantizer writes.
// (Cast from int32 runs as a oneDNN reorder.)
TEST(CpuInt8, DynamicQuantizeThenConvIntegerChain) {
  auto g = make_graph(13);
  ir::Value* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 3, 12, 12})});
  ir::Value* c = conv3x3(*g, x, 3, 17, 31, "conv", 0.5f);
  ir::Node* q = g->add_node("DynamicQuantizeLinear", {c}, {"q", "q_scale", "q_zp"}, "dql");
  ir::Node* ci = g->add_node("ConvInteger", {q->output(0), g->add_constant("w", random_int<uint8_t>({8, 17, 3, 3}, 32, 0, 255)),
                                             q->output(2), g->add_constant("w_zp", filled<uint8_t>({}, 119))},
                             {"acc"}, "conv_integer");
  ci->attrs = window({1, 1, 1, 1});
  ir::Node* cast = g->add_node("Cast", {ci->output(0)}, {"acc_f"}, "cast");
  cast->attrs["to"] = ir::Attribute(int64_t{1});
  ir::Node* sc = g->add_node("Mul", {q->output(1), g->add_constant("w_scale", Tensor::scalar<float>(0.0123f))},
                             {"s"}, "scales");
  ir::Node* y = g->add_node("Mul", {cast->output(0), sc->output(0)}, {"y"}, "dequant");
  g->add_output(y->output(0));
  g->add_output(q->output(0));
  auto cg = compare_with_reference(g, {random_tensor({1, 3, 12, 12}, 33, -1.0f, 1.0f)}, 1e-6, 0.0);
  EXPECT_EQ(count_type(*cg, "ConvInteger"), 1u);
  EXPECT_EQ(count_type(*cg, "DynamicQuantize"), 1u);
  EXPECT_EQ(count_type(*cg, "Cast"), 1u) << "int32 -> float on oneDNN's reorder";
}

namespace {

// A [rows..., K] (graph input) [, a_zp] x constant B [K, N] [, b_zp] -> MatMulInteger -> i32.
// Returns the node's implementation.
std::string check_matmul_integer(const Shape& a_shape, bool a_signed, int za, const Tensor& b, const Tensor& zb,
                                 const Tensor& a) {
  auto g = make_graph(13);
  ir::Value* av = g->add_input("a", {a_signed ? DType::i8 : DType::u8, ir::PartialShape(a_shape)});
  std::vector<ir::Value*> in = {av, g->add_constant("b", b)};
  std::vector<Tensor> feeds = {a};
  if (za == ConvCase::kRunTime) {
    in.push_back(g->add_input("a_zp", {av->type.dtype, ir::PartialShape(Shape{})}));
    Tensor z(av->type.dtype, Shape{});
    *static_cast<uint8_t*>(z.raw()) = a_signed ? static_cast<uint8_t>(-3) : uint8_t{131};
    feeds.push_back(z);
  } else if (za != ConvCase::kNone) {
    in.push_back(g->add_constant("a_zp", a_signed ? filled<int8_t>({}, za) : filled<uint8_t>({}, za)));
  } else if (zb.defined()) {
    in.push_back(nullptr);
  }
  if (zb.defined()) in.push_back(g->add_constant("b_zp", zb));
  ir::Node* mm = g->add_node("MatMulInteger", in, {"y"}, "matmul_integer");
  g->add_output(mm->output(0));
  auto cg = compare_with_reference(g, feeds, 0.0, 0.0);
  EXPECT_EQ(count_type(*cg, "MatMulInteger"), 1u);
  EXPECT_EQ(count_type(*cg, "Reference"), 0u);
  for (const auto& n : cg->nodes())
    if (n->type() == std::string("MatMulInteger")) return n->impl;
  return "";
}

}  // namespace

TEST(CpuInt8, MatMulIntegerU8AndS8WithEveryZeroPointForm) {
  // u8 A with a run-time zero point, u8 B with a scalar zero point (ORT's dynamic quantizer)
  check_matmul_integer({2, 7, 33}, false, ConvCase::kRunTime, random_int<uint8_t>({33, 19}, 41, 0, 255),
                       filled<uint8_t>({}, 121), random_int<uint8_t>({2, 7, 33}, 42, 0, 255));
  // s8 A with a constant zero point, s8 B with one per column
  Tensor zb(DType::i8, Shape{5});
  for (int i = 0; i < 5; ++i) zb.data<int8_t>()[i] = static_cast<int8_t>(i * 29 - 70);
  check_matmul_integer({9, 16}, true, -11, random_int<int8_t>({16, 5}, 43, -128, 127), zb,
                       random_int<int8_t>({9, 16}, 44, -128, 127));
  // no zero points at all; u8 B (its offset of 128 still applies)
  check_matmul_integer({4, 8}, false, ConvCase::kNone, random_int<uint8_t>({8, 6}, 45, 0, 255), Tensor(),
                       random_int<uint8_t>({4, 8}, 46, 0, 255));
}

// Weights whose values less their zero points lie within [-64, 64] (quantize --reduce-range)
// times u8 activations: without VNNI the u8 x s8 GEMM on vpmaddubsw (no pair of products can
// overflow its 16-bit sums), the run-time activation zero point off through the column sums.
// Exact, as the 16-bit GEMM the other cases take.
TEST(CpuInt8, SevenBitWeightsRunTheU8S8GemmExactly) {
  const bool kiln_gemm = !cpu::exact_int8_kernels() && cpu::gemm_s16::available();
  auto expect_impl = [&](const std::string& impl, const std::string& want) {
    if (kiln_gemm) {
      EXPECT_EQ(impl.rfind(want, 0), 0u) << impl;
    }
  };
  // MatMulInteger: u8 B in [100, 228] less per-column zero points 164 +- 0: [-64, 64]
  Tensor zb(DType::u8, Shape{19});
  for (int i = 0; i < 19; ++i) zb.data<uint8_t>()[i] = 164;
  expect_impl(check_matmul_integer({2, 5, 36}, false, ConvCase::kRunTime, random_int<uint8_t>({36, 19}, 51, 100, 228),
                                   zb, random_int<uint8_t>({2, 5, 36}, 52, 0, 255)),
              "kiln_gemm:avx2_u8s8");
  // s8 B at the bound (64 everywhere) times 255: every 16-bit pair sum 32640
  expect_impl(check_matmul_integer({3, 64}, false, 0, filled<int8_t>({64, 8}, 64), Tensor(), filled<uint8_t>({3, 64}, 255)),
              "kiln_gemm:avx2_u8s8");
  // one pair past it (64 + 65): the 16-bit GEMM
  Tensor b = filled<int8_t>({64, 8}, 64);
  b.data<int8_t>()[8 * 8 + 3] = 65;  // row 8 (a pair with row 9), column 3
  expect_impl(check_matmul_integer({3, 64}, false, 0, b, Tensor(), filled<uint8_t>({3, 64}, 255)), "kiln_gemm:avx2_s16");
  // K not a multiple of 4: A's rows are read in quads, so the 16-bit GEMM
  expect_impl(check_matmul_integer({3, 30}, false, 7, random_int<int8_t>({30, 8}, 53, -64, 64), Tensor(),
                                   random_int<uint8_t>({3, 30}, 54, 0, 255)),
              "kiln_gemm:avx2_s16");
  // ConvInteger: u8 weights less per-channel zero points within [-64, 64], a run-time x_zp in
  // im2col's padding; a 1x1 over 16 channels on the rows themselves
  Tensor zw(DType::u8, Shape{12});
  for (int i = 0; i < 12; ++i) zw.data<uint8_t>()[i] = static_cast<uint8_t>(70 + i);
  ConvCase c{{2, 6, 9, 8}, random_int<uint8_t>({12, 6, 3, 3}, 55, 81, 134), zw};
  c.attrs = window({1, 1, 1, 1}, {2, 1});
  expect_impl(check_conv_integer(c, random_int<uint8_t>(c.x, 56, 0, 255), 200), "kiln_gemm:avx2_u8s8 (im2col)");
  ConvCase p{{1, 16, 5, 6}, random_int<int8_t>({8, 16, 1, 1}, 57, -64, 64), Tensor(), false, 9};
  p.attrs = window({0, 0, 0, 0});
  expect_impl(check_conv_integer(p, random_int<uint8_t>(p.x, 58, 0, 255)), "kiln_gemm:avx2_u8s8 (1x1)");
}

// The u8 x s8 packing and its pair-safety verdict live in the weights cache: a model's later
// plans (other input shapes) ask again and neither derive the weights' values nor check them.
TEST(CpuInt8, U8S8VerdictAndPackingAreDerivedOncePerWeights) {
  cpu::WeightsCache cache;
  cpu::WeightsCache::Scope scope(&cache);
  const Tensor safe = filled<int8_t>({8, 16}, 64), unsafe = filled<int8_t>({8, 16}, 65);
  for (const Tensor* w : {&safe, &unsafe}) {
    int derived = 0;
    auto values = [&](std::vector<int8_t>* b) {
      ++derived;
      b->assign(static_cast<const int8_t*>(w->raw()), static_cast<const int8_t*>(w->raw()) + w->size());
      return true;
    };
    for (int plan = 0; plan < 3; ++plan) {
      const cpu::PackedU8S8 p = cpu::pack_u8s8_if_safe(*w, "test/u8s8", 8, 16, values);
      EXPECT_EQ(static_cast<bool>(p.packed), w == &safe);
      if (p.packed) {
        EXPECT_EQ(p.column_sums[3], 8 * 64);
      }
    }
    EXPECT_EQ(derived, 1) << (w == &safe ? "pair-safe" : "past the bound");
  }
}

TEST(CpuInt8, MatMulIntegerExtremeProductsAreExactOnEveryIsa) {
  check_matmul_integer({3, 64}, false, 0, filled<uint8_t>({64, 8}, 255), filled<uint8_t>({}, 0),
                       filled<uint8_t>({3, 64}, 255));
  check_matmul_integer({3, 64}, false, ConvCase::kNone, filled<int8_t>({64, 8}, -128), Tensor(),
                       filled<uint8_t>({3, 64}, 255));
}

namespace {

// x (graph input, u8 / s8) -> QLinearConv(x_scale, x_zp, w, w_scale (per channel), w_zp, y_scale,
// y_zp [, B]) -> y, compared exactly with the reference kernel.
void check_qlinear_conv(bool x_signed, bool y_signed, bool bias, int64_t group) {
  auto g = make_graph(13);
  const Shape xs = {2, 4, 9, 7};
  const int64_t M = 6, Cg = 4 / group;
  ir::Value* x = g->add_input("x", {x_signed ? DType::i8 : DType::u8, ir::PartialShape(xs)});
  Tensor ws(DType::f32, Shape{M});
  for (int64_t m = 0; m < M; ++m) ws.data<float>()[m] = 0.002f + 0.0007f * static_cast<float>(m);
  std::vector<ir::Value*> in = {
      x,
      g->add_constant("x_scale", Tensor::scalar<float>(0.05f)),
      g->add_constant("x_zp", x_signed ? filled<int8_t>({}, -5) : filled<uint8_t>({}, 131)),
      g->add_constant("w", random_int<uint8_t>({M, Cg, 3, 3}, 51, 0, 255)),
      g->add_constant("w_scale", ws),
      g->add_constant("w_zp", filled<uint8_t>({}, 117)),
      g->add_constant("y_scale", Tensor::scalar<float>(0.07f)),
      g->add_constant("y_zp", y_signed ? filled<int8_t>({}, 3) : filled<uint8_t>({}, 120))};
  if (bias) {
    Tensor b(DType::i32, Shape{M});
    for (int64_t m = 0; m < M; ++m) b.data<int32_t>()[m] = static_cast<int32_t>(m * 997 - 2500);
    in.push_back(g->add_constant("B", b));
  }
  ir::Node* q = g->add_node("QLinearConv", in, {"y"}, "qlinear_conv");
  q->attrs = window({1, 1, 1, 1}, {}, {}, group);
  g->add_output(q->output(0));
  const Tensor xv = x_signed ? random_int<int8_t>(xs, 52, -128, 127) : random_int<uint8_t>(xs, 52, 0, 255);
  auto cg = compare_with_reference(g, {xv}, 0.0, 0.0);
  EXPECT_EQ(count_type(*cg, "QLinearConv"), 1u);
  EXPECT_EQ(count_type(*cg, "Reference"), 0u);
}

}  // namespace

TEST(CpuInt8, QLinearConvRequantizesLikeTheReference) {
  check_qlinear_conv(false, false, true, 1);
  check_qlinear_conv(true, true, false, 2);
  check_qlinear_conv(false, true, true, 2);
}

TEST(CpuInt8, QLinearMatMulRequantizesLikeTheReference) {
  for (bool a_signed : {false, true}) {
    auto g = make_graph(13);
    const Shape as = {3, 5, 40};
    const int64_t N = 12;
    ir::Value* a = g->add_input("a", {a_signed ? DType::i8 : DType::u8, ir::PartialShape(as)});
    Tensor bs(DType::f32, Shape{N});
    for (int64_t n = 0; n < N; ++n) bs.data<float>()[n] = 0.003f + 0.0005f * static_cast<float>(n);
    ir::Node* q = g->add_node(
        "QLinearMatMul",
        {a, g->add_constant("a_scale", Tensor::scalar<float>(0.04f)),
         g->add_constant("a_zp", a_signed ? filled<int8_t>({}, 7) : filled<uint8_t>({}, 128)),
         g->add_constant("b", random_int<int8_t>({40, N}, 61, -128, 127)), g->add_constant("b_scale", bs),
         g->add_constant("b_zp", filled<int8_t>({}, 0)), g->add_constant("y_scale", Tensor::scalar<float>(0.09f)),
         g->add_constant("y_zp", a_signed ? filled<int8_t>({}, -2) : filled<uint8_t>({}, 125))},
        {"y"}, "qlinear_matmul");
    g->add_output(q->output(0));
    const Tensor av = a_signed ? random_int<int8_t>(as, 62, -128, 127) : random_int<uint8_t>(as, 62, 0, 255);
    auto cg = compare_with_reference(g, {av}, 0.0, 0.0);
    EXPECT_EQ(count_type(*cg, "QLinearMatMul"), 1u);
    EXPECT_EQ(count_type(*cg, "Reference"), 0u);
  }
}

}  // namespace test_cpu_int8
