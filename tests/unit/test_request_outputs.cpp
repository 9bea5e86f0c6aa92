// InferRequest outputs: a request reuses its output buffers from one inference to the next
// unless the caller still holds the previous output tensor, which then keeps its values.
#include <gtest/gtest.h>
#include <kiln/core.hpp>

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

Tensor filled(float v) {
  Tensor t(DType::f32, {2, 64});
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

}  // namespace
}  // namespace kiln::test::test_request_outputs
