#include <kiln/error.hpp>

#include <unordered_map>

#include "snippets/lowered/pass/loop_clone.hpp"
#include "snippets/lowered/pass/passes.hpp"

namespace kiln::snippets::lowered::pass {

// A static inner loop with at least `factor` full vectors runs `factor` vectors per
// iteration: its body is copied factor - 1 times and the copies interleaved op by op, so
// each op runs on `factor` independent vectors back to back and their dependency chains
// (a polynomial is a chain of FMAs) overlap in the CPU instead of waiting on each other.
// Copy k's Loads / Stores read and write k vectors further ("offset", elements); only the
// original ones shift the data pointers. What is left over (fewer than `factor` vectors)
// runs in a copy of the original loop right after it, which also takes over the rewind.
void unroll_loops(LinearIR& lir) {
  const int64_t factor = lir.unroll_factor();
  if (factor <= 1) return;
  const size_t n_loops = lir.loops().size();
  for (size_t id = 0; id < n_loops; ++id) {
    const LoopInfo loop = lir.loops()[id];
    if (loop.work_amount < 0 || loop.is_tail || loop.dim_idx != 0) continue;
    const int64_t step = loop.increment * factor;
    if (loop.work_amount < step) continue;
    auto begin = find_loop_marker(lir, OpKind::LoopBegin, id);
    auto end = find_loop_marker(lir, OpKind::LoopEnd, id);
    KILN_CHECK(begin != lir.end() && end != lir.end(), "UnrollLoops: run InsertLoops first");
    bool nested = false;
    for (auto it = std::next(begin); it != end; ++it) nested |= is_loop_op((*it)->kind());
    if (nested) continue;  // innermost loops only

    const int64_t main_work = loop.work_amount / step * step, rest = loop.work_amount - main_work;
    if (rest > 0) {
      LoopInfo r = loop;
      r.work_amount = rest;
      copy_loop_after(lir, id, r);  // keeps the original's finalization offsets: it runs last
      for (auto* ports : {&lir.loops()[id].entry_points, &lir.loops()[id].exit_points})
        for (auto& p : *ports) p.finalization_offset = 0;
    }
    LoopInfo& main = lir.loops()[id];
    main.work_amount = main_work;
    main.increment = step;

    std::unordered_map<const Expression*, int64_t> shift;  // memory expression -> pointer increment
    for (const auto* ports : {&main.entry_points, &main.exit_points})
      for (const auto& p : *ports) shift[p.expr] = p.ptr_increment;
    const std::vector<ExpressionPtr> body(std::next(begin), end);
    std::vector<std::unordered_map<const Expression*, Expression*>> copies(static_cast<size_t>(factor - 1));
    for (const ExpressionPtr& e : body) {
      auto pos = std::next(lir.find(e.get()));
      for (int64_t k = 1; k < factor; ++k) {
        auto& of = copies[static_cast<size_t>(k - 1)];
        std::vector<ExpressionPort> ins;
        for (size_t i = 0; i < e->num_inputs(); ++i) {
          ExpressionPort src = e->get_input_port_connector(i)->get_source();
          auto c = of.find(src.get_expr());
          ins.push_back(c == of.end() ? src : c->second->get_output_port(src.get_index()));
        }
        Op op = e->op();
        if (is_memory_op(op.kind())) {
          auto s = shift.find(e.get());
          const int64_t inc = s == shift.end() ? 0 : s->second;
          op.attrs["offset"] = static_cast<double>(k * loop.increment * inc);
        }
        auto c = lir.insert_node(pos, op, ins, e->num_outputs(), e->loop_ids);
        for (size_t i = 0; i < e->num_inputs(); ++i) c->get_input_port_descriptor(i) = e->get_input_port_descriptor(i);
        for (size_t i = 0; i < e->num_outputs(); ++i) c->get_output_port_descriptor(i) = e->get_output_port_descriptor(i);
        of[e.get()] = c.get();
      }
    }
  }
}

}  // namespace kiln::snippets::lowered::pass
