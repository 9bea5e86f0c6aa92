#include <kiln/error.hpp>

#include <algorithm>
#include <map>
#include <set>

#include "core/strings.hpp"
#include "snippets/lowered/pass/passes.hpp"

namespace kiln::snippets::lowered::pass {

// Linear scan over the live ranges of InitLiveRanges: a physical register is free again
// once its value's last use is at or before the position where a new value is defined (an
// emitter may write its output over an input it reads last; emitters are written for it).
void assign_registers(LinearIR& lir, int num_regs) {
  std::vector<Expression*> defs;
  for (auto& e : lir.expressions())
    if (e->live_begin >= 0) defs.push_back(e.get());
  std::sort(defs.begin(), defs.end(), [](auto* a, auto* b) { return a->live_begin < b->live_begin; });
  std::map<int, int> phys;  // abstract -> physical
  std::set<int> free;
  for (int r = 0; r < num_regs; ++r) free.insert(r);
  std::multimap<int64_t, int> active;  // live_end -> physical
  for (Expression* e : defs) {
    while (!active.empty() && active.begin()->first <= e->live_begin) {
      free.insert(active.begin()->second);
      active.erase(active.begin());
    }
    KILN_CHECK(!free.empty(), cat("snippets: the kernel needs more than ", num_regs,
                                  " vector registers at once (at ", expr_name(*e), ")"));
    int r = *free.begin();
    free.erase(free.begin());
    phys[e->get_output_port_descriptor(0).reg] = r;
    active.emplace(e->live_end, r);
  }
  for (auto& e : lir.expressions()) {
    for (size_t i = 0; i < e->num_inputs(); ++i) {
      auto& d = e->get_input_port_descriptor(i);
      if (d.reg >= 0) d.reg = phys.at(d.reg);
    }
    for (size_t i = 0; i < e->num_outputs(); ++i) {
      auto& d = e->get_output_port_descriptor(i);
      if (d.reg >= 0) d.reg = phys.at(d.reg);
    }
  }
}

}  // namespace kiln::snippets::lowered::pass
