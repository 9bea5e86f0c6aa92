#include "frontend/onnx/opset_normalize.hpp"

#include "core/strings.hpp"

namespace kiln::frontend {

namespace {

// Moves int-list attribute `attr` of node n to input `index` as an i64 constant.
// When the attribute is absent the input stays absent (optional input).
void attr_to_input(ir::Graph& g, ir::Node* n, const std::string& attr, size_t index) {
  if (!n->has_attr(attr)) return;
  std::vector<int64_t> v = n->attr_ints(attr);
  n->attrs.erase(attr);
  while (n->num_inputs() < index) g.append_node_input(n, nullptr);
  ir::Value* c = g.add_constant(g.unique_name(n->name() + "_" + attr),
                                Tensor::from_vector<int64_t>(v, Shape{static_cast<int64_t>(v.size())}));
  g.set_node_input(n, index, c);
}

}  // namespace

void normalize_opset(ir::Graph& g) {
  for (ir::Node* n : g.nodes()) {
    if (!n->is_onnx_domain()) continue;
    const int v = n->opset();
    const std::string& op = n->op_type();
    if (v < 7) {
      n->attrs.erase("is_test");
      n->attrs.erase("consumed_inputs");
    }
    if (op == "Split" && v < 13) {
      attr_to_input(g, n, "split", 1);
    } else if ((op == "Squeeze" || op == "Unsqueeze") && v < 13) {
      attr_to_input(g, n, "axes", 1);
    } else if (op == "ReduceSum" && v < 13) {
      attr_to_input(g, n, "axes", 1);
    } else if (op == "Slice" && v < 10) {
      KILN_CHECK(n->has_attr("starts") && n->has_attr("ends"),
                 cat(n->describe(), ": Slice (opset ", v, ") needs attributes 'starts' and 'ends'"));
      attr_to_input(g, n, "starts", 1);
      attr_to_input(g, n, "ends", 2);
      attr_to_input(g, n, "axes", 3);
    } else if (op == "Pad" && v < 11) {
      if (n->has_attr("paddings") && !n->has_attr("pads")) {  // opset 1 name
        n->attrs["pads"] = n->attrs["paddings"];
        n->attrs.erase("paddings");
      }
      KILN_CHECK(n->has_attr("pads"), cat(n->describe(), ": Pad (opset ", v, ") needs attribute 'pads'"));
      attr_to_input(g, n, "pads", 1);
    } else if (op == "DFT" && v < 20) {
      // DFT-17: attribute axis (default 1); DFT-20: input 2 (default -2)
      const int64_t axis = n->attr_i("axis", 1);
      n->attrs.erase("axis");
      while (n->num_inputs() < 2) g.append_node_input(n, nullptr);
      g.set_node_input(n, 2, g.add_constant(g.unique_name(n->name() + "_axis"), Tensor::scalar<int64_t>(axis)));
    } else if (op == "Resize" && v == 10 && n->num_inputs() == 2) {
      ir::Value* scales = n->input(1);
      g.set_node_input(n, 1, nullptr);
      g.set_node_input(n, 2, scales);
    }
  }
}

}  // namespace kiln::frontend
