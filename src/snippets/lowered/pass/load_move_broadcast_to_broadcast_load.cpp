#include "snippets/lowered/pass/passes.hpp"

namespace kiln::snippets::lowered::pass {

// Load (one element) -> BroadcastMove becomes one BroadcastLoad; the loops' memory ports
// move to the new expression.
void load_move_broadcast_to_broadcast_load(LinearIR& lir) {
  std::vector<std::pair<ExpressionPtr, ExpressionPtr>> pairs;
  for (auto& e : lir.expressions()) {
    if (e->kind() != OpKind::BroadcastMove) continue;
    auto src = e->get_input_port_connector(0)->get_source();
    Expression* load = src.get_expr();
    if (load->kind() != OpKind::Load || load->get_output_port_connector(0)->get_consumers().size() != 1) continue;
    pairs.emplace_back(*lir.find(load), e);
  }
  for (const auto& [load, bm] : pairs) {
    Op op{"BroadcastLoad", load->op().attrs};
    auto bl = lir.replace_with_node({load, bm}, op);
    bl->get_input_port_descriptor(0).subtensor = {1, 1};
    for (auto& loop : lir.loops())
      for (auto& p : loop.entry_points)
        if (p.expr == load.get()) p.expr = bl.get();
  }
}

}  // namespace kiln::snippets::lowered::pass
