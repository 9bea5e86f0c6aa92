// The 8- and 4-bit element types (float8 e4m3fn / e4m3fnuz / e5m2 / e5m2fnuz, int4, uint4,
// float4e2m1): their conversions against hand-worked values of ONNX's Cast rules, their packed
// form in TensorProtos, Cast and Q / DQ through the API, the error for an op that does not take
// them, and an int4 weight-only MatMul that still runs on the fast path (the DequantizeLinear
// of the weight folds into f32 at compile time).
#include <gtest/gtest.h>
#include <kiln/core.hpp>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <limits>

#include "core/narrow_types.hpp"
#include "cpu/executor.hpp"
#include "error_util.hpp"
#include "frontend/onnx/onnx_frontend.hpp"
#include "frontend/onnx/tensor_proto.hpp"
#include "onnx_builder.hpp"
#include "precision_util.hpp"

namespace kiln::test::test_narrow_types {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(NarrowTypes, Float8E4M3FN) {
  const DType t = DType::f8e4m3fn;
  EXPECT_EQ(narrow_from_float(t, 448.0), 0x7E);          // the largest finite value
  EXPECT_EQ(narrow_from_float(t, 464.0), 0x7E);          // half way to 480: ties to even (448)
  EXPECT_EQ(narrow_from_float(t, 470.0, true), 0x7E);    // rounds past the largest: saturates
  EXPECT_EQ(narrow_from_float(t, 470.0, false), 0x7F);   // ... or is NaN
  EXPECT_EQ(narrow_from_float(t, kInf, true), 0x7E);
  EXPECT_EQ(narrow_from_float(t, -kInf, true), 0xFE);
  EXPECT_EQ(narrow_from_float(t, kInf, false), 0x7F);
  EXPECT_EQ(narrow_from_float(t, kNaN), 0x7F);
  EXPECT_EQ(narrow_from_float(t, -0.0), 0x80);           // negative zero kept
  EXPECT_EQ(narrow_from_float(t, std::ldexp(1.0, -9)), 0x01);   // the smallest subnormal
  EXPECT_EQ(narrow_from_float(t, std::ldexp(1.0, -10)), 0x00);  // half of it: ties to even (0)
  EXPECT_EQ(narrow_from_float(t, std::ldexp(1.5, -10)), 0x01);
  EXPECT_EQ(narrow_from_float(t, 1.0625), 0x38);         // 1 + 1/16: tie between 1 and 1.125 -> 1
  EXPECT_EQ(narrow_from_float(t, 1.1875), 0x3A);         // 1.125 + 1/16: tie -> 1.25 (even)
  EXPECT_FLOAT_EQ(narrow_to_float(t, 0x7E), 448.0f);
  EXPECT_FLOAT_EQ(narrow_to_float(t, 0x01), std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isnan(narrow_to_float(t, 0xFF)));
  EXPECT_TRUE(std::signbit(narrow_to_float(t, 0x80)));
}

TEST(NarrowTypes, Float8FnuzAndE5M2) {
  EXPECT_EQ(narrow_from_float(DType::f8e4m3fnuz, -0.0), 0x00);  // no negative zero
  EXPECT_EQ(narrow_from_float(DType::f8e4m3fnuz, 240.0), 0x7F);
  EXPECT_EQ(narrow_from_float(DType::f8e4m3fnuz, kNaN), 0x80);
  EXPECT_EQ(narrow_from_float(DType::f8e4m3fnuz, kInf, false), 0x80);
  EXPECT_EQ(narrow_from_float(DType::f8e4m3fnuz, -kInf, true), 0xFF);
  EXPECT_TRUE(std::isnan(narrow_to_float(DType::f8e4m3fnuz, 0x80)));
  EXPECT_EQ(narrow_from_float(DType::f8e5m2, 57344.0), 0x7B);
  EXPECT_EQ(narrow_from_float(DType::f8e5m2, 1e6, true), 0x7B);
  EXPECT_EQ(narrow_from_float(DType::f8e5m2, 1e6, false), 0x7C);   // +inf
  EXPECT_EQ(narrow_from_float(DType::f8e5m2, -kInf, false), 0xFC);
  EXPECT_EQ(narrow_to_float(DType::f8e5m2, 0x7C), std::numeric_limits<float>::infinity());
  EXPECT_EQ(narrow_from_float(DType::f8e5m2fnuz, 57344.0), 0x7F);
  EXPECT_EQ(narrow_from_float(DType::f8e5m2fnuz, 1e6, false), 0x80);
  EXPECT_FLOAT_EQ(narrow_to_float(DType::f8e5m2fnuz, 0x01), std::ldexp(1.0f, -17));
  // every finite code reads back to itself
  for (DType t : {DType::f8e4m3fn, DType::f8e4m3fnuz, DType::f8e5m2, DType::f8e5m2fnuz, DType::f4e2m1})
    for (int b = 0; b < (t == DType::f4e2m1 ? 16 : 256); ++b) {
      const float v = narrow_to_float(t, static_cast<uint8_t>(b));
      if (std::isfinite(v)) {
        EXPECT_EQ(narrow_from_float(t, v), b) << dtype_name(t) << " code " << b;
      }
    }
}

TEST(NarrowTypes, Float4AndInt4) {
  const DType f4 = DType::f4e2m1;
  EXPECT_EQ(narrow_from_float(f4, 0.25), 0x0);  // ties to even: 0
  EXPECT_EQ(narrow_from_float(f4, 0.75), 0x2);  // -> 1.0
  EXPECT_EQ(narrow_from_float(f4, 5.0), 0x6);   // -> 4.0
  EXPECT_EQ(narrow_from_float(f4, 5.01), 0x7);  // -> 6.0
  EXPECT_EQ(narrow_from_float(f4, 1e6), 0x7);   // always saturates
  EXPECT_EQ(narrow_from_float(f4, -kInf), 0xF);
  EXPECT_EQ(narrow_from_float(f4, kNaN), 0x7);  // no NaN in the format
  EXPECT_EQ(narrow_from_float(f4, -0.0), 0x8);
  EXPECT_FLOAT_EQ(narrow_to_float(f4, 0xD), -3.0f);
  EXPECT_EQ(narrow_from_float(DType::i4, 7.5), 0x7);   // clamped
  EXPECT_EQ(narrow_from_float(DType::i4, -8.5), 0x8);  // -8
  EXPECT_EQ(narrow_from_float(DType::i4, 2.5), 0x2);   // half to even
  EXPECT_EQ(narrow_from_float(DType::i4, 3.5), 0x4);
  EXPECT_EQ(narrow_from_integer(DType::i4, 9), 0x9);   // integers wrap: 9 reads back as -7
  EXPECT_FLOAT_EQ(narrow_to_float(DType::i4, 0x9), -7.0f);
  EXPECT_EQ(narrow_from_float(DType::u4, -1.0), 0x0);
  EXPECT_EQ(narrow_from_float(DType::u4, 15.5), 0xF);
  EXPECT_FLOAT_EQ(narrow_to_float(DType::u4, 0xF), 15.0f);
}

Tensor narrow_tensor(DType t, const std::vector<uint8_t>& bits, Shape shape) {
  Tensor x(t, std::move(shape));
  std::copy(bits.begin(), bits.end(), static_cast<uint8_t*>(x.raw()));
  return x;
}

TEST(NarrowTypes, FourBitTensorsArePackedInProtos) {
  const Tensor x = narrow_tensor(DType::i4, {0x1, 0xF, 0x8, 0x7, 0x3}, {5});  // odd count
  onnx::TensorProto p;
  frontend::tensor_to_proto(x, p);
  EXPECT_EQ(p.data_type(), 22);
  ASSERT_EQ(p.raw_data().size(), 3u);
  EXPECT_EQ(static_cast<uint8_t>(p.raw_data()[0]), 0xF1);  // first element in the low nibble
  EXPECT_EQ(static_cast<uint8_t>(p.raw_data()[2]), 0x03);
  const Tensor back = frontend::tensor_from_proto(p, ".");
  EXPECT_EQ(back.to_i64(), (std::vector<int64_t>{1, -1, -8, 7, 3}));
  // int32_data: one packed byte per entry; float8 one pattern per entry
  onnx::TensorProto q;
  q.set_data_type(21);
  q.add_dims(3);
  q.add_int32_data(0x2F);
  q.add_int32_data(0x05);
  EXPECT_EQ(frontend::tensor_from_proto(q, ".").to_i64(), (std::vector<int64_t>{15, 2, 5}));
  q.add_int32_data(0x00);  // one byte too many
  EXPECT_NE(error_of([&] { frontend::tensor_from_proto(q, "."); }).find("needs 2"), std::string::npos);
  onnx::TensorProto f;
  f.set_data_type(17);
  f.add_dims(2);
  f.add_int32_data(0x7E);
  f.add_int32_data(0xB8);
  EXPECT_EQ(frontend::tensor_from_proto(f, ".").to_f64(), (std::vector<double>{448.0, -1.0}));
}

std::vector<float> run_f32(const std::string& bytes, const Tensor& in) {
  Core core;
  auto req = core.compile_model(core.read_model_from_memory(bytes), f32_properties()).create_infer_request();
  req.set_input_tensor(in);
  req.infer();
  const Tensor y = req.get_output_tensor();
  return std::vector<float>(y.data<float>(), y.data<float>() + y.size());
}

TEST(NarrowTypes, CastAndQuantizeThroughTheApi) {
  {  // f32 -> float8e4m3fn (not saturating) -> f32
    OnnxBuilder b(19);
    b.input("x", {4});
    auto* c = b.node("Cast", {"x"}, {"q"}, "to_f8");
    OnnxBuilder::attr_i(c, "to", 17);
    OnnxBuilder::attr_i(c, "saturate", 0);
    auto* d = b.node("Cast", {"q"}, {"y"}, "to_f32");
    OnnxBuilder::attr_i(d, "to", 1);
    b.output("y");
    const auto y = run_f32(b.bytes(), Tensor::from_vector<float>({0.3f, -1000.0f, 17.0f, 1e-3f}, {4}));
    EXPECT_FLOAT_EQ(y[0], 0.3125f);
    EXPECT_TRUE(std::isnan(y[1]));
    EXPECT_FLOAT_EQ(y[2], 16.0f);                     // 17 -> 16 (step 2 there; tie to even)
    EXPECT_FLOAT_EQ(y[3], std::ldexp(1.0f, -9));      // 0.001 -> 2^-9, the nearest subnormal
  }
  {  // QuantizeLinear to int4 with a scale and zero point, DequantizeLinear back (opset 21)
    OnnxBuilder b(21);
    b.input("x", {4});
    b.initializer("s", Tensor::scalar<float>(0.5f));
    b.initializer("z", narrow_tensor(DType::i4, {0x1}, {}));
    b.node("QuantizeLinear", {"x", "s", "z"}, {"q"}, "quant");
    b.node("DequantizeLinear", {"q", "s", "z"}, {"y"}, "dequant");
    b.output("y");
    const auto y = run_f32(b.bytes(), Tensor::from_vector<float>({0.74f, -10.0f, 10.0f, 1.25f}, {4}));
    // round(x / 0.5) + 1 clamped to [-8, 7], then (q - 1) * 0.5
    EXPECT_EQ(y, (std::vector<float>{0.5f, -4.5f, 3.0f, 1.0f}));
  }
}

TEST(NarrowTypes, OtherOpsRefuseThemByName) {
  OnnxBuilder b(21);
  b.input("x", {4}, 22);  // int4
  b.node("Abs", {"x"}, {"y"}, "abs_0");
  b.output("y", 22);
  const std::string msg = error_of([&] {
    Core core;
    core.read_model_from_memory(b.bytes());
  });
  EXPECT_NE(msg.find("'abs_0'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("is i4; Abs does not take the 8- and 4-bit types"), std::string::npos) << msg;
}

TEST(NarrowTypes, Int4WeightOnlyMatMulRunsOnTheFastPath) {
  // y = x @ DequantizeLinear(W: int4 [4, 3], blocked scales along K, block 2)
  OnnxBuilder b(21);
  b.input("x", {2, 4});
  b.initializer("w", narrow_tensor(DType::i4, {0x1, 0x2, 0xF, 0x7, 0x8, 0x0, 0x3, 0x4, 0x5, 0xE, 0x1, 0x2}, {4, 3}));
  b.initializer("ws", Tensor::from_vector<float>({0.5f, 1.0f, 2.0f, 0.25f, 0.5f, 1.0f}, {2, 3}));
  auto* dq = b.node("DequantizeLinear", {"w", "ws"}, {"wf"}, "dq_w");
  OnnxBuilder::attr_i(dq, "axis", 0);
  OnnxBuilder::attr_i(dq, "block_size", 2);
  b.node("MatMul", {"x", "wf"}, {"y"}, "mm");
  b.output("y");
  const std::vector<float> xs = {1, 2, 3, 4, -1, 0.5f, 2, -3};
  const int w[4][3] = {{1, 2, -1}, {7, -8, 0}, {3, 4, 5}, {-2, 1, 2}};
  const float s[2][3] = {{0.5f, 1.0f, 2.0f}, {0.25f, 0.5f, 1.0f}};
  std::vector<float> want(6, 0.0f);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) want[i * 3 + j] += xs[i * 4 + k] * static_cast<float>(w[k][j]) * s[k / 2][j];
  const auto y = run_f32(b.bytes(), Tensor::from_vector<float>(xs, {2, 4}));
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(y[i], want[i], 1e-5f) << i;
  auto g = frontend::load_onnx_bytes(b.bytes(), ".");
  cpu::Executor ex(g);
  const auto& plan = ex.plan_for({{2, 4}});
  EXPECT_TRUE(plan.cpu) << plan.fallback_reason;
}

}  // namespace
}  // namespace kiln::test::test_narrow_types
