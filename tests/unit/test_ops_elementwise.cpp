// Unit tests for the elementwise op family (elementwise*.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <memory>

#include "ir/graph.hpp"
#include "ir/op_registry.hpp"
#include "ops/fast_erf.hpp"
#include "runtime/reference_executor.hpp"

namespace test_ops_elementwise {

using namespace kiln;

namespace {

// Builds a one-node graph over `ins` (an undefined Tensor = omitted optional input),
// infers shapes, runs the reference executor and returns output 0. Checks that the
// inferred dtype / shape agree with the computed output.
Tensor run_op(const std::string& op, const std::vector<Tensor>& ins, std::map<std::string, ir::Attribute> attrs = {},
              int opset = 17, const std::string& domain = "") {
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = opset;
  if (!domain.empty()) g->opset_imports[domain] = 1;
  std::vector<ir::Value*> vs;
  std::vector<Tensor> feed;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (!ins[i].defined()) {
      vs.push_back(nullptr);
      continue;
    }
    vs.push_back(g->add_input("x" + std::to_string(i), {ins[i].dtype(), ir::PartialShape(ins[i].shape())}));
    feed.push_back(ins[i]);
  }
  ir::Node* n = g->add_node(op, vs, 1, "n", domain);
  n->attrs = std::move(attrs);
  g->add_output(n->output(0));
  ir::infer_shapes(*g);
  runtime::ReferenceExecutor ex(g);
  auto out = ex.run(feed);
  EXPECT_EQ(n->output(0)->type.dtype, out.at(0).dtype()) << op;
  EXPECT_EQ(n->output(0)->type.shape.to_string(), ir::PartialShape(out.at(0).shape()).to_string()) << op;
  return out.at(0);
}

Tensor f32(std::vector<float> v, Shape s) { return Tensor::from_vector<float>(v, std::move(s)); }
Tensor f32(std::vector<float> v) {
  Shape s{static_cast<int64_t>(v.size())};
  return Tensor::from_vector<float>(v, s);
}
template <class T>
Tensor vec(std::vector<T> v, Shape s = {}) {
  if (s.empty()) s = {static_cast<int64_t>(v.size())};
  return Tensor::from_vector<T>(v, s);
}
template <class T>
std::vector<T> values(const Tensor& t) {
  const T* p = t.data<T>();
  return std::vector<T>(p, p + t.size());
}
void expect_near(const Tensor& t, const std::vector<float>& want, float tol = 1e-5f) {
  ASSERT_EQ(t.size(), static_cast<int64_t>(want.size()));
  auto got = t.to_f64();
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], tol * std::max(1.0f, std::fabs(want[i]))) << "at " << i;
    }
  }
}

}  // namespace

// ---------------- unary math ----------------

TEST(OpsElementwise, UnaryMath) {
  expect_near(run_op("Abs", {f32({-1.5f, 0.f, 2.f})}), {1.5f, 0.f, 2.f});
  EXPECT_EQ(values<int32_t>(run_op("Abs", {vec<int32_t>({-3, 4, std::numeric_limits<int32_t>::min()})})),
            (std::vector<int32_t>{3, 4, std::numeric_limits<int32_t>::min()}));
  EXPECT_EQ(values<int8_t>(run_op("Neg", {vec<int8_t>({-3, 4, 0})})), (std::vector<int8_t>{3, -4, 0}));
  EXPECT_EQ(values<int64_t>(run_op("Sign", {vec<int64_t>({-7, 0, 9})})), (std::vector<int64_t>{-1, 0, 1}));
  expect_near(run_op("Exp", {f32({0.f, 1.f})}), {1.f, 2.7182818f});
  expect_near(run_op("Log", {f32({1.f, 2.7182818f})}), {0.f, 1.f});
  expect_near(run_op("Sqrt", {f32({4.f, 9.f})}), {2.f, 3.f});
  expect_near(run_op("Reciprocal", {f32({4.f, -0.5f})}), {0.25f, -2.f});
  expect_near(run_op("Ceil", {f32({1.2f, -1.2f})}), {2.f, -1.f});
  expect_near(run_op("Floor", {f32({1.2f, -1.2f})}), {1.f, -2.f});
  // half to even
  expect_near(run_op("Round", {f32({0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 2.6f})}), {0.f, 2.f, 2.f, -0.f, -2.f, 3.f});
  expect_near(run_op("Erf", {f32({0.f, 1.f})}), {0.f, 0.8427008f});
  expect_near(run_op("Cos", {f32({0.f})}), {1.f});
  expect_near(run_op("Atanh", {f32({0.5f})}), {0.5493061f});
  expect_near(run_op("Tanh", {f32({0.5f})}), {0.46211716f});
  // double and f16 dtypes
  Tensor d = run_op("Sin", {vec<double>({1.0})});
  EXPECT_EQ(d.dtype(), DType::f64);
  EXPECT_NEAR(d.data<double>()[0], std::sin(1.0), 1e-15);
  Tensor h = run_op("Sqrt", {vec<float16>({float16(2.0f), float16(16.0f)})});
  EXPECT_EQ(h.dtype(), DType::f16);
  expect_near(h, {1.4142f, 4.f}, 1e-3f);
}

TEST(OpsElementwise, Predicates) {
  float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  EXPECT_EQ(values<bool>(run_op("IsNaN", {f32({1.f, nan, inf})})), (std::vector<bool>{false, true, false}));
  EXPECT_EQ(values<bool>(run_op("IsInf", {f32({1.f, nan, inf, -inf})})),
            (std::vector<bool>{false, false, true, true}));
  EXPECT_EQ(values<bool>(run_op("IsInf", {f32({1.f, inf, -inf})}, {{"detect_negative", 0}})),
            (std::vector<bool>{false, true, false}));
  EXPECT_EQ(values<bool>(run_op("Not", {vec<bool>({true, false})})), (std::vector<bool>{false, true}));
}

// ---------------- activations ----------------

TEST(OpsElementwise, Activations) {
  expect_near(run_op("Relu", {f32({-1.f, 2.f})}), {0.f, 2.f});
  EXPECT_EQ(values<int8_t>(run_op("Relu", {vec<int8_t>({-5, 5})})), (std::vector<int8_t>{0, 5}));
  expect_near(run_op("LeakyRelu", {f32({-2.f, 3.f})}, {{"alpha", 0.1f}}), {-0.2f, 3.f});
  expect_near(run_op("LeakyRelu", {f32({-2.f})}), {-0.02f});
  expect_near(run_op("Elu", {f32({-1.f, 1.f})}, {{"alpha", 2.0f}}), {2.f * (std::exp(-1.f) - 1.f), 1.f});
  expect_near(run_op("Selu", {f32({-1.f, 1.f})}, {{"alpha", 2.0f}, {"gamma", 3.0f}}),
              {3.f * (2.f * std::exp(-1.f) - 2.f), 3.f});
  expect_near(run_op("Celu", {f32({-1.f, 1.f})}, {{"alpha", 2.0f}}), {2.f * (std::exp(-0.5f) - 1.f), 1.f});
  expect_near(run_op("Sigmoid", {f32({0.f, -100.f, 100.f})}), {0.5f, 0.f, 1.f});
  expect_near(run_op("HardSigmoid", {f32({-10.f, 0.f, 1.f})}), {0.f, 0.5f, 0.7f});
  expect_near(run_op("HardSwish", {f32({-4.f, 1.f, 4.f})}), {0.f, 1.f * (1.f / 6.f + 0.5f), 4.f});
  expect_near(run_op("Softplus", {f32({0.f, 100.f, -100.f})}), {std::log(2.f), 100.f, 0.f});
  expect_near(run_op("Softsign", {f32({1.f, -3.f})}), {0.5f, -0.75f});
  expect_near(run_op("ThresholdedRelu", {f32({0.5f, 1.5f})}), {0.f, 1.5f});
  expect_near(run_op("Shrink", {f32({-2.f, 0.2f, 2.f})}, {{"lambd", 1.0f}, {"bias", 0.5f}}), {-1.5f, 0.f, 1.5f});
  expect_near(run_op("Mish", {f32({1.f})}), {1.f * std::tanh(std::log1p(std::exp(1.f)))});
  float x = 0.7f;
  float erf_gelu = 0.5f * x * (1.f + std::erf(x / std::sqrt(2.f)));
  float tanh_gelu = 0.5f * x * (1.f + std::tanh(0.7978845608f * (x + 0.044715f * x * x * x)));
  expect_near(run_op("Gelu", {f32({x})}), {erf_gelu});
  expect_near(run_op("Gelu", {f32({x})}, {{"approximate", "tanh"}}), {tanh_gelu});
  expect_near(run_op("Gelu", {f32({x})}, {}, 17, "com.microsoft"), {erf_gelu});
  expect_near(run_op("FastGelu", {f32({x - 0.5f, x - 1.f}, {1, 2}), f32({0.5f, 1.f})}, {}, 17, "com.microsoft"),
              {tanh_gelu, tanh_gelu});
  // PRelu: slope broadcast over the last dim
  expect_near(run_op("PRelu", {f32({-1.f, -1.f, 2.f, -4.f}, {2, 2}), f32({0.1f, 0.5f})}), {-0.1f, -0.5f, 2.f, -2.f});
}

// ---------------- binary arithmetic ----------------

TEST(OpsElementwise, Arithmetic) {
  Tensor a = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  expect_near(run_op("Add", {a, f32({10, 20, 30})}), {11, 22, 33, 14, 25, 36});
  expect_near(run_op("Sub", {a, f32({1, 2}, {2, 1})}), {0, 1, 2, 2, 3, 4});
  expect_near(run_op("Mul", {f32({2}, {}), a}), {2, 4, 6, 8, 10, 12});
  expect_near(run_op("Div", {a, f32({2.f})}), {0.5f, 1, 1.5f, 2, 2.5f, 3});
  // 3-d broadcast of [2,1,3] and [1,2,1]
  Tensor r = run_op("Add", {f32({1, 2, 3, 4, 5, 6}, {2, 1, 3}), f32({10, 20}, {1, 2, 1})});
  EXPECT_EQ(r.shape(), (Shape{2, 2, 3}));
  expect_near(r, {11, 12, 13, 21, 22, 23, 14, 15, 16, 24, 25, 26});
  // integer wrap-around and truncating division
  EXPECT_EQ(values<uint8_t>(run_op("Sub", {vec<uint8_t>({1, 200}), vec<uint8_t>({2, 100})})),
            (std::vector<uint8_t>{255, 100}));
  EXPECT_EQ(values<int32_t>(run_op("Div", {vec<int32_t>({-7, 7, 7}), vec<int32_t>({2, -2, 2})})),
            (std::vector<int32_t>{-3, -3, 3}));
  EXPECT_EQ(values<int64_t>(run_op("Mul", {vec<int64_t>({3, -4}), vec<int64_t>({5, 6})})),
            (std::vector<int64_t>{15, -24}));
  // f16
  Tensor h = run_op("Add", {vec<float16>({float16(1.5f)}), vec<float16>({float16(2.25f)})});
  expect_near(h, {3.75f});
}

TEST(OpsElementwise, ModPowBitShift) {
  EXPECT_EQ(values<int32_t>(run_op("Mod", {vec<int32_t>({-4, 7, 5, -7}), vec<int32_t>({3, -3, 8, -3})})),
            (std::vector<int32_t>{2, -2, 5, -1}));
  EXPECT_EQ(
      values<int32_t>(run_op("Mod", {vec<int32_t>({-4, 7, 5, -7}), vec<int32_t>({3, -3, 8, -3})}, {{"fmod", 1}})),
      (std::vector<int32_t>{-1, 1, 5, -1}));
  expect_near(run_op("Mod", {f32({-4.5f, 7.f}), f32({2.f, -3.f})}, {{"fmod", 1}}), {-0.5f, 1.f});
  expect_near(run_op("Pow", {f32({2.f, 3.f}), f32({3.f, 0.5f})}), {8.f, std::sqrt(3.f)});
  expect_near(run_op("Pow", {f32({2.f, 3.f}), vec<int64_t>({3, 2})}), {8.f, 9.f});
  Tensor pi = run_op("Pow", {vec<int64_t>({2, 3, -2}), vec<int64_t>({10, 3, 3})});
  EXPECT_EQ(pi.dtype(), DType::i64);
  EXPECT_EQ(values<int64_t>(pi), (std::vector<int64_t>{1024, 27, -8}));
  EXPECT_EQ(values<int32_t>(run_op("Pow", {vec<int32_t>({2, 3}), f32({4.f, 2.f})})), (std::vector<int32_t>{16, 9}));
  EXPECT_EQ(values<uint8_t>(run_op("BitShift", {vec<uint8_t>({1, 16, 255}), vec<uint8_t>({3, 2, 9})},
                                   {{"direction", "LEFT"}})),
            (std::vector<uint8_t>{8, 64, 0}));
  EXPECT_EQ(values<uint32_t>(run_op("BitShift", {vec<uint32_t>({16, 255}), vec<uint32_t>({2})},
                                    {{"direction", "RIGHT"}})),
            (std::vector<uint32_t>{4, 63}));
}

TEST(OpsElementwise, Variadic) {
  Tensor a = f32({1, 5, 3}, {3});
  Tensor b = f32({4, 2, 6}, {3});
  Tensor c = f32({0}, {1});
  expect_near(run_op("Max", {a, b, c}), {4, 5, 6});
  expect_near(run_op("Min", {a, b, c}), {0, 0, 0});
  expect_near(run_op("Min", {a, b}), {1, 2, 3});
  expect_near(run_op("Sum", {a, b, c}), {5, 7, 9});
  expect_near(run_op("Mean", {a, b}), {2.5f, 3.5f, 4.5f});
  expect_near(run_op("Sum", {a}), {1, 5, 3});
  // broadcast [2,1] with [3] -> [2,3]
  Tensor m = run_op("Max", {f32({1, 4}, {2, 1}), f32({0, 2, 5})});
  EXPECT_EQ(m.shape(), (Shape{2, 3}));
  expect_near(m, {1, 2, 5, 4, 4, 5});
  EXPECT_EQ(values<uint16_t>(run_op("Min", {vec<uint16_t>({1, 9}), vec<uint16_t>({3, 2})})),
            (std::vector<uint16_t>{1, 2}));
  float nan = std::nanf("");
  expect_near(run_op("Max", {f32({nan, 1.f}), f32({1.f, nan})}), {nan, nan});
}

TEST(OpsElementwise, CompareLogicWhere) {
  Tensor a = f32({1, 2, 3});
  Tensor b = f32({2.f});
  EXPECT_EQ(values<bool>(run_op("Greater", {a, b})), (std::vector<bool>{false, false, true}));
  EXPECT_EQ(values<bool>(run_op("GreaterOrEqual", {a, b})), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(values<bool>(run_op("Less", {a, b})), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(values<bool>(run_op("LessOrEqual", {a, b})), (std::vector<bool>{true, true, false}));
  EXPECT_EQ(values<bool>(run_op("Equal", {vec<int64_t>({1, 2}), vec<int64_t>({1, 3})})),
            (std::vector<bool>{true, false}));
  Tensor t = vec<bool>({true, true, false, false});
  Tensor u = vec<bool>({true, false, true, false});
  EXPECT_EQ(values<bool>(run_op("And", {t, u})), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(values<bool>(run_op("Or", {t, u})), (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(values<bool>(run_op("Xor", {t, u})), (std::vector<bool>{false, true, true, false}));
  // Where with 3-way broadcast: cond [2,1], X [3], Y scalar
  Tensor w = run_op("Where", {vec<bool>({true, false}, {2, 1}), vec<int32_t>({1, 2, 3}), vec<int32_t>({-1}, {})});
  EXPECT_EQ(w.shape(), (Shape{2, 3}));
  EXPECT_EQ(values<int32_t>(w), (std::vector<int32_t>{1, 2, 3, -1, -1, -1}));
}

TEST(OpsElementwise, LegacyBroadcast) {
  // opset 6: B [3] aligned at axis 0 of A [3,2]
  Tensor r = run_op("Add", {f32({1, 2, 3, 4, 5, 6}, {3, 2}), f32({10, 20, 30})}, {{"broadcast", 1}, {"axis", 0}}, 6);
  EXPECT_EQ(r.shape(), (Shape{3, 2}));
  expect_near(r, {11, 12, 23, 24, 35, 36});
}

// ---------------- Clip / Cast ----------------

TEST(OpsElementwise, Clip) {
  Tensor x = f32({-3, -1, 0, 1, 3});
  expect_near(run_op("Clip", {x, f32({-1.f}, {}), f32({2.f}, {})}), {-1, -1, 0, 1, 2});
  expect_near(run_op("Clip", {x, Tensor(), f32({0.5f}, {})}), {-3, -1, 0, 0.5f, 0.5f});
  expect_near(run_op("Clip", {x}), {-3, -1, 0, 1, 3});
  // opset 6 attributes
  expect_near(run_op("Clip", {x}, {{"min", -2.0f}, {"max", 0.5f}}, 6), {-2, -1, 0, 0.5f, 0.5f});
  // integers, and min > max gives max everywhere
  EXPECT_EQ(values<int8_t>(run_op("Clip", {vec<int8_t>({-100, 5, 100}), vec<int8_t>({-10}, {}), vec<int8_t>({10}, {})})),
            (std::vector<int8_t>{-10, 5, 10}));
  expect_near(run_op("Clip", {x, f32({2.f}, {}), f32({1.f}, {})}), {1, 1, 1, 1, 1});
}

TEST(OpsElementwise, Cast) {
  Tensor x = f32({-1.7f, 0.f, 2.9f, 300.f});
  EXPECT_EQ(values<int32_t>(run_op("Cast", {x}, {{"to", 6}})), (std::vector<int32_t>{-1, 0, 2, 300}));
  EXPECT_EQ(values<bool>(run_op("Cast", {x}, {{"to", 9}})), (std::vector<bool>{true, false, true, true}));
  EXPECT_EQ(values<int64_t>(run_op("Cast", {vec<bool>({true, false})}, {{"to", 7}})), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(values<uint8_t>(run_op("Cast", {vec<int64_t>({257, -1})}, {{"to", 2}})), (std::vector<uint8_t>{1, 255}));
  Tensor h = run_op("Cast", {f32({1.0f / 3.0f, 65504.f, 1e6f})}, {{"to", 10}});
  EXPECT_EQ(h.dtype(), DType::f16);
  EXPECT_EQ(h.data<float16>()[0].bits, 0x3555);  // nearest half to 1/3
  EXPECT_EQ(h.data<float16>()[1].bits, 0x7bff);
  EXPECT_EQ(h.data<float16>()[2].bits, 0x7c00);  // overflow -> inf
  Tensor b = run_op("Cast", {f32({1.0f, 3.140625f})}, {{"to", 16}});
  EXPECT_EQ(b.dtype(), DType::bf16);
  expect_near(b, {1.0f, 3.140625f});
  Tensor d = run_op("Cast", {vec<float16>({float16(0.5f)})}, {{"to", 11}});
  EXPECT_EQ(d.data<double>()[0], 0.5);
  // CastLike: target type from input 1
  Tensor cl = run_op("CastLike", {f32({2.5f, -3.5f}), vec<int16_t>({0})});
  EXPECT_EQ(values<int16_t>(cl), (std::vector<int16_t>{2, -3}));
}

// ---------------- errors ----------------

TEST(OpsElementwise, Errors) {
  // incompatible shapes
  EXPECT_THROW(run_op("Add", {f32({1, 2, 3}), f32({1, 2})}), Error);
  // mismatched dtypes
  EXPECT_THROW(run_op("Mul", {f32({1.f}), vec<int32_t>({1})}), Error);
  // wrong dtype for the op
  EXPECT_THROW(run_op("Sqrt", {vec<int32_t>({4})}), Error);
  EXPECT_THROW(run_op("And", {f32({1.f}), f32({1.f})}), Error);
  EXPECT_THROW(run_op("Neg", {vec<uint8_t>({1})}), Error);
  // integer division / modulo by zero
  EXPECT_THROW(run_op("Div", {vec<int32_t>({1}), vec<int32_t>({0})}), Error);
  EXPECT_THROW(run_op("Mod", {vec<int64_t>({1}), vec<int64_t>({0})}), Error);
  // float Mod requires fmod=1
  EXPECT_THROW(run_op("Mod", {f32({1.f}), f32({2.f})}), Error);
  // bad attributes
  EXPECT_THROW(run_op("Cast", {f32({1.f})}, {{"to", 14}}), Error);  // COMPLEX64: a type kiln does not have
  EXPECT_EQ(run_op("Cast", {f32({1.5f})}, {{"to", 8}}).data<std::string>()[0], "1.5");  // STRING
  EXPECT_THROW(run_op("Cast", {Tensor::from_vector<std::string>({"x1"}, {1})}, {{"to", 1}}), Error);  // not a number
  EXPECT_THROW(run_op("Cast", {f32({1.f})}, {{"to", 99}}), Error);
  EXPECT_THROW(run_op("Cast", {f32({1.f})}), Error);  // `to` is required
  EXPECT_THROW(run_op("BitShift", {vec<uint8_t>({1}), vec<uint8_t>({1})}, {{"direction", "UP"}}), Error);
  EXPECT_THROW(run_op("Gelu", {f32({1.f})}, {{"approximate", "fast"}}), Error);
  EXPECT_THROW(run_op("Relu", {f32({1.f})}, {{"alpha", 1.0f}}), Error);  // unknown attribute
  // Clip bounds must be scalars of the input's type
  EXPECT_THROW(run_op("Clip", {f32({1.f, 2.f}), f32({0.f, 1.f})}), Error);
  // PRelu slope must broadcast to X
  EXPECT_THROW(run_op("PRelu", {f32({1.f, 2.f}), f32({1.f, 2.f, 3.f})}), Error);
  // Where condition must be bool
  EXPECT_THROW(run_op("Where", {f32({1.f}), f32({1.f}), f32({1.f})}), Error);
}

TEST(OpsElementwise, SymbolicInference) {
  ir::Graph g;
  g.opset_imports[""] = 17;
  auto* x = g.add_input("x", {DType::f32, ir::PartialShape({ir::Dim::sym("batch"), ir::Dim(3)})});
  auto* y = g.add_input("y", {DType::f32, ir::PartialShape(Shape{3})});
  auto* z = g.add_input("z", {DType::f32, ir::PartialShape::unknown_rank()});
  ir::Node* add = g.add_node("Add", {x, y}, 1, "add");
  ir::Node* gt = g.add_node("Greater", {add->output(0), y}, 1, "gt");
  ir::Node* cast = g.add_node("Cast", {gt->output(0)}, 1, "cast");
  cast->attrs["to"] = 10;
  ir::Node* mul = g.add_node("Mul", {x, z}, 1, "mul");
  ir::infer_shapes(g);
  EXPECT_EQ(add->output(0)->type.shape.to_string(), "[batch,3]");
  EXPECT_EQ(gt->output(0)->type.dtype, DType::boolean);
  EXPECT_EQ(cast->output(0)->type.dtype, DType::f16);
  EXPECT_EQ(cast->output(0)->type.shape.to_string(), "[batch,3]");
  EXPECT_FALSE(mul->output(0)->type.shape.rank_known);
  // a static mismatch is reported at inference time
  ir::Graph bad;
  bad.opset_imports[""] = 17;
  auto* a = bad.add_input("a", {DType::f32, ir::PartialShape(Shape{2, 3})});
  auto* b = bad.add_input("b", {DType::f32, ir::PartialShape(Shape{4})});
  bad.add_node("Sub", {a, b}, 1, "sub");
  EXPECT_THROW(ir::infer_shapes(bad), Error);
}

TEST(FastErf, MatchesDoubleErfAcrossTheRangeAndSpecialValues) {
  std::vector<float> x;
  for (float v = -12.0f; v <= 12.0f; v += 0.00037f) x.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-8f, 0.4999999f, 0.5f, 1e30f, std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::denorm_min()})
    x.push_back(v);
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  std::vector<float> y(x.size());
  kiln::ops::erf_f32(x.data(), y.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    double want = std::erf(static_cast<double>(x[i]));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(y[i]));
      continue;
    }
    double err = std::fabs(y[i] - want);
    ASSERT_LE(err, 4e-7) << "erf(" << x[i] << ") = " << y[i] << ", want " << want;
    if (std::fabs(want) >= std::numeric_limits<float>::min()) {  // denormals have no relative precision
      ASSERT_LE(err / std::fabs(want), 1e-6) << "erf(" << x[i] << ")";
    }
    ASSERT_EQ(std::signbit(y[i]), std::signbit(x[i])) << "erf(" << x[i] << ")";
  }
}

TEST(FastErf, ErfOpUsesItForF32AndStdErfForF64) {
  Tensor x32 = Tensor::from_vector<float>({-2.5f, -0.3f, 0.0f, 0.7f, 3.0f}, {5});
  Tensor x64 = Tensor::from_vector<double>({-2.5, -0.3, 0.0, 0.7, 3.0}, {5});
  Tensor y32 = run_op("Erf", {x32});
  Tensor y64 = run_op("Erf", {x64});
  for (int i = 0; i < 5; ++i) {
    EXPECT_NEAR(y32.data<float>()[i], std::erf(x64.data<double>()[i]), 4e-7);
    EXPECT_DOUBLE_EQ(y64.data<double>()[i], std::erf(x64.data<double>()[i]));
  }
}

}  // namespace test_ops_elementwise
