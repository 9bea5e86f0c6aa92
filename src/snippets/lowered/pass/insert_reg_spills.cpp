#include <kiln/error.hpp>

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "core/strings.hpp"
#include "snippets/lowered/pass/passes.hpp"

namespace kiln::snippets::lowered::pass {

namespace {

struct Pressure {
  Expression* at = nullptr;           // the definition that finds no free register
  std::vector<Expression*> live;      // the values holding all registers there
};

// The linear scan of AssignRegisters without assigning: the first definition that would
// find every register taken (at == nullptr: none).
Pressure first_overflow(LinearIR& lir, int num_regs) {
  std::vector<Expression*> defs;
  for (auto& e : lir.expressions())
    if (e->live_begin >= 0) defs.push_back(e.get());
  std::stable_sort(defs.begin(), defs.end(), [](auto* a, auto* b) { return a->live_begin < b->live_begin; });
  std::vector<Expression*> active;
  for (Expression* e : defs) {
    active.erase(std::remove_if(active.begin(), active.end(), [&](Expression* a) { return a->live_end <= e->live_begin; }),
                 active.end());
    if (static_cast<int>(active.size()) >= num_regs) return {e, active};
    active.push_back(e);
  }
  return {};
}

}  // namespace

// While more values are live at once than there are registers: at the first definition
// that finds none free, the live value whose next use is farthest (Belady) gives its
// register up until then. A Scalar is simply emitted again before those uses (its constant
// is in memory anyway); any other value is stored to a stack slot right after its
// definition (RegSpillBegin) and loaded back right before its next use (RegSpillEnd),
// which feeds every later use.
size_t insert_reg_spills(LinearIR& lir, int num_regs) {
  size_t spills = 0, slots = 0;
  for (int guard = 0; guard < 4096; ++guard) {
    init_live_ranges(lir);
    const Pressure p = first_overflow(lir, num_regs);
    if (!p.at) return spills;
    const int64_t here = p.at->live_begin;
    std::unordered_map<const Expression*, int64_t> pos;
    int64_t i = 0;
    for (auto& e : lir.expressions()) pos[e.get()] = i++;
    // the candidate whose next use after `here` is farthest
    Expression* victim = nullptr;
    int64_t farthest = -1;
    for (Expression* v : p.live) {
      int64_t next = std::numeric_limits<int64_t>::max();
      for (const auto& c : v->get_output_port_connector(0)->get_consumers())
        if (pos.at(c.get_expr()) > here) next = std::min(next, pos.at(c.get_expr()));
      if (next == std::numeric_limits<int64_t>::max()) continue;  // live across a loop back edge only
      bool accumulated = false;  // an accumulator updates it in place, every iteration
      for (const auto& c : v->get_output_port_connector(0)->get_consumers()) accumulated |= is_accumulator(c.get_expr()->kind());
      if (accumulated) continue;
      if (next > farthest) {
        farthest = next;
        victim = v;
      }
    }
    KILN_CHECK(victim, cat("InsertRegSpills: no value can give its register up at ", expr_name(*p.at)));
    std::vector<ExpressionPort> later;
    for (const auto& c : victim->get_output_port_connector(0)->get_consumers())
      if (pos.at(c.get_expr()) > here) later.push_back(c);
    std::sort(later.begin(), later.end(), [&](const ExpressionPort& a, const ExpressionPort& b) {
      return pos.at(a.get_expr()) < pos.at(b.get_expr());
    });
    Expression* first_use = later.front().get_expr();
    if (victim->kind() == OpKind::Scalar) {
      for (const ExpressionPort& c : later) {
        auto again = lir.insert_node(lir.find(c.get_expr()), victim->op(), {}, 1, c.get_expr()->loop_ids);
        again->get_output_port_descriptor(0) = victim->get_output_port_descriptor(0);
        LinearIR::connect(again->get_output_port(0), c);
      }
      if (victim->get_output_port_connector(0)->get_consumers().empty()) lir.erase(lir.find(victim));
    } else {
      const double slot = static_cast<double>(slots++);
      lir.insert_node(std::next(lir.find(victim)), Op{"RegSpillBegin", {{"slot", slot}}}, {victim->get_output_port(0)}, 0,
                      victim->loop_ids);
      auto load = lir.insert_node(lir.find(first_use), Op{"RegSpillEnd", {{"slot", slot}}}, {}, 1, first_use->loop_ids);
      load->get_output_port_descriptor(0) = victim->get_output_port_descriptor(0);
      for (const ExpressionPort& c : later) LinearIR::connect(load->get_output_port(0), c);
    }
    ++spills;
  }
  throw Error("InsertRegSpills: no register assignment found");
}

}  // namespace kiln::snippets::lowered::pass
