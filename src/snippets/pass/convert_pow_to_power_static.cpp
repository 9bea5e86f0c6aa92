#include "ir/graph.hpp"
#include "snippets/op.hpp"
#include "snippets/pass/data_flow_passes.hpp"

namespace kiln::snippets::pass {

size_t convert_pow_to_power_static(ir::Graph& body) {
  size_t n = 0;
  for (ir::Node* node : body.topo_order()) {
    if (node->op_type() != "Pow" || node->num_inputs() != 2) continue;
    const ir::Node* e = node->input(1)->producer();
    if (!e || e->op_type() != "Scalar") continue;
    const float p = e->attr_f("value");
    ir::Node* ps = body.replace_node(node, "PowerStatic", {node->input(0)}, kSnippetsDomain);
    ps->attrs["power"] = p;
    ++n;
  }
  body.remove_dead();
  return n;
}

}  // namespace kiln::snippets::pass
