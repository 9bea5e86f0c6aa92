#include <kiln/error.hpp>

#include <algorithm>
#include <unordered_map>

#include "core/strings.hpp"
#include "snippets/lowered/pass/passes.hpp"

namespace kiln::snippets::lowered::pass {

// Every expression works on rows of the [rows, inner] master shape: all of them are in the
// rows loop (work amount given per kernel call). Vector expressions are also in an inner
// loop (vector-length steps); a reduction splits them into stages: an expression reading a
// Horizon's value (a whole row's max or sum) cannot run in the loop that accumulates it, so it
// goes to the next stage's inner loop. Per-row values (VectorFill, Horizon* and what is
// computed from them alone) sit between the inner loops. Parameters, Results and Scalars stay
// outside any loop. Loop 0 is the rows loop, loop 1 + s the inner loop of stage s.
void mark_loops(LinearIR& lir) {
  const auto& master = lir.master_shape();
  KILN_CHECK(master.size() == 2, "MarkLoops: the master shape must be 2-D [rows, inner]");
  KILN_CHECK(lir.loops().empty(), "MarkLoops: loops are already marked");
  std::unordered_map<const Expression*, int64_t> stage;  // vector expressions
  std::unordered_map<const Expression*, int64_t> ready;  // per-row values: the first stage that may read them
  int64_t stages = 1;
  for (auto& e : lir.expressions()) {
    const OpKind t = e->kind();
    if (is_io_op(t) || t == OpKind::Scalar) continue;
    if (t == OpKind::VectorFill) {
      ready[e.get()] = 0;
      continue;
    }
    if (is_horizon(t)) {
      const Expression* src = e->input_expr(0);
      KILN_CHECK(is_accumulator(src->kind()) && stage.count(src),
                 cat("MarkLoops: ", expr_name(*e), " must read an accumulator (run DecomposeReductions)"));
      ready[e.get()] = stage.at(src) + 1;
      continue;
    }
    bool vector = e->num_inputs() == 0;
    int64_t s = 0;
    for (size_t i = 0; i < e->num_inputs(); ++i) {
      if (is_accumulator(t) && i == 0) continue;  // the accumulator itself: its VectorFill
      const Expression* src = e->input_expr(i);
      if (src->kind() == OpKind::Scalar) continue;
      if (src->kind() == OpKind::Parameter) {
        vector = true;
      } else if (auto it = stage.find(src); it != stage.end()) {
        vector = true;
        s = std::max(s, it->second);
      } else if (auto r = ready.find(src); r != ready.end()) {
        s = std::max(s, r->second);
      }
    }
    bool only_scalars = true;
    for (size_t i = 0; i < e->num_inputs(); ++i) only_scalars &= e->input_expr(i)->kind() == OpKind::Scalar;
    if (vector || only_scalars || is_accumulator(t)) {
      stage[e.get()] = s;
      stages = std::max(stages, s + 1);
    } else {
      ready[e.get()] = s;
    }
  }
  LoopInfo rows;
  rows.work_amount = -1;
  rows.increment = 1;
  rows.dim_idx = 1;
  const size_t rows_id = lir.add_loop(rows);
  for (int64_t s = 0; s < stages; ++s) {
    LoopInfo inner;
    inner.work_amount = master[1];
    inner.increment = lir.vector_length();
    inner.dim_idx = 0;
    lir.add_loop(inner);
  }
  for (auto& e : lir.expressions()) {
    auto it = stage.find(e.get());
    if (it != stage.end()) {
      e->loop_ids = {rows_id, rows_id + 1 + static_cast<size_t>(it->second)};
    } else if (ready.count(e.get())) {
      e->loop_ids = {rows_id};
    } else {
      continue;
    }
    for (size_t i = 0; i < e->num_outputs(); ++i) e->get_output_port_descriptor(i).subtensor = {1, lir.vector_length()};
  }
}

}  // namespace kiln::snippets::lowered::pass
