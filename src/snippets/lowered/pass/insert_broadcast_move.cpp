#include "snippets/lowered/pass/passes.hpp"

namespace kiln::snippets::lowered::pass {

// A Load of an input that is constant along the inner dim (its shape has inner 1 while
// the master shape's is larger) reads one element; a BroadcastMove then fills the vector.
void insert_broadcast_move(LinearIR& lir) {
  const int64_t inner = lir.master_shape().at(1);
  if (inner == 1) return;
  std::vector<ExpressionPtr> loads;
  for (auto& e : lir.expressions())
    if (e->kind() == OpKind::Load && e->get_input_port_descriptor(0).shape.at(1) == 1) loads.push_back(e);
  for (const auto& load : loads) {
    load->get_input_port_descriptor(0).subtensor = {1, 1};
    load->get_output_port_descriptor(0).subtensor = {1, 1};
    auto consumers = load->get_output_port_connector(0)->get_consumers();
    auto bm = lir.insert_node(std::next(lir.find(load.get())), Op{"BroadcastMove", {}}, {load->get_output_port(0)}, 1,
                              load->loop_ids);
    auto& out = bm->get_output_port_descriptor(0);
    out.shape = {load->get_output_port_descriptor(0).shape.at(0), inner};
    out.subtensor = {1, lir.vector_length()};
    for (const auto& c : consumers) LinearIR::connect(bm->get_output_port(0), c);
  }
}

}  // namespace kiln::snippets::lowered::pass
