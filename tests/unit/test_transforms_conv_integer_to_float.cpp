// FuseConvIntegerToFloat: a dynamically quantized convolution (DynamicQuantizeLinear ->
// ConvInteger -> Cast -> Mul(x_scale * w_scale) [-> Add(bias [M, 1, 1])], as ONNX Runtime's and
// kiln's dynamic quantizers write it) becomes one kiln ConvIntegerToFloat with the same results;
// forms it does not take stay, with the reason logged. Then the fused node on the CPU (kiln's
// 16-bit GEMM without VNNI, oneDNN's int8 convolution with it) against the reference, exactly.
#include <gtest/gtest.h>

#include <random>

#include "cpu/executor.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/gemm_s16.hpp"
#include "cpu/nodes/int8_util.hpp"
#include "cpu_test_util.hpp"
#include "transforms/fuse_matmul_integer_to_float.hpp"
#include "transforms_test_util.hpp"

namespace test_transforms_conv_integer_to_float {

using namespace kiln;
using namespace kiln::test;
using transforms::fuse_conv_integer_to_float;
using transforms::kFuseConvIntegerToFloat;
using transforms::PassLog;

namespace {

Tensor random_bytes(DType t, Shape s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(t == DType::u8 ? 0 : -128, t == DType::u8 ? 255 : 127);
  Tensor r(t, std::move(s));
  for (int64_t i = 0; i < r.size(); ++i) static_cast<uint8_t*>(r.raw())[i] = static_cast<uint8_t>(d(rng));
  return r;
}

struct DynamicConv {
  ir::Node* conv = nullptr;
  ir::Value* y = nullptr;  // the float result (after the bias Add when there is one)
};

// DynamicQuantizeLinear(x) -> ConvInteger(xq, w [M, C / group, 3, 3], x_zp[, w_zp]) (pads 1,
// strides 2) -> Cast -> Mul(_, x_scale * w_scale) [-> Add(bias)]. `w_scale_shape`: {} one value,
// else its shape (e.g. [M, 1, 1]); u8 weights with a zero point when `u8_weights`.
DynamicConv dynamic_conv(const std::shared_ptr<ir::Graph>& g, ir::Value* x, int64_t C, int64_t M, Shape w_scale_shape,
                         bool bias, bool u8_weights, const std::string& p, uint32_t seed, int64_t group = 1) {
  ir::Node* dq = g->add_node("DynamicQuantizeLinear", {x}, {p + "_xq", p + "_xs", p + "_xzp"}, p + "_dq");
  std::vector<ir::Value*> in = {dq->output(0),
                                g->add_constant(p + "_w", random_bytes(u8_weights ? DType::u8 : DType::i8, {M, C / group, 3, 3}, seed)),
                                dq->output(2)};
  if (u8_weights) {
    Tensor zw(DType::u8, Shape{});
    *static_cast<uint8_t*>(zw.raw()) = 131;
    in.push_back(g->add_constant(p + "_wzp", zw));
  }
  DynamicConv r;
  r.conv = g->add_node("ConvInteger", in, {p + "_acc"}, p + "_conv");
  r.conv->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  r.conv->attrs["strides"] = std::vector<int64_t>{2, 2};
  if (group > 1) r.conv->attrs["group"] = group;
  ir::Node* cast = g->add_node("Cast", {r.conv->output(0)}, {p + "_accf"}, p + "_cast");
  cast->attrs["to"] = int64_t(1);
  ir::Value* ws = g->add_constant(p + "_ws", w_scale_shape.empty() ? Tensor::scalar<float>(0.0037f)
                                                                   : rand_f32(w_scale_shape, seed + 1, 0.001f, 0.01f));
  ir::Node* scales = g->add_node("Mul", {dq->output(1), ws}, {p + "_scales"}, p + "_scales_mul");
  r.y = g->add_node("Mul", {cast->output(0), scales->output(0)}, {p + "_scaled"}, p + "_mul")->output(0);
  if (bias) r.y = g->add_node("Add", {r.y, g->add_constant(p + "_bias", rand_f32({M, 1, 1}, seed + 2))}, {p + "_y"}, p + "_add")->output(0);
  return r;
}

bool log_has_skip(const PassLog& log, const std::string& where, const std::string& text) {
  for (const auto& e : entries(log, kFuseConvIntegerToFloat, false))
    if (e.where == where && e.message.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(TransformsConvIntegerToFloat, DynamicConvolutionsBecomeOneNodeWithTheSameResults) {
  auto g = new_graph(13);
  ir::Value* x = g->add_input("x", f32_type({2, 5, 9, 8}));
  DynamicConv a = dynamic_conv(g, x, 5, 7, {}, /*bias=*/true, /*u8_weights=*/false, "a", 1);
  DynamicConv b = dynamic_conv(g, x, 5, 6, {6, 1, 1}, /*bias=*/false, /*u8_weights=*/true, "b", 11);
  g->add_output(a.y);
  g->add_output(b.y);
  ir::infer_shapes(*g);
  auto before = g->clone();
  PassLog log;
  EXPECT_EQ(fuse_conv_integer_to_float(*g, &log), 2u);
  g->remove_dead();
  ir::infer_shapes(*g);
  EXPECT_EQ(count_op(*g, "ConvIntegerToFloat"), 2u);
  for (const char* gone : {"ConvInteger", "Cast", "Mul", "Add"}) EXPECT_EQ(count_op(*g, gone), 0u) << gone;
  EXPECT_EQ(output_names(*g), output_names(*before));
  expect_same_outputs(before, g, {rand_f32({2, 5, 9, 8}, 3, -3, 3)}, 0.0, 0.0);
}

TEST(TransformsConvIntegerToFloat, FormsItDoesNotTakeStay) {
  auto g = new_graph(13);
  ir::Value* x = g->add_input("x", f32_type({1, 4, 9, 13}));  // outputs [1, M, 5, 7]
  // w_scale [7] broadcasts along the width (7 columns), not the 7 output channels
  DynamicConv along_w = dynamic_conv(g, x, 4, 7, {7}, false, false, "along_w", 21);
  // the int32 result read twice
  DynamicConv shared = dynamic_conv(g, x, 4, 3, {}, false, false, "shared", 31);
  g->add_output(along_w.y);
  g->add_output(shared.y);
  g->add_output(shared.conv->output(0));
  ir::infer_shapes(*g);
  auto before = g->clone();
  PassLog log;
  EXPECT_EQ(fuse_conv_integer_to_float(*g, &log), 0u);
  EXPECT_EQ(count_op(*g, "ConvInteger"), 2u);
  EXPECT_TRUE(log_has_skip(log, "along_w_conv", "along the output channels"));
  EXPECT_TRUE(log_has_skip(log, "shared_conv", "not read by one Cast to float alone"));
  expect_same_outputs(before, g, {rand_f32({1, 4, 9, 13}, 4, -3, 3)}, 0.0, 0.0);
}

// Through the CPU plugin's pipeline: the fused node scales and adds the bias as it writes its
// output, bit for bit the reference's Cast, Muls and Add.
TEST(TransformsConvIntegerToFloat, FusedOnTheCpuEqualsTheReference) {
  auto g = make_graph(13);
  ir::Value* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{2, 6, 11, 10})});
  // two in a chain (the second reads the first's channels-last output through a Relu and its own
  // DynamicQuantizeLinear), one beside them, and a depthwise one (u8 weights with a zero point,
  // 19 channels: two blocks of 8 and a tail of 3) after the first
  ir::Value* p = dynamic_conv(g, x, 6, 19, {19, 1, 1}, true, false, "p", 41).y;
  ir::Value* relu = g->add_node("Relu", {p}, {"p_relu"}, "p_relu_node")->output(0);
  g->add_output(dynamic_conv(g, relu, 19, 8, {8, 1, 1}, true, false, "r", 61).y);
  g->add_output(dynamic_conv(g, x, 6, 5, {}, true, true, "q", 51).y);
  g->add_output(dynamic_conv(g, relu, 19, 19, {19, 1, 1}, true, true, "d", 71, /*group=*/19).y);
  ir::infer_shapes(*g);
  cpu::GraphOptions options;  // f32
  cpu::Executor ex(g, options);
  const auto& plan = ex.plan_for({Shape{2, 6, 11, 10}});
  ASSERT_TRUE(plan.cpu) << plan.fallback_reason;
  EXPECT_EQ(plan.log.count_applied(kFuseConvIntegerToFloat), 4u);
  std::map<std::string, size_t> types;
  for (const auto& n : plan.cpu->nodes()) {
    types[n->type()]++;
    if (n->type() == std::string("ConvIntegerToFloat") && !cpu::exact_int8_kernels() && cpu::gemm_s16::available()) {
      const bool depthwise = n->name.rfind("d_conv", 0) == 0;
      EXPECT_EQ(n->impl, depthwise ? "kiln_depthwise:avx2_s8" : "kiln_gemm:avx2_s16 (im2col)") << n->name;
      // scaled as the GEMM stores its rows: channels-last, which its readers take as it is
      const cpu::Edge& y = *n->outputs[0];
      const dnnl::memory::desc nhwc(cpu::to_dims(y.shape), dnnl::memory::data_type::f32, dnnl::memory::format_tag::nhwc);
      EXPECT_TRUE(y.desc() == nhwc) << n->name << ": " << y.layout_name();
    }
  }
  EXPECT_EQ(types["ConvIntegerToFloat"], 4u);
  EXPECT_EQ(types["Cast"], 0u);
  EXPECT_EQ(types["Reference"], 0u);
  runtime::ReferenceExecutor ref(g);
  for (uint32_t seed : {42u, 43u}) {
    const Tensor in = rand_f32({2, 6, 11, 10}, seed, -2, 5);
    const auto want = ref.run({in}), got = ex.run({in});
    for (size_t i = 0; i < want.size(); ++i) expect_close_same_dtype(want[i], got[i], 0.0, 0.0);
  }
}

}  // namespace test_transforms_conv_integer_to_float
