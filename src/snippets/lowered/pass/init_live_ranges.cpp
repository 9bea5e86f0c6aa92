#include <kiln/error.hpp>

#include <algorithm>
#include <unordered_map>

#include "core/strings.hpp"
#include "snippets/lowered/pass/passes.hpp"

namespace kiln::snippets::lowered::pass {

namespace {

bool defines_vector(const Expression& e) {
  const OpKind t = e.kind();
  return e.num_outputs() > 0 && t != OpKind::Parameter && t != OpKind::Store && t != OpKind::Buffer && !is_loop_op(t);
}

}  // namespace

// Every vector value gets an abstract register (its output descriptor's reg, copied to the
// consumers' input descriptors) and a live range [definition, last use] in the linear
// order. A value used inside a loop it was not defined in stays live until that loop ends,
// since every iteration reads it. An accumulator defines no register of its own: it updates
// its VectorFill's in place, whose range then also covers the accumulator's readers.
void init_live_ranges(LinearIR& lir) {
  std::unordered_map<const Expression*, int64_t> pos;
  std::unordered_map<size_t, int64_t> loop_end;  // loop id -> position of its LoopEnd
  int64_t i = 0;
  for (auto& e : lir.expressions()) {
    pos[e.get()] = i;
    if (e->kind() == OpKind::LoopEnd) loop_end[static_cast<size_t>(e->op().attr("loop"))] = i;
    ++i;
  }
  std::unordered_map<const Expression*, Expression*> owner;  // value -> the expression whose register holds it
  int reg = 0;
  for (auto& e : lir.expressions()) {
    e->live_begin = e->live_end = -1;
    if (!defines_vector(*e)) continue;
    Expression* def = e.get();
    if (is_accumulator(e->kind())) {
      auto it = owner.find(e->input_expr(0));
      KILN_CHECK(it != owner.end(), cat("InitLiveRanges: ", expr_name(*e), " accumulates into a value without a register"));
      def = it->second;
      e->get_output_port_descriptor(0).reg = def->get_output_port_descriptor(0).reg;
    } else {
      def->live_begin = def->live_end = pos[e.get()];
      e->get_output_port_descriptor(0).reg = reg++;
    }
    owner[e.get()] = def;
    for (const auto& c : e->get_output_port_connector(0)->get_consumers()) {
      Expression* ce = c.get_expr();
      c.get_descriptor().reg = e->get_output_port_descriptor(0).reg;
      int64_t end = pos[ce];
      // Loops of the consumer that the definition is outside of.
      for (size_t k = 0; k < ce->loop_ids.size(); ++k) {
        bool def_inside = k < def->loop_ids.size() && def->loop_ids[k] == ce->loop_ids[k];
        if (!def_inside) {
          end = std::max(end, loop_end[ce->loop_ids[k]]);
          break;
        }
      }
      def->live_end = std::max(def->live_end, end);
    }
  }
}

}  // namespace kiln::snippets::lowered::pass
