#pragma once
// Building blocks of QDQ test graphs (as quantizers write them) and the comparison their
// results take against the reference executor, shared by the static int8 tests and the
// dynamic-shape ones.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "cpu_test_util.hpp"

namespace kiln::test {

inline Tensor u8_scalar(int v) {
  Tensor t(DType::u8, Shape{});
  t.data<uint8_t>()[0] = static_cast<uint8_t>(v);
  return t;
}

// x -> Q(scale, zp) -> DQ: the value readers take.
inline ir::Value* qdq(ir::Graph& g, ir::Value* x, float scale, int zp, const std::string& name) {
  ir::Value* s = g.add_constant(name + "_s", Tensor::scalar<float>(scale));
  ir::Value* z = g.add_constant(name + "_z", u8_scalar(zp));
  ir::Node* q = g.add_node("QuantizeLinear", {x, s, z}, 1, name + "_q");
  return g.add_node("DequantizeLinear", {q->output(0), s, z}, 1, name + "_dq")->output(0);
}

// A Conv on x_dq (quantized with scale sx) with s8 per-channel weights and an int32 bias, as
// quantizers write them (the weights' and bias' DequantizeLinear nodes).
inline ir::Value* qconv(ir::Graph& g, ir::Value* x_dq, float sx, int64_t ci, int64_t co, int64_t k, uint32_t seed,
                 const std::string& name) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-127, 127);
  Tensor w(DType::i8, Shape{co, ci, k, k});
  for (int64_t i = 0; i < w.size(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(d(rng));
  Tensor ws(DType::f32, Shape{co}), b(DType::i32, Shape{co}), bs(DType::f32, Shape{co});
  Tensor wz(DType::i8, Shape{co}), bz(DType::i32, Shape{co});
  for (int64_t m = 0; m < co; ++m) {
    ws.data<float>()[m] = 0.002f + 0.0003f * static_cast<float>(m);
    bs.data<float>()[m] = sx * ws.data<float>()[m];
    b.data<int32_t>()[m] = static_cast<int32_t>(m * 131 - 900);
    wz.data<int8_t>()[m] = 0;
    bz.data<int32_t>()[m] = 0;
  }
  auto dq = [&](const std::string& n, Tensor q, Tensor s, Tensor z) {
    ir::Node* node = g.add_node("DequantizeLinear", {g.add_constant(n, std::move(q)), g.add_constant(n + "_s", std::move(s)),
                                                     g.add_constant(n + "_z", std::move(z))},
                                1, n + "_dq");
    node->attrs["axis"] = ir::Attribute(int64_t{0});
    return node->output(0);
  };
  ir::Node* c = g.add_node("Conv", {x_dq, dq(name + "_w", w, ws, wz), dq(name + "_b", b, bs, bz)}, 1, name);
  const int64_t p = k / 2;
  c->attrs["pads"] = std::vector<int64_t>{p, p, p, p};
  return c->output(0);
}

// A residual block in QDQ form: x -> QDQ -> conv3x3 -> Relu -> QDQ (a) -> conv3x3 -> Relu -> QDQ
// -> conv1x1 -> QDQ -> Add(a) -> Relu -> QDQ -> MaxPool -> QDQ (same parameters) -> y (f32);
// x [1, 8, 10, 10] unless given (8 channels).
inline std::shared_ptr<ir::Graph> qdq_block(const ir::PartialShape& x_shape = ir::PartialShape(Shape{1, 8, 10, 10})) {
  auto g = make_graph(13);
  ir::Value* x = g->add_input("x", {DType::f32, x_shape});
  ir::Value* xq = qdq(*g, x, 0.02f, 128, "x");
  ir::Value* c1 = qconv(*g, xq, 0.02f, 8, 16, 3, 1, "conv1");
  ir::Value* a = qdq(*g, g->add_node("Relu", {c1}, 1, "relu1")->output(0), 0.01f, 0, "a");
  ir::Value* c2 = qconv(*g, a, 0.01f, 16, 16, 3, 2, "conv2");
  ir::Value* b = qdq(*g, g->add_node("Relu", {c2}, 1, "relu2")->output(0), 0.01f, 0, "b");
  ir::Value* c3 = qconv(*g, b, 0.01f, 16, 16, 1, 3, "conv3");
  ir::Value* c3q = qdq(*g, c3, 0.015f, 120, "c3");
  ir::Value* sum = g->add_node("Add", {c3q, a}, 1, "add")->output(0);
  ir::Value* r = qdq(*g, g->add_node("Relu", {sum}, 1, "relu3")->output(0), 0.012f, 0, "r");
  ir::Node* pool = g->add_node("MaxPool", {r}, 1, "pool");
  pool->attrs["kernel_shape"] = std::vector<int64_t>{2, 2};
  pool->attrs["strides"] = std::vector<int64_t>{2, 2};
  g->add_output(qdq(*g, pool->output(0), 0.012f, 0, "y"));
  return g;
}

// got within `steps` steps of want everywhere, and equal but for at most `fraction` of the
// values (a step apart: not the float rounding of the dequantized value).
inline void expect_within_steps(const Tensor& want, const Tensor& got, double step, int steps, double fraction) {
  ASSERT_EQ(want.shape(), got.shape());
  const auto a = want.to_f64(), b = got.to_f64();
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_LE(std::fabs(a[i] - b[i]), steps * step * 1.001) << "at " << i;
    differ += std::fabs(a[i] - b[i]) > step / 2;
  }
  EXPECT_LE(static_cast<double>(differ), fraction * static_cast<double>(a.size())) << differ << " of " << a.size() << " differ";
}

// got within one step of want everywhere, and equal almost everywhere (a tie rounded the other
// way inside a chain moves a few of the values after it by a step).
inline void expect_equal_but_ties(const Tensor& want, const Tensor& got, double step) {
  expect_within_steps(want, got, step, 1, 0.1);
}

}  // namespace kiln::test
