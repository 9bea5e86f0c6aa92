#include <algorithm>

#include "snippets/lowered/pass/passes.hpp"

namespace kiln::snippets::lowered::pass {

// Orders the expressions so those of one loop nest are contiguous: Parameters, then
// expressions outside loops (Scalars), then the loop body, then Results. Every expression of
// this slice has the same loop nest, so fusing is this stable reordering (data dependencies
// hold: nothing outside a loop reads a value computed inside it).
void fuse_loops(LinearIR& lir) {
  auto rank = [](const ExpressionPtr& e) {
    if (e->type() == "Parameter") return 0;
    if (e->type() == "Result") return 3;
    return e->loop_ids.empty() ? 1 : 2;
  };
  std::vector<ExpressionPtr> v(lir.expressions().begin(), lir.expressions().end());
  std::stable_sort(v.begin(), v.end(), [&](const ExpressionPtr& a, const ExpressionPtr& b) { return rank(a) < rank(b); });
  lir.expressions().assign(v.begin(), v.end());
}

}  // namespace kiln::snippets::lowered::pass
