#include "ir/graph.hpp"
#include "snippets/op.hpp"
#include "snippets/pass/data_flow_passes.hpp"

namespace kiln::snippets::pass {

size_t fuse_mul_add_to_fma(ir::Graph& body) {
  size_t n = 0;
  for (ir::Node* add : body.topo_order()) {
    if (add->op_type() != "Add" || add->num_inputs() != 2) continue;
    for (size_t k = 0; k < 2; ++k) {
      ir::Value* m = add->input(k);
      ir::Node* mul = m->producer();
      if (!mul || mul->op_type() != "Mul" || m->uses().size() != 1 || body.is_output(m)) continue;
      ir::Value* c = add->input(1 - k);
      body.replace_node(add, "FMA", {mul->input(0), mul->input(1), c}, kSnippetsDomain);
      ++n;
      break;
    }
  }
  body.remove_dead();
  return n;
}

}  // namespace kiln::snippets::pass
