#include "snippets/lowered/pass/passes.hpp"

namespace kiln::snippets::lowered::pass {

namespace {

// The [rows, inner] shape of the memory a port reads or writes.
const std::vector<int64_t>& memory_shape(const LoopPort& p) {
  const Expression& e = *p.expr;
  return e.type() == "Store" ? e.get_output_port_descriptor(0).shape : e.get_input_port_descriptor(0).shape;
}

}  // namespace

// Data pointer shifts, in elements: along the inner dim a pointer advances by one element
// per lane unless the input is broadcast there; along the rows it advances by its row
// length unless broadcast over rows. The inner loop rewinds its pointers when it finishes
// (finalization offset) so the rows loop shifts from the row start.
void init_loops(LinearIR& lir) {
  const int64_t inner = lir.master_shape().at(1);
  for (auto& loop : lir.loops()) {
    for (auto* ports : {&loop.entry_points, &loop.exit_points}) {
      for (auto& p : *ports) {
        const auto& s = memory_shape(p);
        if (loop.dim_idx == 0) {
          p.ptr_increment = (s.at(1) == inner && inner > 1) ? 1 : 0;
          p.finalization_offset = loop.work_amount >= 0 ? -p.ptr_increment * loop.work_amount : 0;
        } else {
          p.ptr_increment = s.at(0) == 1 ? 0 : s.at(1);
          p.finalization_offset = 0;  // the data pointers are set per kernel call
        }
      }
    }
  }
}

}  // namespace kiln::snippets::lowered::pass
