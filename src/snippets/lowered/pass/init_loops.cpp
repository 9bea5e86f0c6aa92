#include "snippets/lowered/pass/passes.hpp"

namespace kiln::snippets::lowered::pass {

namespace {

// The descriptor of the memory a port reads or writes ([rows, inner] shape, strides).
const PortDescriptor& memory(const LoopPort& p) {
  const Expression& e = *p.expr;
  return e.kind() == OpKind::Store ? e.get_output_port_descriptor(0) : e.get_input_port_descriptor(0);
}

}  // namespace

// Data pointer shifts, in elements: along the inner dim a pointer advances by one element
// per lane unless the input is broadcast there; along the rows it advances by its row
// stride (the row length when dense; a transposed input's memory step) unless broadcast
// over rows. The inner loop rewinds its pointers when it finishes
// (finalization offset) so the rows loop shifts from the row start.
void init_loops(LinearIR& lir) {
  const int64_t inner = lir.master_shape().at(1);
  for (auto& loop : lir.loops()) {
    for (auto* ports : {&loop.entry_points, &loop.exit_points}) {
      for (auto& p : *ports) {
        const PortDescriptor& m = memory(p);
        const auto& s = m.shape;
        // elements between neighbours along each dim: PropagateLayout's strides, else dense
        const int64_t row_step = m.strides.empty() ? s.at(1) : m.strides.at(0);
        const int64_t lane_step = m.strides.empty() ? 1 : m.strides.at(1);
        if (loop.dim_idx == 0) {
          p.ptr_increment = (s.at(1) == inner && inner > 1) ? lane_step : 0;
          p.finalization_offset = loop.work_amount >= 0 ? -p.ptr_increment * loop.work_amount : 0;
        } else {
          p.ptr_increment = s.at(0) == 1 ? 0 : row_step;
          p.finalization_offset = 0;  // the data pointers are set per kernel call
        }
      }
    }
  }
}

}  // namespace kiln::snippets::lowered::pass
