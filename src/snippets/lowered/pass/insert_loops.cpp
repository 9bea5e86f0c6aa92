#include <kiln/error.hpp>

#include "core/strings.hpp"
#include "snippets/lowered/pass/passes.hpp"

namespace kiln::snippets::lowered::pass {

// Explicit LoopBegin / LoopEnd expressions around the expressions of each loop (outer loops
// first, so an inner loop's markers belong to its outer loop).
void insert_loops(LinearIR& lir) {
  for (size_t id = 0; id < lir.loops().size(); ++id) {
    auto first = lir.end(), last = lir.end();
    std::vector<size_t> outer;
    for (auto it = lir.begin(); it != lir.end(); ++it) {
      const auto& ids = (*it)->loop_ids;
      for (size_t k = 0; k < ids.size(); ++k)
        if (ids[k] == id) {
          if (first == lir.end()) {
            first = it;
            outer.assign(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k));
          }
          last = it;
        }
    }
    if (first == lir.end()) continue;  // no body (e.g. emptied)
    for (auto it = first; it != std::next(last); ++it) {
      const auto& ids = (*it)->loop_ids;
      bool in = false;
      for (size_t l : ids) in |= l == id;
      KILN_CHECK(in || is_loop_op((*it)->kind()), cat("InsertLoops: loop ", id, " is not contiguous at ", expr_name(**it),
                                                      " (run FuseLoops first)"));
    }
    Op begin{"LoopBegin", {{"loop", static_cast<double>(id)}}};
    Op end{"LoopEnd", {{"loop", static_cast<double>(id)}}};
    lir.insert_node(first, begin, {}, 0, outer);
    lir.insert_node(std::next(last), end, {}, 0, outer);
  }
}

}  // namespace kiln::snippets::lowered::pass
