#include <kiln/error.hpp>

#include "core/strings.hpp"
#include "ir/graph.hpp"
#include "snippets/op.hpp"
#include "snippets/pass/data_flow_passes.hpp"

namespace kiln::snippets::pass {

namespace {

bool scalar_value(const ir::Value* v, float& out) {
  if (!v || !v->is_constant()) return false;
  const Tensor& t = v->constant();
  if (t.size() != 1) return false;
  if (t.dtype() == DType::f32) out = t.data<float>()[0];
  else if (t.dtype() == DType::f64) out = static_cast<float>(t.data<double>()[0]);
  else if (t.dtype() == DType::i64) out = static_cast<float>(t.data<int64_t>()[0]);
  else if (t.dtype() == DType::i32) out = static_cast<float>(t.data<int32_t>()[0]);
  else if (t.dtype() == DType::boolean) out = t.data<bool>()[0] ? 1.0f : 0.0f;
  else return false;
  return true;
}

}  // namespace

size_t convert_constants_to_scalars(ir::Graph& body) {
  size_t n = 0;
  for (ir::Node* node : body.topo_order()) {
    if (node->op_type() == "Clip" && node->num_inputs() > 1) {
      auto attrs = node->attrs;
      float v = 0.0f;
      for (size_t i = 1; i < node->num_inputs() && i < 3; ++i) {
        if (!node->has_input(i)) continue;
        KILN_CHECK(scalar_value(node->input(i), v), cat("snippets: ", node->describe(), " needs a constant bound at input ", i));
        attrs[i == 1 ? "min" : "max"] = v;
        ++n;
      }
      ir::Node* c = body.replace_node(node, "Clip", {node->input(0)});
      c->attrs = attrs;
      continue;
    }
    for (size_t i = 0; i < node->num_inputs(); ++i) {
      float v = 0.0f;
      if (!scalar_value(node->input(i), v)) continue;
      ir::Node* s = body.add_node("Scalar", {}, 1, "", kSnippetsDomain);
      s->attrs["value"] = v;
      s->output(0)->type = ir::ValueType{DType::f32, ir::PartialShape(Shape{})};
      body.set_node_input(node, i, s->output(0));
      ++n;
    }
  }
  body.remove_dead();
  return n;
}

}  // namespace kiln::snippets::pass
