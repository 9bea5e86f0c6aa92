#include <map>

#include "snippets/lowered/pass/passes.hpp"

namespace kiln::snippets::lowered::pass {

// For each loop nested in another: where it is the last loop of the enclosing one to move a
// data pointer, its rewind (finalization offset) moves into the enclosing loop's increment of
// that pointer (the rows loop advances by a row and the inner loop rewinds by a row: the
// two cancel and neither emits an add). Runs after CleanRepeatedDataPointerShifts.
void cleanup_loop_offsets(LinearIR& lir) {
  // loop id -> its enclosing loop, from the LoopBegin markers
  std::map<size_t, size_t> parent;
  std::vector<size_t> order;  // inner loops in program order of their LoopEnd
  for (const auto& e : lir.expressions()) {
    if (e->kind() == OpKind::LoopBegin && !e->loop_ids.empty())
      parent[static_cast<size_t>(e->op().attr("loop"))] = e->loop_ids.back();
    if (e->kind() == OpKind::LoopEnd && !e->loop_ids.empty()) order.push_back(static_cast<size_t>(e->op().attr("loop")));
  }
  // the last inner loop (per enclosing loop) moving each pointer
  std::map<std::pair<size_t, std::pair<int, int>>, size_t> last;
  for (size_t id : order)
    for (const auto* ports : {&lir.loops()[id].entry_points, &lir.loops()[id].exit_points})
      for (const auto& p : *ports)
        if (p.is_incremented) last[{parent.at(id), data_pointer(*p.expr)}] = id;
  for (size_t id : order) {
    LoopInfo& inner = lir.loops()[id];
    LoopInfo& outer = lir.loops()[parent.at(id)];
    for (auto* ports : {&inner.entry_points, &inner.exit_points})
      for (auto& p : *ports) {
        if (!p.is_incremented || p.finalization_offset == 0) continue;
        const auto key = data_pointer(*p.expr);
        if (last.at({parent.at(id), key}) != id) continue;
        for (auto* oports : {&outer.entry_points, &outer.exit_points})
          for (auto& q : *oports)
            if (q.is_incremented && data_pointer(*q.expr) == key && outer.increment != 0 &&
                p.finalization_offset % outer.increment == 0) {
              q.ptr_increment += p.finalization_offset / outer.increment;
              p.finalization_offset = 0;
            }
      }
  }
}

}  // namespace kiln::snippets::lowered::pass
