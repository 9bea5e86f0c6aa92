#include <kiln/error.hpp>

#include <unordered_map>

#include "snippets/lowered/pass/passes.hpp"

namespace kiln::snippets::lowered::pass {

namespace {

LinearIR::iterator find_marker(LinearIR& lir, const char* type, size_t loop) {
  for (auto it = lir.begin(); it != lir.end(); ++it)
    if ((*it)->type() == type && static_cast<size_t>((*it)->op().attr("loop")) == loop) return it;
  return lir.end();
}

}  // namespace

// A loop whose static work amount is not a multiple of its increment gets a tail copy of
// its body after it: one iteration of `tail` elements, memory accesses masked to `tail`
// lanes ("count"). The main loop stops rewinding its pointers (the tail continues from
// there and rewinds for both). A main loop with no full iteration is removed.
void insert_specific_iterations(LinearIR& lir) {
  const size_t n_loops = lir.loops().size();
  for (size_t id = 0; id < n_loops; ++id) {
    LoopInfo main = lir.loops()[id];
    if (main.work_amount < 0 || main.is_tail || main.work_amount % main.increment == 0) continue;
    const int64_t tail = main.work_amount % main.increment;
    auto begin = find_marker(lir, "LoopBegin", id);
    auto end = find_marker(lir, "LoopEnd", id);
    KILN_CHECK(begin != lir.end() && end != lir.end(), "InsertSpecificIterations: run InsertLoops first");

    LoopInfo t = main;
    t.work_amount = tail;
    t.increment = tail;
    t.is_tail = true;
    const size_t tail_id = lir.add_loop(t);

    // Clone [begin, end] after end.
    std::unordered_map<const Expression*, Expression*> cloned;
    auto insert_pos = std::next(end);
    const std::vector<ExpressionPtr> original(begin, insert_pos);
    for (const ExpressionPtr& e : original) {
      std::vector<ExpressionPort> ins;
      for (size_t i = 0; i < e->num_inputs(); ++i) {
        ExpressionPort src = e->get_input_port_connector(i)->get_source();
        auto c = cloned.find(src.get_expr());
        ins.push_back(c == cloned.end() ? src : c->second->get_output_port(src.get_index()));
      }
      Op op = e->op();
      if (is_loop_op(op.type)) op.attrs["loop"] = static_cast<double>(tail_id);
      if ((op.type == "Load" || op.type == "Store") && e->get_input_port_descriptor(0).subtensor.back() != 1)
        op.attrs["count"] = static_cast<double>(tail);
      std::vector<size_t> loops = e->loop_ids;
      for (auto& l : loops)
        if (l == id) l = tail_id;
      auto c = lir.insert_node(insert_pos, op, ins, e->num_outputs(), loops);
      for (size_t i = 0; i < e->num_inputs(); ++i) c->get_input_port_descriptor(i) = e->get_input_port_descriptor(i);
      for (size_t i = 0; i < e->num_outputs(); ++i) {
        c->get_output_port_descriptor(i) = e->get_output_port_descriptor(i);
        auto& sub = c->get_output_port_descriptor(i).subtensor;
        if (!sub.empty() && sub.back() != 1) sub.back() = tail;
      }
      cloned[e.get()] = c.get();
    }
    // Memory ports of the tail loop and of every loop enclosing it.
    auto remap = [&](std::vector<LoopPort>& ports, bool keep_old) {
      std::vector<LoopPort> out;
      for (const auto& p : ports) {
        if (keep_old) out.push_back(p);
        auto c = cloned.find(p.expr);
        if (c != cloned.end()) {
          LoopPort q = p;
          q.expr = c->second;
          out.push_back(q);
        }
      }
      ports = out;
    };
    LoopInfo& tl = lir.loops()[tail_id];
    remap(tl.entry_points, false);
    remap(tl.exit_points, false);
    const std::vector<size_t> outer = (*begin)->loop_ids;
    for (size_t o : outer) {
      remap(lir.loops()[o].entry_points, true);
      remap(lir.loops()[o].exit_points, true);
    }
    // The tail rewinds over the whole work amount; the main loop does not rewind.
    for (auto* ports : {&tl.entry_points, &tl.exit_points})
      for (auto& p : *ports) p.finalization_offset = -p.ptr_increment * main.work_amount;
    LoopInfo& ml = lir.loops()[id];
    ml.work_amount = main.work_amount - tail;
    for (auto* ports : {&ml.entry_points, &ml.exit_points})
      for (auto& p : *ports) p.finalization_offset = 0;

    if (ml.work_amount == 0) {
      // No full vector: only the tail remains. Results read the tail's Stores.
      std::vector<ExpressionPtr> body(begin, std::next(end));
      for (const auto& e : body)
        if (e->type() == "Store") {
          auto consumers = e->get_output_port_connector(0)->get_consumers();
          for (const auto& c : consumers) LinearIR::connect(cloned[e.get()]->get_output_port(0), c);
        }
      for (auto it = body.rbegin(); it != body.rend(); ++it) lir.erase(lir.find(it->get()));
      for (size_t o : outer)
        for (auto* ports : {&lir.loops()[o].entry_points, &lir.loops()[o].exit_points}) {
          std::vector<LoopPort> keep;
          for (const auto& p : *ports) {
            bool removed = false;
            for (const auto& e : body) removed |= p.expr == e.get();
            if (!removed) keep.push_back(p);
          }
          *ports = keep;
        }
      ml.entry_points.clear();
      ml.exit_points.clear();
    }
  }
}

}  // namespace kiln::snippets::lowered::pass
