#include <algorithm>
#include <tuple>
#include <unordered_map>

#include "snippets/lowered/pass/passes.hpp"

namespace kiln::snippets::lowered::pass {

// Orders the expressions so that each loop's are contiguous: Parameters, then expressions
// outside loops (Scalars), then the rows loop stage by stage - a stage's VectorFills, its
// inner loop's body, its Horizons and the per-row values computed from them - then Results.
// All vector expressions of a stage share one inner loop (MarkLoops gave them its id), so
// fusing is this stable reordering: a stage only reads values of earlier stages, and within
// one key the topological order of the list is kept.
void fuse_loops(LinearIR& lir) {
  using Key = std::tuple<int, size_t, int>;  // (section, inner loop, place around it)
  std::unordered_map<const Expression*, Key> key;
  for (const auto& e : lir.expressions()) {
    const OpKind t = e->kind();
    Key k;
    if (t == OpKind::Parameter) {
      k = {0, 0, 0};
    } else if (t == OpKind::Result) {
      k = {3, 0, 0};
    } else if (e->loop_ids.empty()) {
      k = {1, 0, 0};
    } else if (e->loop_ids.size() >= 2) {
      k = {2, e->loop_ids[1], 1};
    } else if (t == OpKind::VectorFill) {
      k = {2, 0, 0};  // placed by its accumulator below
    } else if (is_horizon(t)) {
      k = {2, e->input_expr(0)->loop_ids.at(1), 2};
    } else {  // per-row: after the values it reads
      k = {2, 0, 3};
      for (size_t i = 0; i < e->num_inputs(); ++i) {
        auto it = key.find(e->input_expr(i));
        if (it != key.end() && std::get<0>(it->second) == 2) k = std::max(k, Key{2, std::get<1>(it->second), 3});
      }
    }
    key[e.get()] = k;
  }
  for (const auto& e : lir.expressions())
    if (is_accumulator(e->kind())) key[e->input_expr(0)] = {2, e->loop_ids.at(1), 0};
  std::vector<ExpressionPtr> v(lir.expressions().begin(), lir.expressions().end());
  std::stable_sort(v.begin(), v.end(), [&](const ExpressionPtr& a, const ExpressionPtr& b) { return key.at(a.get()) < key.at(b.get()); });
  lir.reorder(v);
}

}  // namespace kiln::snippets::lowered::pass
