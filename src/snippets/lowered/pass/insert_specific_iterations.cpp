#include <kiln/error.hpp>

#include <unordered_map>
#include <unordered_set>

#include "snippets/lowered/pass/loop_clone.hpp"
#include "snippets/lowered/pass/passes.hpp"

namespace kiln::snippets::lowered::pass {

// A loop whose static work amount is not a multiple of its increment gets a tail copy of
// its body after it: one iteration of `tail` elements, memory accesses masked to `tail`
// lanes ("count"). The main loop stops rewinding its pointers (the tail continues from
// there and rewinds for both). A main loop with no full iteration is removed.
void insert_specific_iterations(LinearIR& lir) {
  const size_t n_loops = lir.loops().size();
  for (size_t id = 0; id < n_loops; ++id) {
    LoopInfo main = lir.loops()[id];
    if (main.work_amount < 0 || main.is_tail || main.work_amount % main.increment == 0) continue;
    const int64_t tail = main.work_amount % main.increment;
    auto begin = find_loop_marker(lir, OpKind::LoopBegin, id);
    auto end = find_loop_marker(lir, OpKind::LoopEnd, id);
    KILN_CHECK(begin != lir.end() && end != lir.end(), "InsertSpecificIterations: run InsertLoops first");

    LoopInfo t = main;
    t.work_amount = tail;
    t.increment = tail;
    t.is_tail = true;
    const LoopCopy copy = copy_loop_after(lir, id, t, tail);
    const auto& cloned = copy.of;
    const std::vector<size_t> outer = (*begin)->loop_ids;
    LoopInfo& tl = lir.loops()[copy.id];
    // The tail rewinds over the whole work amount; the main loop does not rewind.
    for (auto* ports : {&tl.entry_points, &tl.exit_points})
      for (auto& p : *ports) p.finalization_offset = -p.ptr_increment * main.work_amount;
    LoopInfo& ml = lir.loops()[id];
    ml.work_amount = main.work_amount - tail;
    for (auto* ports : {&ml.entry_points, &ml.exit_points})
      for (auto& p : *ports) p.finalization_offset = 0;

    if (ml.work_amount == 0) {
      // No full vector: only the tail remains. What read the loop's values (Results its
      // Stores, a Horizon its accumulator) reads the tail's.
      std::vector<ExpressionPtr> body(begin, std::next(end));
      std::unordered_set<const Expression*> in_body;
      for (const auto& e : body) in_body.insert(e.get());
      for (const auto& e : body)
        for (size_t o = 0; o < e->num_outputs(); ++o) {
          auto consumers = e->get_output_port_connector(o)->get_consumers();
          for (const auto& c : consumers)
            if (!in_body.count(c.get_expr())) LinearIR::connect(cloned.at(e.get())->get_output_port(o), c);
        }
      for (auto it = body.rbegin(); it != body.rend(); ++it) lir.erase(lir.find(it->get()));
      for (size_t o : outer)
        for (auto* ports : {&lir.loops()[o].entry_points, &lir.loops()[o].exit_points}) {
          std::vector<LoopPort> keep;
          for (const auto& p : *ports) {
            bool removed = false;
            for (const auto& e : body) removed |= p.expr == e.get();
            if (!removed) keep.push_back(p);
          }
          *ports = keep;
        }
      ml.entry_points.clear();
      ml.exit_points.clear();
    }
  }
}

}  // namespace kiln::snippets::lowered::pass
