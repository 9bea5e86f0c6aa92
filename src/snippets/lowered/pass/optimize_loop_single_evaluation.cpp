#include "snippets/lowered/pass/passes.hpp"

namespace kiln::snippets::lowered::pass {

void optimize_loop_single_evaluation(LinearIR& lir) {
  for (LoopInfo& l : lir.loops()) {
    if (l.work_amount < 0 || l.work_amount != l.increment || l.evaluate_once) continue;
    for (auto* ports : {&l.entry_points, &l.exit_points})
      for (LoopPort& p : *ports) {
        p.finalization_offset += p.ptr_increment * l.increment;
        p.ptr_increment = 0;
      }
    l.evaluate_once = true;
  }
}

}  // namespace kiln::snippets::lowered::pass
