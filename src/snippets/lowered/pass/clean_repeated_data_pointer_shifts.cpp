#include <set>
#include <string>

#include "snippets/lowered/pass/passes.hpp"

namespace kiln::snippets::lowered::pass {

// Ports of one loop that access the same data pointer (several Loads of one Parameter, a
// main and a tail Load seen from the outer loop) must shift it once: the first keeps its
// shifts, the others are marked not incremented.
std::pair<int, int> data_pointer(const Expression& mem) {
  if (mem.op().has("buffer")) return {2, static_cast<int>(mem.op().attr(mem.op().has("ptr") ? "ptr" : "buffer"))};
  const bool store = mem.kind() == OpKind::Store;
  return {store ? 1 : 0, static_cast<int>(mem.op().attr(store ? "result" : "param"))};
}

void clean_repeated_data_pointer_shifts(LinearIR& lir) {
  for (auto& loop : lir.loops()) {
    std::set<std::pair<int, int>> seen;
    for (auto* ports : {&loop.entry_points, &loop.exit_points})
      for (auto& p : *ports) p.is_incremented = seen.insert(data_pointer(*p.expr)).second;
  }
}

}  // namespace kiln::snippets::lowered::pass
