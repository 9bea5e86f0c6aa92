// Static int8 (QDQ models): QdqToQLinear turns the float ops between DequantizeLinear and
// QuantizeLinear into integer ops, FuseQLinearConvAndAdd folds the residual sum into the int8
// convolution, and QuantizeLinear / DequantizeLinear / u8 MaxPool run on their own nodes. On
// an ISA with exact int8 kernels (VNNI, AMX) the QDQ graph must run as integer nodes; on the
// others (AVX2, SSE4.1) its QDQ pairs compute in f32. Either way against the reference
// executor on the QDQ graph: equal but where a float result lies within rounding of a tie
// (at most one quantization step, and almost never).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cpu/executor.hpp"
#include "cpu/isa.hpp"
#include "cpu/nodes/int8_util.hpp"
#include "cpu_test_util.hpp"
#include "qdq_test_util.hpp"
#include "transforms/qdq_to_qlinear.hpp"

namespace test_cpu_int8_static {

using namespace kiln;
using namespace kiln::test;

TEST(CpuInt8Static, QdqBlockRunsAsIntegerNodesWhereTheKernelsAreExact) {
  auto g = qdq_block();
  cpu::GraphOptions options;  // f32
  cpu::Executor ex(g, options);
  const auto& plan = ex.plan_for({Shape{1, 8, 10, 10}});
  ASSERT_TRUE(plan.cpu) << plan.fallback_reason;
  std::map<std::string, size_t> types;
  for (const auto& n : plan.cpu->nodes()) types[n->type()]++;
  if (cpu::int8_network_kernels()) {
    EXPECT_EQ(plan.log.count_applied(transforms::kQdqToQLinear), 5u) << explain(plan.log);  // 3 Conv, Add, MaxPool
    EXPECT_EQ(plan.log.count_applied("FuseQLinearConvAndAdd"), 1u) << explain(plan.log);
    EXPECT_EQ(types["QLinearConv"], 3u);
    EXPECT_EQ(types["QuantizeLinear"], 1u) << "only x is quantized from f32";
    EXPECT_EQ(types["DequantizeLinear"], 1u) << "only y is dequantized";
    EXPECT_EQ(types["Pooling"], 1u) << "MaxPool on u8";
    for (const auto& n : plan.cpu->nodes()) {
      EXPECT_NE(n->kind(), cpu::NodeKind::Reference) << n->name << " (" << n->impl << ")";
      if (n->type() == std::string("QLinearConv")) {
        EXPECT_EQ(n->impl.rfind("ref", 0), std::string::npos) << n->impl;
      }
    }
  } else {
    EXPECT_EQ(plan.log.count_applied(transforms::kQdqToQLinear), 0u);
    EXPECT_TRUE(log_has(plan.log, false, "saturate without VNNI")) << explain(plan.log);
    EXPECT_EQ(types["QLinearConv"], 0u);
  }
  runtime::ReferenceExecutor ref(g);
  for (uint32_t seed : {3u, 4u}) {
    const Tensor x = random_tensor({1, 8, 10, 10}, seed, 2.5f);
    expect_equal_but_ties(ref.run({x})[0], ex.run({x})[0], 0.012);
  }
}

TEST(CpuInt8Static, DisablingThePassKeepsTheFloatPath) {
  auto g = qdq_block();
  cpu::GraphOptions options;
  options.disabled_passes.insert(transforms::kQdqToQLinear);
  cpu::Executor ex(g, options);
  const auto& plan = ex.plan_for({Shape{1, 8, 10, 10}});
  ASSERT_TRUE(plan.cpu);
  for (const auto& n : plan.cpu->nodes()) EXPECT_NE(n->type(), std::string("QLinearConv"));
  const Tensor x = random_tensor({1, 8, 10, 10}, 5, 2.5f);
  expect_equal_but_ties(runtime::ReferenceExecutor(g).run({x})[0], ex.run({x})[0], 0.012);
}

// A Relu / Clip that would change values under the QuantizeLinear's range stays (and the op
// with it): Q's range [-1.2, 1.8] reaches below the Relu's 0.
TEST(CpuInt8Static, ActivationThatChangesValuesBecomesAClampOfTheIntegerResult) {
  auto g = make_graph(13);
  ir::Value* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 4, 6, 6})});
  ir::Value* c = qconv(*g, qdq(*g, x, 0.02f, 128, "x"), 0.02f, 4, 8, 3, 7, "conv");
  g->add_output(qdq(*g, g->add_node("Relu", {c}, 1, "relu")->output(0), 3.0f / 255.0f, 102, "y"));
  cpu::Executor ex(g);
  const auto& plan = ex.plan_for({Shape{1, 4, 6, 6}});
  if (cpu::int8_network_kernels()) {  // the convolution is int8, its Relu a clamp of the integer result
    EXPECT_EQ(plan.log.count_applied(transforms::kQdqToQLinear), 1u) << explain(plan.log);
    EXPECT_EQ(plan.log.count_applied("FuseQLinearConvAndClip"), 1u) << explain(plan.log);
  }
  const Tensor xv = random_tensor({1, 4, 6, 6}, 8, 2.5f);
  expect_equal_but_ties(runtime::ReferenceExecutor(g).run({xv})[0], ex.run({xv})[0], 3.0 / 255.0);
}

// Symmetric activation ranges (TensorRT-style QDQ: s8 with zero point 0, or u8 with 128): a
// Relu's 0 is the zero point, not the end of the range, so it changes values. The Conv still
// becomes a QLinearConv, its Relu a Clip on the 8-bit result, which the int8 convolution takes
// as a clip post-op (also after a fused residual sum). Equal to the reference but at ties.
TEST(CpuInt8Static, ActivationUnderASymmetricRangeClampsTheIntegerResult) {
  for (DType t : {DType::i8, DType::u8}) {
    auto g = make_graph(13);
    const int zp = t == DType::i8 ? 0 : 128;
    auto q8 = [&](ir::Value* x, float scale, const std::string& name) {
      Tensor z(t, Shape{});
      if (t == DType::i8) z.data<int8_t>()[0] = 0;
      else z.data<uint8_t>()[0] = static_cast<uint8_t>(zp);
      ir::Value* s = g->add_constant(name + "_s", Tensor::scalar<float>(scale));
      ir::Value* zv = g->add_constant(name + "_z", std::move(z));
      ir::Node* q = g->add_node("QuantizeLinear", {x, s, zv}, 1, name + "_q");
      return g->add_node("DequantizeLinear", {q->output(0), s, zv}, 1, name + "_dq")->output(0);
    };
    ir::Value* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 8, 7, 7})});
    ir::Value* xq = q8(x, 0.02f, "x");
    ir::Value* a = q8(g->add_node("Relu", {qconv(*g, xq, 0.02f, 8, 8, 3, 11, "conv1")}, 1, "relu1")->output(0), 0.015f, "a");
    ir::Value* c2 = q8(qconv(*g, a, 0.015f, 8, 8, 1, 12, "conv2"), 0.02f, "c2");
    ir::Value* sum = g->add_node("Add", {c2, xq}, 1, "add")->output(0);
    g->add_output(q8(g->add_node("Relu", {sum}, 1, "relu2")->output(0), 0.025f, "y"));
    cpu::Executor ex(g);
    const auto& plan = ex.plan_for({Shape{1, 8, 7, 7}});
    ASSERT_TRUE(plan.cpu);
    if (cpu::int8_network_kernels()) {
      EXPECT_EQ(plan.log.count_applied(transforms::kQdqToQLinear), 3u) << explain(plan.log);  // 2 Conv, Add
      EXPECT_EQ(plan.log.count_applied("FuseQLinearConvAndAdd"), 1u) << explain(plan.log);
      EXPECT_EQ(plan.log.count_applied("FuseQLinearConvAndClip"), 2u) << explain(plan.log);
      EXPECT_EQ(count_type(*plan.cpu, "QLinearConv"), 2u) << plan.cpu->describe();
      EXPECT_EQ(count_type(*plan.cpu, "Reference"), 0u) << plan.cpu->describe();
    }
    runtime::ReferenceExecutor ref(g);
    for (uint32_t seed : {13u, 14u}) {
      const Tensor xv = random_tensor({1, 8, 7, 7}, seed, 2.5f);
      expect_equal_but_ties(ref.run({xv})[0], ex.run({xv})[0], 0.025);
    }
  }
}

namespace {

// x (u8 graph input) -> QLinearConv -> QLinearAdd(other u8 input) : the fused pair against the
// reference's two ops, on every ISA (without exact int8 kernels nothing fuses).
void check_conv_add(bool conv_first) {
  auto g = make_graph(13);
  g->opset_imports["com.microsoft"] = 1;
  ir::Value* x = g->add_input("x", {DType::u8, ir::PartialShape(Shape{1, 16, 7, 7})});
  ir::Value* other = g->add_input("other", {DType::u8, ir::PartialShape(Shape{1, 24, 7, 7})});
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> d(-127, 127);
  Tensor w(DType::i8, Shape{24, 16, 3, 3});
  for (int64_t i = 0; i < w.size(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(d(rng));
  Tensor ws(DType::f32, Shape{24});
  for (int64_t m = 0; m < 24; ++m) ws.data<float>()[m] = 0.001f * static_cast<float>(m + 1);
  Tensor wz(DType::i8, Shape{});
  wz.data<int8_t>()[0] = 0;
  ir::Node* conv = g->add_node("QLinearConv",
                               {x, g->add_constant("xs", Tensor::scalar<float>(0.03f)), g->add_constant("xz", u8_scalar(100)),
                                g->add_constant("w", w), g->add_constant("ws", ws), g->add_constant("wz", wz),
                                g->add_constant("ys", Tensor::scalar<float>(0.2f)), g->add_constant("yz", u8_scalar(90))},
                               1, "conv");
  conv->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  ir::Value* cs = g->add_constant("as", Tensor::scalar<float>(0.2f));
  ir::Value* cz = g->add_constant("az", u8_scalar(90));
  ir::Value* os = g->add_constant("bs", Tensor::scalar<float>(0.05f));
  ir::Value* oz = g->add_constant("bz", u8_scalar(17));
  std::vector<ir::Value*> in = conv_first ? std::vector<ir::Value*>{conv->output(0), cs, cz, other, os, oz}
                                          : std::vector<ir::Value*>{other, os, oz, conv->output(0), cs, cz};
  in.push_back(g->add_constant("ss", Tensor::scalar<float>(0.25f)));
  in.push_back(g->add_constant("sz", u8_scalar(60)));
  ir::Node* add = g->add_node("QLinearAdd", in, 1, "add", "com.microsoft");
  g->add_output(add->output(0));
  ir::infer_shapes(*g);
  cpu::Executor ex(g);
  const auto& plan = ex.plan_for({Shape{1, 16, 7, 7}, Shape{1, 24, 7, 7}});
  ASSERT_TRUE(plan.cpu);
  if (cpu::int8_network_kernels()) {
    EXPECT_EQ(plan.log.count_applied("FuseQLinearConvAndAdd"), 1u) << explain(plan.log);
    EXPECT_EQ(count_type(*plan.cpu, "QLinearConv"), 1u) << plan.cpu->describe();
    EXPECT_EQ(count_type(*plan.cpu, "Reference"), 0u) << plan.cpu->describe();
  }
  std::mt19937 r2(12);
  std::uniform_int_distribution<int> b(0, 255);
  Tensor xv(DType::u8, Shape{1, 16, 7, 7}), ov(DType::u8, Shape{1, 24, 7, 7});
  for (int64_t i = 0; i < xv.size(); ++i) xv.data<uint8_t>()[i] = static_cast<uint8_t>(b(r2));
  for (int64_t i = 0; i < ov.size(); ++i) ov.data<uint8_t>()[i] = static_cast<uint8_t>(b(r2));
  expect_equal_but_ties(runtime::ReferenceExecutor(g).run({xv, ov})[0], ex.run({xv, ov})[0], 1.0);
}

}  // namespace

TEST(CpuInt8Static, ConvolutionAbsorbsTheQLinearAddAndComputesThePair) {
  check_conv_add(true);
  check_conv_add(false);
}

// 1x1 convolutions between asymmetric ranges (MobileNet-v2's projections, ResNet's expanding
// layers): input zero point 128, output zero points 120 and, after the residual sum, 60. kiln
// folds the input's zero point into the bias and the output's into the post-ops, so oneDNN's
// AMX brgemm kernel (which takes neither zero point in oneDNN 2.6) runs them where the CPU has
// AMX, rather than the VNNI kernels. Equal to the reference but at ties either way.
TEST(CpuInt8Static, PointwiseConvolutionsWithZeroPointsRunOnAmxWhereTheCpuHasIt) {
  auto g = make_graph(13);
  ir::Value* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 32, 9, 9})});
  ir::Value* xq = qdq(*g, x, 0.02f, 128, "x");
  ir::Value* a = qdq(*g, qconv(*g, xq, 0.02f, 32, 32, 1, 21, "conv1"), 0.03f, 120, "a");
  ir::Value* c2 = qdq(*g, qconv(*g, a, 0.03f, 32, 32, 1, 22, "conv2"), 0.025f, 110, "c2");
  ir::Value* sum = g->add_node("Add", {c2, xq}, 1, "add")->output(0);
  g->add_output(qdq(*g, sum, 0.04f, 60, "y"));
  cpu::Executor ex(g);
  const auto& plan = ex.plan_for({Shape{1, 32, 9, 9}});
  ASSERT_TRUE(plan.cpu) << plan.fallback_reason;
  if (cpu::int8_network_kernels()) {
    EXPECT_EQ(plan.log.count_applied("FuseQLinearConvAndAdd"), 1u) << explain(plan.log);
    EXPECT_EQ(count_type(*plan.cpu, "QLinearConv"), 2u) << plan.cpu->describe();
    for (const auto& n : plan.cpu->nodes()) {
      if (n->type() != std::string("QLinearConv")) continue;
      EXPECT_EQ(n->impl.rfind("ref", 0), std::string::npos) << n->name << ": " << n->impl;
      if (cpu::isa_at_least(cpu::Isa::avx512_core_amx)) {
        EXPECT_NE(n->impl.find("brgconv_1x1"), std::string::npos) << n->name << ": " << n->impl;
        EXPECT_NE(n->impl.find("amx"), std::string::npos) << n->name << ": " << n->impl;
      }
    }
  }
  runtime::ReferenceExecutor ref(g);
  for (uint32_t seed : {23u, 24u}) {
    const Tensor xv = random_tensor({1, 32, 9, 9}, seed, 2.5f);
    expect_equal_but_ties(ref.run({xv})[0], ex.run({xv})[0], 0.04);
  }
}

// A 1x1 QLinearConv whose input zero point would fold into a bias outside int32 (bias near
// INT32_MAX, every weight -127, zero point 128): kiln keeps the zero point for oneDNN instead, and
// the result (saturated at 255, since the inputs are at least the zero point) equals the
// reference. A wrapped fold would give 0.
TEST(CpuInt8Static, InputZeroPointStaysWhereItsFoldWouldLeaveInt32) {
  auto g = make_graph(13);
  ir::Value* x = g->add_input("x", {DType::u8, ir::PartialShape(Shape{1, 8, 5, 5})});
  Tensor w(DType::i8, Shape{4, 8, 1, 1}), b(DType::i32, Shape{4}), ws(DType::f32, Shape{4});
  for (int64_t i = 0; i < w.size(); ++i) w.data<int8_t>()[i] = -127;
  for (int64_t m = 0; m < 4; ++m) {
    b.data<int32_t>()[m] = std::numeric_limits<int32_t>::max() - 1000 - static_cast<int32_t>(m);
    ws.data<float>()[m] = 0.01f;
  }
  Tensor wz(DType::i8, Shape{});
  wz.data<int8_t>()[0] = 0;
  ir::Node* conv = g->add_node("QLinearConv",
                               {x, g->add_constant("xs", Tensor::scalar<float>(0.02f)), g->add_constant("xz", u8_scalar(128)),
                                g->add_constant("w", w), g->add_constant("ws", ws), g->add_constant("wz", wz),
                                g->add_constant("ys", Tensor::scalar<float>(0.5f)), g->add_constant("yz", u8_scalar(3)),
                                g->add_constant("b", b)},
                               1, "conv");
  g->add_output(conv->output(0));
  ir::infer_shapes(*g);
  std::mt19937 rng(31);
  std::uniform_int_distribution<int> d(128, 255);
  Tensor xv(DType::u8, Shape{1, 8, 5, 5});
  for (int64_t i = 0; i < xv.size(); ++i) xv.data<uint8_t>()[i] = static_cast<uint8_t>(d(rng));
  const Tensor want = runtime::ReferenceExecutor(g).run({xv})[0];
  for (int64_t i = 0; i < want.size(); ++i) ASSERT_EQ(want.data<uint8_t>()[i], 255) << "the reference saturates at " << i;
  cpu::Executor ex(g);
  const Tensor got = ex.run({xv})[0];
  for (int64_t i = 0; i < got.size(); ++i) ASSERT_EQ(got.data<uint8_t>()[i], 255) << "at " << i;
}

TEST(CpuInt8Static, QuantizeAndDequantizeLinearMatchTheReferenceExactly) {
  for (bool s8 : {false, true}) {
    auto g = make_graph(13);
    ir::Value* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{3, 1001})});
    Tensor z(s8 ? DType::i8 : DType::u8, Shape{});
    *static_cast<uint8_t*>(z.raw()) = s8 ? static_cast<uint8_t>(int8_t{-9}) : uint8_t{131};
    ir::Value* s = g->add_constant("s", Tensor::scalar<float>(0.05f));
    ir::Value* zv = g->add_constant("z", z);
    ir::Node* q = g->add_node("QuantizeLinear", {x, s, zv}, 1, "q");
    ir::Node* dq = g->add_node("DequantizeLinear", {q->output(0), s, zv}, 1, "dq");
    g->add_output(q->output(0));
    g->add_output(dq->output(0));
    Tensor in = random_tensor({3, 1001}, 21, 9.0f);
    for (int i = 0; i < 40; ++i) in.data<float>()[i] = (static_cast<float>(i) - 20.5f) * 0.05f;  // ties
    in.data<float>()[50] = std::numeric_limits<float>::quiet_NaN();
    in.data<float>()[51] = 1e30f;
    in.data<float>()[52] = -1e30f;
    auto cg = compare_with_reference(g, {in}, 0.0, 0.0);
    EXPECT_EQ(count_type(*cg, "QuantizeLinear"), 1u);
    EXPECT_EQ(count_type(*cg, "DequantizeLinear"), 1u);
  }
}

// A projection whose float result feeds a bias Add (a transformer's): DQ(x) x DQ(constant W,
// per column) -> MatMul -> Add(bias) becomes one MatMulIntegerToFloat with the bias: exact in
// int32 where the reference accumulates the dequantized values in float.
TEST(CpuInt8Static, ProjectionWithAFloatResultRunsAsMatMulIntegerToFloat) {
  auto g = make_graph(13);
  ir::Value* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{2, 5, 32})});
  std::mt19937 rng(31);
  std::uniform_int_distribution<int> d(-127, 127);
  Tensor w(DType::i8, Shape{32, 16}), ws(DType::f32, Shape{16}), wz(DType::i8, Shape{16});
  for (int64_t i = 0; i < w.size(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(d(rng));
  for (int64_t n = 0; n < 16; ++n) ws.data<float>()[n] = 0.01f + 0.001f * static_cast<float>(n), wz.data<int8_t>()[n] = 0;
  ir::Node* wdq = g->add_node("DequantizeLinear", {g->add_constant("w", w), g->add_constant("ws", ws), g->add_constant("wz", wz)},
                              1, "w_dq");
  wdq->attrs["axis"] = ir::Attribute(int64_t{1});
  ir::Value* mm = g->add_node("MatMul", {qdq(*g, x, 0.03f, 120, "x"), wdq->output(0)}, 1, "proj")->output(0);
  g->add_output(g->add_node("Add", {mm, g->add_constant("bias", random_tensor({16}, 32, 1.0f))}, 1, "bias")->output(0));
  cpu::Executor ex(g);
  const auto& plan = ex.plan_for({Shape{2, 5, 32}});
  ASSERT_TRUE(plan.cpu);
  if (cpu::int8_network_kernels()) {
    EXPECT_EQ(plan.log.count_applied(transforms::kQdqToQLinear), 1u) << explain(plan.log);
    EXPECT_EQ(count_type(*plan.cpu, "MatMulIntegerToFloat"), 1u) << plan.cpu->describe();
    EXPECT_EQ(plan.cpu->nodes().size(), 2u) << "x quantized, the projection with its bias: " << plan.cpu->describe();
    EXPECT_EQ(count_type(*plan.cpu, "Reference"), 0u) << plan.cpu->describe();
  }
  const Tensor xv = random_tensor({2, 5, 32}, 33, 3.0f);
  expect_close(runtime::ReferenceExecutor(g).run({xv})[0], ex.run({xv})[0], 1e-5, 1e-5);
}

// A classifier's last layer as quantizers write it: DQ(x) x DQ(W [N, K], per row) -> Gemm
// (transB, C = DQ(int32 bias)) whose float result is the graph output. It becomes one
// MatMulIntegerToFloat (B transposed at compile time, alpha in B's scale, beta in C); a Gemm with transA stays float and the log says why.
TEST(CpuInt8Static, GemmWithAFloatResultRunsAsMatMulIntegerToFloat) {
  for (bool trans_a : {false, true}) {
    auto g = make_graph(13);
    const int64_t K = 48, N = 20;
    ir::Value* x = g->add_input("x", {DType::f32, ir::PartialShape(trans_a ? Shape{K, 3} : Shape{3, K})});
    std::mt19937 rng(51);
    std::uniform_int_distribution<int> d(-127, 127);
    Tensor w(DType::i8, Shape{N, K}), ws(DType::f32, Shape{N}), wz(DType::i8, Shape{N});
    Tensor b(DType::i32, Shape{N}), bs(DType::f32, Shape{N}), bz(DType::i32, Shape{N});
    for (int64_t i = 0; i < w.size(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(d(rng));
    for (int64_t n = 0; n < N; ++n) {
      ws.data<float>()[n] = 0.004f + 0.0005f * static_cast<float>(n);
      wz.data<int8_t>()[n] = 0;
      bs.data<float>()[n] = 0.03f * ws.data<float>()[n];
      b.data<int32_t>()[n] = static_cast<int32_t>(n * 97 - 800);
      bz.data<int32_t>()[n] = 0;
    }
    auto dq = [&](const std::string& name, Tensor q, Tensor s, Tensor z) {
      ir::Node* node = g->add_node("DequantizeLinear", {g->add_constant(name, std::move(q)), g->add_constant(name + "_s", std::move(s)),
                                                        g->add_constant(name + "_z", std::move(z))},
                                   1, name + "_dq");
      node->attrs["axis"] = ir::Attribute(int64_t{0});
      return node->output(0);
    };
    ir::Node* gemm = g->add_node("Gemm", {qdq(*g, x, 0.03f, 110, "x"), dq("w", w, ws, wz), dq("b", b, bs, bz)}, 1, "fc");
    gemm->attrs["transB"] = ir::Attribute(int64_t{1});
    gemm->attrs["alpha"] = ir::Attribute(0.5f);
    gemm->attrs["beta"] = ir::Attribute(2.0f);
    if (trans_a) gemm->attrs["transA"] = ir::Attribute(int64_t{1});
    g->add_output(gemm->output(0));
    cpu::Executor ex(g);
    const Shape xs = trans_a ? Shape{K, 3} : Shape{3, K};
    const auto& plan = ex.plan_for({xs});
    ASSERT_TRUE(plan.cpu);
    if (cpu::int8_network_kernels() && !trans_a) {
      EXPECT_EQ(plan.log.count_applied(transforms::kQdqToQLinear), 1u) << explain(plan.log);
      EXPECT_EQ(count_type(*plan.cpu, "MatMulIntegerToFloat"), 1u) << plan.cpu->describe();
      EXPECT_EQ(count_type(*plan.cpu, "FullyConnected"), 0u) << plan.cpu->describe();
      EXPECT_EQ(count_type(*plan.cpu, "Reference"), 0u) << plan.cpu->describe();
    } else if (cpu::int8_network_kernels()) {
      EXPECT_EQ(plan.log.count_applied(transforms::kQdqToQLinear), 0u) << explain(plan.log);
      EXPECT_TRUE(log_has(plan.log, false, "A is transposed")) << explain(plan.log);
      EXPECT_EQ(count_type(*plan.cpu, "MatMulIntegerToFloat"), 0u) << plan.cpu->describe();
    }
    const Tensor xv = random_tensor(xs, 52, 3.0f);
    expect_close(runtime::ReferenceExecutor(g).run({xv})[0], ex.run({xv})[0], 1e-5, 1e-5);
  }
}

// DQ(a), DQ(b) -> Concat -> Q with one scale and zero point throughout is a Concat of the 8-bit
// data (exact: a copy); with a differing input scale it stays float, and the log says why.
TEST(CpuInt8Static, ConcatOfEqualParametersCopiesEightBitData) {
  for (bool equal : {true, false}) {
    auto g = make_graph(13);
    ir::Value* a = g->add_input("a", {DType::f32, ir::PartialShape(Shape{1, 3, 4, 5})});
    ir::Value* b = g->add_input("b", {DType::f32, ir::PartialShape(Shape{1, 5, 4, 5})});
    ir::Node* cat = g->add_node("Concat", {qdq(*g, a, 0.02f, 100, "a"), qdq(*g, b, equal ? 0.02f : 0.03f, 100, "b")}, 1, "cat");
    cat->attrs["axis"] = ir::Attribute(int64_t{1});
    g->add_output(qdq(*g, cat->output(0), 0.02f, 100, "y"));
    cpu::Executor ex(g);
    const auto& plan = ex.plan_for({Shape{1, 3, 4, 5}, Shape{1, 5, 4, 5}});
    ASSERT_TRUE(plan.cpu);
    if (cpu::int8_network_kernels()) {
      EXPECT_EQ(plan.log.count_applied(transforms::kQdqToQLinear), equal ? 1u : 0u) << explain(plan.log);
      if (!equal) {
        EXPECT_TRUE(log_has(plan.log, false, "differ in scale")) << explain(plan.log);
      }
    }
    size_t u8_concats = 0;
    for (const auto& n : plan.cpu->nodes())
      if (n->type() == std::string("Concat") && n->outputs[0]->dtype == DType::u8) ++u8_concats;
    EXPECT_EQ(u8_concats, cpu::int8_network_kernels() && equal ? 1u : 0u) << plan.cpu->describe();
    runtime::ReferenceExecutor ref(g);
    const std::vector<Tensor> in = {random_tensor({1, 3, 4, 5}, 61, 2.0f), random_tensor({1, 5, 4, 5}, 62, 2.0f)};
    // the copy is exact (DQ rounds in float); b requantized from 0.03 to 0.02 steps meets ties,
    // which float rounding may send either way: a few values one step apart
    const auto want = ref.run(in)[0].to_f64(), got = ex.run(in)[0].to_f64();
    size_t steps = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      const double d = std::fabs(want[i] - got[i]);
      ASSERT_TRUE(d <= 1e-6 || (!equal && std::fabs(d - 0.02) <= 1e-6)) << "at " << i << ": " << want[i] << " vs " << got[i];
      steps += d > 1e-6;
    }
    EXPECT_LE(steps, want.size() / 10);
  }
}

// The same op as ONNX Runtime's quantizers write it, against its reference kernel, on every ISA
// (u8 weights with a zero point: the node's own correction, no direct float output).
TEST(CpuInt8Static, MatMulIntegerToFloatMatchesTheReference) {
  for (bool offset_weights : {false, true}) {
    auto g = make_graph(13);
    g->opset_imports["com.microsoft"] = 1;
    ir::Value* a = g->add_input("a", {DType::u8, ir::PartialShape(Shape{3, 7, 40})});
    std::mt19937 rng(41);
    std::uniform_int_distribution<int> d(0, 255);
    Tensor b(offset_weights ? DType::u8 : DType::i8, Shape{40, 12});
    for (int64_t i = 0; i < b.size(); ++i) {
      const int v = d(rng);
      if (offset_weights) b.data<uint8_t>()[i] = static_cast<uint8_t>(v);
      else b.data<int8_t>()[i] = static_cast<int8_t>(v - 128);
    }
    Tensor bs(DType::f32, Shape{12});
    for (int64_t n = 0; n < 12; ++n) bs.data<float>()[n] = 0.002f * static_cast<float>(n + 1);
    Tensor bz(b.dtype(), Shape{});
    if (offset_weights) bz.data<uint8_t>()[0] = 131;
    else bz.data<int8_t>()[0] = 0;
    ir::Node* m = g->add_node("MatMulIntegerToFloat",
                              {a, g->add_constant("b", b), g->add_constant("as", Tensor::scalar<float>(0.04f)),
                               g->add_constant("bs", bs), g->add_constant("az", u8_scalar(97)), g->add_constant("bz", bz),
                               g->add_constant("bias", random_tensor({12}, 42, 2.0f))},
                              1, "m", "com.microsoft");
    g->add_output(m->output(0));
    std::uniform_int_distribution<int> e(0, 255);
    Tensor av(DType::u8, Shape{3, 7, 40});
    for (int64_t i = 0; i < av.size(); ++i) av.data<uint8_t>()[i] = static_cast<uint8_t>(e(rng));
    auto cg = compare_with_reference(g, {av}, 1e-6, 1e-6);
    EXPECT_EQ(count_type(*cg, "MatMulIntegerToFloat"), 1u);
    EXPECT_EQ(count_type(*cg, "Reference"), 0u);
  }
}

// A FakeQuantize no host absorbs runs on its own node: per tensor in the producer's (blocked)
// layout, per channel on plain data; against the reference within a tie's step, on every ISA.
TEST(CpuInt8Static, UnfusedFakeQuantizeRunsOnItsOwnNode) {
  for (bool per_channel : {false, true}) {
    auto g = make_graph(13);
    g->opset_imports["kiln"] = 1;
    ir::Value* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{2, 19, 9, 7})});
    ir::Value* c = conv3x3(*g, x, 19, 19, 51, "conv", 0.3f);
    ir::Value* sum = g->add_node("Add", {c, x}, 1, "add")->output(0);  // no FakeQuantize host
    const Shape rs = per_channel ? Shape{19, 1, 1} : Shape{};
    auto range = [&](const std::string& n, float lo, float step) {
      Tensor t(DType::f32, rs);
      for (int64_t i = 0; i < t.size(); ++i) t.data<float>()[i] = lo + step * static_cast<float>(i);
      return g->add_constant(n, t);
    };
    ir::Node* fq = g->add_node("FakeQuantize", {sum, range("il", -2.0f, 0.01f), range("ih", 2.5f, 0.02f),
                                                range("ol", -2.0f, 0.01f), range("oh", 2.5f, 0.02f)},
                               1, "fq", "kiln");
    fq->attrs["levels"] = ir::Attribute(int64_t{256});
    g->add_output(g->add_node("Relu", {fq->output(0)}, 1, "relu")->output(0));
    transforms::PassLog log;
    CompareOptions o = fusing(&log);
    o.rtol = 0;
    o.atol = 4.5 / 255 * 1.001;  // one step where a value lies within rounding of a tie
    auto cg = compare_with_reference(g, {random_tensor({2, 19, 9, 7}, 52, 3.0f)}, o);
    EXPECT_EQ(count_type(*cg, "FakeQuantize"), 1u) << cg->describe();
    EXPECT_EQ(count_type(*cg, "Reference"), 0u) << cg->describe();
  }
}

}  // namespace test_cpu_int8_static
