// InferRequest outputs: a request reuses its output buffers from one inference to the next,
// also across input shapes, unless the caller still holds the previous output tensor, which
// then keeps its values.
#include <gtest/gtest.h>
#include <kiln/core.hpp>

#include "cpu/graph.hpp"
#include "ir/graph.hpp"
#include "ir/op_registry.hpp"
#include "precision_util.hpp"

namespace kiln::test::test_request_outputs {
namespace {

std::shared_ptr<Model> neg_model() {
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = 13;
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{2, 64})});
  g->add_output(g->add_node("Neg", {x}, 1, "neg")->output(0));
  ir::infer_shapes(*g);
  return std::make_shared<Model>(g);
}

// The same with a batch that varies: input [N, 64].
std::shared_ptr<Model> neg_model_any_batch() {
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = 13;
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(std::vector<ir::Dim>{ir::Dim::sym("N"), 64})});
  g->add_output(g->add_node("Neg", {x}, 1, "neg")->output(0));
  ir::infer_shapes(*g);
  return std::make_shared<Model>(g);
}

Tensor filled(float v, int64_t rows = 2) {
  Tensor t(DType::f32, {rows, 64});
  for (int64_t i = 0; i < t.size(); ++i) t.data<float>()[i] = v;
  return t;
}

TEST(RequestOutputs, HeldOutputsKeepTheirValuesOthersAreReused) {
  CompiledModel cm = Core().compile_model(neg_model(), f32_properties());
  InferRequest req = cm.create_infer_request();
  req.set_input_tensor(filled(1.0f));
  req.infer();
  const void* first_buffer = req.get_output_tensor().raw();  // the handle is dropped at once
  req.set_input_tensor(filled(2.0f));
  req.infer();
  EXPECT_EQ(req.get_output_tensor().raw(), first_buffer);  // written over in place
  EXPECT_EQ(req.get_output_tensor().data<float>()[5], -2.0f);

  Tensor held = req.get_output_tensor();
  req.set_input_tensor(filled(3.0f));
  req.infer();
  EXPECT_EQ(held.data<float>()[5], -2.0f);  // the caller's tensor did not change
  EXPECT_NE(req.get_output_tensor().raw(), held.raw());
  EXPECT_EQ(req.get_output_tensor().data<float>()[5], -3.0f);
}

// A new input shape's output goes into the last output's buffer when it fits and no one holds
// it: no fresh pages for each new shape of a model whose output is megabytes.
TEST(RequestOutputs, ANewShapesOutputTakesTheLastBufferWhenItFits) {
  CompiledModel cm = Core().compile_model(neg_model_any_batch(), f32_properties());
  InferRequest req = cm.create_infer_request();
  req.set_input_tensor(filled(1.0f, 4));
  req.infer();
  const void* buffer = req.get_output_tensor().raw();
  req.set_input_tensor(filled(2.0f, 3));  // smaller: the same buffer
  req.infer();
  Tensor out = req.get_output_tensor();
  EXPECT_EQ(out.raw(), buffer);
  EXPECT_EQ(out.shape(), (Shape{3, 64}));
  for (int64_t i = 0; i < out.size(); ++i) ASSERT_EQ(out.data<float>()[i], -2.0f) << i;
  out = Tensor();
  req.set_input_tensor(filled(3.0f, 4));  // back to the first size: still the same buffer
  req.infer();
  EXPECT_EQ(req.get_output_tensor().raw(), buffer);
  EXPECT_EQ(req.get_output_tensor().data<float>()[4 * 64 - 1], -3.0f);

  Tensor held = req.get_output_tensor();  // held across a run of another shape
  req.set_input_tensor(filled(4.0f, 2));
  req.infer();
  EXPECT_NE(req.get_output_tensor().raw(), held.raw());
  EXPECT_EQ(held.shape(), (Shape{4, 64}));
  for (int64_t i = 0; i < held.size(); ++i) ASSERT_EQ(held.data<float>()[i], -3.0f) << i;
  EXPECT_EQ(req.get_output_tensor().shape(), (Shape{2, 64}));
  EXPECT_EQ(req.get_output_tensor().data<float>()[0], -4.0f);
}

TEST(OutputInBuffer, GrowsByAQuarterAndLeavesAHeldBufferToItsHolder) {
  Tensor buffer;
  Tensor a = cpu::output_in_buffer(buffer, DType::f32, {100});
  ASSERT_TRUE(buffer.defined());
  EXPECT_EQ(buffer.byte_size(), 400u);
  EXPECT_EQ(a.raw(), buffer.raw());
  EXPECT_EQ(buffer.use_count(), 2);  // the output holds it
  a = Tensor();
  EXPECT_EQ(buffer.use_count(), 1);

  Tensor b = cpu::output_in_buffer(buffer, DType::i64, {40});  // 320 bytes fit
  EXPECT_EQ(b.raw(), buffer.raw());
  EXPECT_EQ(b.dtype(), DType::i64);
  const void* held = b.raw();
  Tensor c = cpu::output_in_buffer(buffer, DType::f32, {10});  // b still holds the buffer
  EXPECT_NE(c.raw(), held);
  EXPECT_EQ(buffer.byte_size(), 40u);  // a new one, of the size asked
  b = Tensor();
  c = Tensor();

  Tensor d = cpu::output_in_buffer(buffer, DType::f32, {11});  // 44 > 40: grown to 40 + 10
  EXPECT_EQ(buffer.byte_size(), 50u);
  d = Tensor();
  Tensor e = cpu::output_in_buffer(buffer, DType::f32, {100});  // more than a quarter: as asked
  EXPECT_EQ(buffer.byte_size(), 400u);
  EXPECT_EQ(e.shape(), (Shape{100}));
}

}  // namespace
}  // namespace kiln::test::test_request_outputs
