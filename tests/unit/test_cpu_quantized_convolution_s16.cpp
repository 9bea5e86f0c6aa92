// QLinearConv on kiln's exact int8 kernels for CPUs without VNNI (gemm_s16: 1x1 convolutions
// on the channels-last rows, the others through im2col; depthwise_s8 for one channel per
// group) against the reference kernel: every geometry the im2col and the depthwise window
// handle (strides, asymmetric padding, dilations, an odd window of 3 channels, partial column
// panels and channel vectors, batches), u8 and s8 activations and outputs, per-channel scales
// and a bias. Results equal the reference's but where a value lies within float rounding of a
// rounding tie (then one step apart). On VNNI CPUs oneDNN runs the same cases.
#include <gtest/gtest.h>

#include <random>

#include "cpu/gemm_s16.hpp"
#include "cpu/nodes/int8_util.hpp"
#include "cpu_test_util.hpp"

namespace test_cpu_quantized_convolution_s16 {

using namespace kiln;
using namespace kiln::test;

namespace {

struct QConv {
  Shape x;  // [N, C, H, W]
  int64_t M = 8, k = 3, group = 1;
  std::vector<int64_t> strides{1, 1}, pads{0, 0, 0, 0}, dilations{1, 1};
  bool x_signed = false, y_signed = false;
  int w_lo = -128, w_hi = 127;  // the weights' range; within [-64, 64] no pair overflows vpmaddubsw
  const Tensor* x_value = nullptr;  // else random
};

Tensor zero_point(bool is_signed, int v) {
  Tensor z(is_signed ? DType::i8 : DType::u8, Shape{});
  static_cast<uint8_t*>(z.raw())[0] = static_cast<uint8_t>(v);
  return z;
}

void check(const QConv& c, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << "x " << shape_to_string(c.x) << " M " << c.M << " k " << c.k << " group " << c.group);
  auto g = make_graph(13);
  const int64_t C = c.x[1];
  ir::Value* x = g->add_input("x", {c.x_signed ? DType::i8 : DType::u8, ir::PartialShape(c.x)});
  Tensor ws(DType::f32, Shape{c.M}), b(DType::i32, Shape{c.M});
  for (int64_t m = 0; m < c.M; ++m) {
    ws.data<float>()[m] = 0.0015f + 0.0003f * static_cast<float>(m % 7);
    b.data<int32_t>()[m] = static_cast<int32_t>(m * 331 % 4000) - 2000;
  }
  ir::Node* q = g->add_node(
      "QLinearConv",
      {x, g->add_constant("x_scale", Tensor::scalar<float>(0.04f)),
       g->add_constant("x_zp", zero_point(c.x_signed, c.x_signed ? -5 : 131)),
       g->add_constant("w", random_ints(DType::i8, {c.M, C / c.group, c.k, c.k}, seed, c.w_lo, c.w_hi)),
       g->add_constant("w_scale", ws), g->add_constant("w_zp", zero_point(true, 0)),
       g->add_constant("y_scale", Tensor::scalar<float>(0.05f)),
       g->add_constant("y_zp", zero_point(c.y_signed, c.y_signed ? 3 : 120)), g->add_constant("B", b)},
      {"y"}, "qconv");
  q->attrs["kernel_shape"] = std::vector<int64_t>{c.k, c.k};
  q->attrs["strides"] = c.strides;
  q->attrs["pads"] = c.pads;
  q->attrs["dilations"] = c.dilations;
  q->attrs["group"] = c.group;
  g->add_output(q->output(0));
  const Tensor xv = c.x_value ? *c.x_value : random_ints(c.x_signed ? DType::i8 : DType::u8, c.x, seed + 1, 0, 255);
  CompareOptions opt;
  opt.rtol = 0.0;
  opt.atol = 1.0;  // a tie may round the other way: one step
  auto cg = compare_with_reference(g, {xv}, opt);
  EXPECT_EQ(count_type(*cg, "QLinearConv"), 1u) << cg->describe();
  EXPECT_EQ(count_type(*cg, "Reference"), 0u) << cg->describe();
  for (const auto& n : cg->nodes()) {
    if (n->type() != std::string("QLinearConv")) continue;
    if (!cpu::exact_int8_kernels() && cpu::gemm_s16::available()) {
      const bool seven_bit = c.w_lo >= -64 && c.w_hi <= 64;  // u8 x s8 on vpmaddubsw (pair_safe)
      const std::string want = c.group > 1                 ? "kiln_depthwise:avx2_s8"
                               : seven_bit && !c.x_signed ? "kiln_gemm:avx2_u8s8"
                                                          : "kiln_gemm:avx2_s16";
      EXPECT_EQ(n->impl.rfind(want, 0), 0u) << n->impl;
    }
  }
  const auto want = runtime::ReferenceExecutor(g).run({xv})[0].to_f64(), got = cg->run({xv})[0].to_f64();
  size_t differ = 0;
  for (size_t i = 0; i < want.size(); ++i) differ += want[i] != got[i];
  EXPECT_LE(differ, want.size() / 50) << differ << " of " << want.size() << " values a step apart";
}

}  // namespace

TEST(CpuQuantizedConvolutionS16, GemmGeometriesEqualTheReference) {
  QConv c;
  c.x = {2, 8, 9, 7};  // 3x3, padding 1, 20 output channels (a partial panel), batch 2
  c.M = 20;
  c.pads = {1, 1, 1, 1};
  check(c, 1);
  c = {};  // the stem's form: 7x7 stride 2 over 3 channels (an odd window), s8 in and out
  c.x = {1, 3, 23, 21};
  c.M = 16, c.k = 7, c.strides = {2, 2}, c.pads = {3, 3, 3, 3}, c.x_signed = c.y_signed = true;
  check(c, 2);
  c = {};  // a strided 1x1 (ResNet's downsample): im2col
  c.x = {1, 32, 10, 10};
  c.M = 24, c.k = 1, c.strides = {2, 2};
  check(c, 3);
  c = {};  // 1x1 stride 1 on the channels-last rows, 33 channels (odd K), u8 in, s8 out
  c.x = {2, 33, 5, 6};
  c.M = 40, c.k = 1, c.y_signed = true;
  check(c, 4);
  c = {};  // dilated, asymmetric padding
  c.x = {1, 6, 11, 9};
  c.M = 17, c.dilations = {2, 2}, c.pads = {0, 1, 2, 0};
  check(c, 5);
}

// Weights within [-64, 64] (kiln quantize --reduce-range, ORT's reduce_range) times u8
// activations: the u8 x s8 GEMM on vpmaddubsw, whose pair sums cannot overflow 16 bits then;
// the activation zero point comes off through the weights' column sums (im2col pads with it).
TEST(CpuQuantizedConvolutionS16, SevenBitWeightsRunTheU8S8GemmAndEqualTheReference) {
  QConv c;
  c.x = {2, 8, 9, 7};  // 3x3, padding 1 (x_zp in the padding), a partial panel, batch 2
  c.M = 20, c.pads = {1, 1, 1, 1}, c.w_lo = -64, c.w_hi = 64;
  check(c, 21);
  c = {};  // 1x1 stride 1 on the channels-last rows: 32 channels, whole quads
  c.x = {1, 32, 6, 5};
  c.M = 24, c.k = 1, c.w_lo = -64, c.w_hi = 64, c.y_signed = true;
  check(c, 22);
  c = {};  // 1x1 over 33 channels: im2col's rows, padded to 36
  c.x = {1, 33, 5, 6};
  c.M = 16, c.k = 1, c.w_lo = -64, c.w_hi = 64;
  check(c, 23);
  c = {};  // the stem's form: 7x7 stride 2 over 3 channels (K = 147 -> 148)
  c.x = {1, 3, 23, 21};
  c.M = 16, c.k = 7, c.strides = {2, 2}, c.pads = {3, 3, 3, 3}, c.w_lo = -64, c.w_hi = 64;
  check(c, 24);
  c = {};  // every pair at the bound: 255 x 64 + 255 x 64 = 32640 in each 16-bit sum
  c.x = {1, 8, 6, 6};
  c.M = 8, c.pads = {1, 1, 1, 1}, c.w_lo = 64, c.w_hi = 64;
  Tensor all_255(DType::u8, c.x);
  for (int64_t i = 0; i < all_255.size(); ++i) all_255.data<uint8_t>()[i] = 255;
  c.x_value = &all_255;
  check(c, 25);
  c = {};  // s8 activations: the 16-bit GEMM
  c.x = {1, 8, 7, 7};
  c.M = 8, c.pads = {1, 1, 1, 1}, c.w_lo = -64, c.w_hi = 64, c.x_signed = true;
  check(c, 26);
}

TEST(CpuQuantizedConvolutionS16, DepthwiseEqualsTheReference) {
  QConv c;
  c.x = {1, 20, 12, 11};  // 3x3 stride 2 padding 1, 20 channels (a partial vector of 8)
  c.M = 20, c.group = 20, c.strides = {2, 2}, c.pads = {1, 1, 1, 1};
  check(c, 11);
  c.x = {2, 16, 9, 9};  // stride 1, s8 in, u8 out, 5x5 dilated
  c.M = 16, c.group = 16, c.k = 5, c.strides = {1, 1}, c.pads = {2, 4, 2, 4}, c.dilations = {1, 2}, c.x_signed = true;
  check(c, 12);
}

}  // namespace test_cpu_quantized_convolution_s16
