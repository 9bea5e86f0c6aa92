#include <algorithm>
#include <unordered_map>

#include "snippets/lowered/pass/passes.hpp"

namespace kiln::snippets::lowered::pass {

namespace {

bool defines_vector(const Expression& e) {
  const std::string& t = e.type();
  return e.num_outputs() > 0 && t != "Parameter" && t != "Store" && !is_loop_op(t);
}

}  // namespace

// Every vector value gets an abstract register (its output descriptor's reg, copied to the
// consumers' input descriptors) and a live range [definition, last use] in the linear
// order. A value used inside a loop it was not defined in stays live until that loop ends,
// since every iteration reads it.
void init_live_ranges(LinearIR& lir) {
  std::unordered_map<const Expression*, int64_t> pos;
  std::unordered_map<size_t, int64_t> loop_end;  // loop id -> position of its LoopEnd
  int64_t i = 0;
  for (auto& e : lir.expressions()) {
    pos[e.get()] = i;
    if (e->type() == "LoopEnd") loop_end[static_cast<size_t>(e->op().attr("loop"))] = i;
    ++i;
  }
  int reg = 0;
  for (auto& e : lir.expressions()) {
    e->live_begin = e->live_end = -1;
    if (!defines_vector(*e)) continue;
    e->live_begin = e->live_end = pos[e.get()];
    e->get_output_port_descriptor(0).reg = reg;
    for (const auto& c : e->get_output_port_connector(0)->get_consumers()) {
      Expression* ce = c.get_expr();
      c.get_descriptor().reg = reg;
      int64_t end = pos[ce];
      // Loops of the consumer that the definition is outside of.
      for (size_t k = 0; k < ce->loop_ids.size(); ++k) {
        bool def_inside = k < e->loop_ids.size() && e->loop_ids[k] == ce->loop_ids[k];
        if (!def_inside) {
          end = std::max(end, loop_end[ce->loop_ids[k]]);
          break;
        }
      }
      e->live_end = std::max(e->live_end, end);
    }
    ++reg;
  }
}

}  // namespace kiln::snippets::lowered::pass
