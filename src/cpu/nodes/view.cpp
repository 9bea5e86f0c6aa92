// View: Reshape, Flatten, Squeeze, Unsqueeze, Identity and inference-mode Dropout change
// only the shape of row-major data, so their output shares the input's memory: no copy,
// no kernel. The graph aliases the output edge to the input's buffer.
#include <string_view>

#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

namespace {

class ViewNode : public Node {
 public:
  explicit ViewNode(const ir::Node& n) : Node(n) {}
  const char* type() const override { return "View"; }
  NodeKind kind() const override { return NodeKind::View; }
  int output_aliases_input() const override { return 0; }

  std::vector<InputLayout> prepare() override {
    impl = "view";
    outputs[0]->blocked.reset();
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    req[0] = InputLayout::plain();
    return req;
  }
  void execute(dnnl::stream&) override {}
};

}  // namespace

bool view_supports(const ir::Node& n) {
  // views (a length compared before the characters: asked of every node of every new shape's graph)
  static constexpr std::string_view ops[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"};
  if (!n.is_onnx_domain() || n.num_outputs() != 1 || !n.input(0)) return false;
  bool known = false;
  for (std::string_view op : ops) known = known || std::string_view(n.op_type()) == op;
  if (!known) return false;
  if (n.op_type() == "Dropout") {
    // inference only: no training_mode input, or a constant false one
    const ir::Value* tm = n.input(2);
    if (tm && (!tm->is_constant() || tm->constant().to_i64().at(0) != 0)) return false;
  }
  const ir::Value *in = n.input(0), *out = n.output(0);
  return in->type.dtype == out->type.dtype && in->type.shape.is_static() && out->type.shape.is_static() &&
         in->type.shape.elements() == out->type.shape.elements();
}

std::unique_ptr<Node> make_view_node(const ir::Node& n) { return std::make_unique<ViewNode>(n); }

}  // namespace kiln::cpu
