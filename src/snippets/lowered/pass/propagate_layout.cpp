#include <kiln/error.hpp>

#include "core/strings.hpp"
#include "snippets/lowered/pass/passes.hpp"

namespace kiln::snippets::lowered::pass {

// Memory layouts live on the kernel's Parameters and Results (from the schedule: a transposed
// input's rows are its memory's rows in another order) and on Buffers (dense rows). Each Load /
// BroadcastLoad / Store gets the layout and strides of the memory it accesses, which InitLoops
// turns into pointer increments. A vector Load or Store must find its lanes contiguous.
size_t propagate_layout(LinearIR& lir) {
  size_t n = 0;
  for (auto& e : lir.expressions()) {
    const OpKind t = e->kind();
    if (t != OpKind::Load && t != OpKind::BroadcastLoad && t != OpKind::Store) continue;
    const bool store = t == OpKind::Store;
    PortDescriptor& mine = store ? e->get_output_port_descriptor(0) : e->get_input_port_descriptor(0);
    const PortDescriptor* src = nullptr;
    if (store) {
      const auto& consumers = e->get_output_port_connector(0)->get_consumers();
      KILN_CHECK(consumers.size() == 1, cat("PropagateLayout: ", expr_name(*e), " must feed one Result or Buffer"));
      src = &consumers[0].get_descriptor();
    } else {
      src = &e->get_input_port_connector(0)->get_source().get_descriptor();
    }
    mine.layout = src->layout;
    mine.strides = src->strides;
    if (!mine.strides.empty() && t != OpKind::BroadcastLoad) {
      const bool vector = !mine.subtensor.empty() && mine.subtensor.back() != 1;
      KILN_CHECK(!vector || mine.strides.back() == 1,
                 cat("PropagateLayout: ", expr_name(*e), " accesses lanes ", mine.strides.back(), " elements apart (a vector access needs them contiguous)"));
    }
    ++n;
  }
  return n;
}

}  // namespace kiln::snippets::lowered::pass
