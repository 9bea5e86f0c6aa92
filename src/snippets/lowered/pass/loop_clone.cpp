#include "snippets/lowered/pass/loop_clone.hpp"

#include <kiln/error.hpp>

#include "core/strings.hpp"

namespace kiln::snippets::lowered::pass {

LinearIR::iterator find_loop_marker(LinearIR& lir, OpKind kind, size_t loop) {
  for (auto it = lir.begin(); it != lir.end(); ++it)
    if ((*it)->kind() == kind && static_cast<size_t>((*it)->op().attr("loop")) == loop) return it;
  return lir.end();
}

LoopCopy copy_loop_after(LinearIR& lir, size_t id, LoopInfo info, int64_t count) {
  auto begin = find_loop_marker(lir, OpKind::LoopBegin, id);
  auto end = find_loop_marker(lir, OpKind::LoopEnd, id);
  KILN_CHECK(begin != lir.end() && end != lir.end(), cat("snippets: loop ", id, " has no LoopBegin / LoopEnd (run InsertLoops first)"));
  LoopCopy out;
  out.id = lir.add_loop(info);
  auto insert_pos = std::next(end);
  const std::vector<ExpressionPtr> original(begin, insert_pos);
  for (const ExpressionPtr& e : original) {
    std::vector<ExpressionPort> ins;
    for (size_t i = 0; i < e->num_inputs(); ++i) {
      ExpressionPort src = e->get_input_port_connector(i)->get_source();
      auto c = out.of.find(src.get_expr());
      ins.push_back(c == out.of.end() ? src : c->second->get_output_port(src.get_index()));
    }
    Op op = e->op();
    if (is_loop_op(op.kind()) && static_cast<size_t>(op.attr("loop")) == id) op.attrs["loop"] = static_cast<double>(out.id);
    // masked to the tail's lanes: vector memory accesses, and accumulators (their other lanes
    // would take the masked Loads' zeros in)
    if (count >= 0 && (is_accumulator(op.kind()) ||
                       ((op.kind() == OpKind::Load || op.kind() == OpKind::Store) && e->get_input_port_descriptor(0).subtensor.back() != 1)))
      op.attrs["count"] = static_cast<double>(count);
    std::vector<size_t> loops = e->loop_ids;
    for (auto& l : loops)
      if (l == id) l = out.id;
    auto c = lir.insert_node(insert_pos, op, ins, e->num_outputs(), loops);
    for (size_t i = 0; i < e->num_inputs(); ++i) c->get_input_port_descriptor(i) = e->get_input_port_descriptor(i);
    for (size_t i = 0; i < e->num_outputs(); ++i) {
      c->get_output_port_descriptor(i) = e->get_output_port_descriptor(i);
      auto& sub = c->get_output_port_descriptor(i).subtensor;
      if (count >= 0 && !sub.empty() && sub.back() != 1) sub.back() = count;
    }
    out.of[e.get()] = c.get();
  }
  // Memory ports of the copy and of every loop enclosing it.
  auto remap = [&](std::vector<LoopPort>& ports, bool keep_old) {
    std::vector<LoopPort> res;
    for (const auto& p : ports) {
      if (keep_old) res.push_back(p);
      auto c = out.of.find(p.expr);
      if (c != out.of.end()) {
        LoopPort q = p;
        q.expr = c->second;
        res.push_back(q);
      }
    }
    ports = res;
  };
  LoopInfo& cl = lir.loops()[out.id];
  cl.entry_points = lir.loops()[id].entry_points;
  cl.exit_points = lir.loops()[id].exit_points;
  remap(cl.entry_points, false);
  remap(cl.exit_points, false);
  for (size_t o : (*begin)->loop_ids) {
    remap(lir.loops()[o].entry_points, true);
    remap(lir.loops()[o].exit_points, true);
  }
  return out;
}

}  // namespace kiln::snippets::lowered::pass
