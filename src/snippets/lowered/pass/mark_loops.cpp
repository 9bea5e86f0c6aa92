#include <kiln/error.hpp>

#include "snippets/lowered/pass/passes.hpp"

namespace kiln::snippets::lowered::pass {

// Every elementwise expression works on the whole [rows, inner] master shape, so all of
// them share one loop nest: rows outside (work amount given per kernel call), inner dim
// inside (vector-length steps). Parameters, Results and Scalars stay outside any loop.
void mark_loops(LinearIR& lir) {
  const auto& master = lir.master_shape();
  KILN_CHECK(master.size() == 2, "MarkLoops: the master shape must be 2-D [rows, inner]");
  KILN_CHECK(lir.loops().empty(), "MarkLoops: loops are already marked");
  LoopInfo rows;
  rows.work_amount = -1;
  rows.increment = 1;
  rows.dim_idx = 1;
  LoopInfo inner;
  inner.work_amount = master[1];
  inner.increment = lir.vector_length();
  inner.dim_idx = 0;
  const size_t outer_id = lir.add_loop(rows);
  const size_t inner_id = lir.add_loop(inner);
  for (auto& e : lir.expressions()) {
    const std::string& t = e->type();
    if (is_io_op(t) || t == "Scalar") continue;
    e->loop_ids = {outer_id, inner_id};
    for (size_t i = 0; i < e->num_outputs(); ++i) e->get_output_port_descriptor(i).subtensor = {1, lir.vector_length()};
  }
}

}  // namespace kiln::snippets::lowered::pass
