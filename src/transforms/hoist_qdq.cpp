#include "transforms/hoist_qdq.hpp"

#include <optional>

#include "core/strings.hpp"
#include "transforms/graph_edit.hpp"
#include "ir/qdq_params.hpp"

namespace kiln::transforms {

namespace {

// A QuantizeLinear whose output only one DequantizeLinear reads, with the same constant
// per-tensor 8-bit parameters: the pair, else nullopt.
struct Pair {
  ir::Node* q = nullptr;
  ir::Node* dq = nullptr;
  double scale = 0;
  int64_t zp = 0;
  DType type = DType::u8;
};

std::optional<Pair> pair_at(const ir::Graph& g, ir::Node* q) {
  if (q->op_type() != "QuantizeLinear" || !q->is_onnx_domain() || q->num_outputs() != 1) return std::nullopt;
  const ir::Value* y = q->output(0);
  if (g.is_output(y) || y->uses().size() != 1) return std::nullopt;
  ir::Node* dq = y->uses()[0].node;
  if (dq->op_type() != "DequantizeLinear" || !dq->is_onnx_domain()) return std::nullopt;
  std::string why;
  const std::optional<ir::QdqParams> pq = ir::read_qdq_params(*q, q->input(0)->type.shape, &why);
  const std::optional<ir::QdqParams> pd = ir::read_qdq_params(*dq, y->type.shape, &why);
  if (!pq || !pd || pq->axis >= 0 || pd->axis >= 0) return std::nullopt;
  const DType t = pq->quantized_type();
  const DType td = pd->quantized_type();
  if ((t != DType::u8 && t != DType::i8) || t != td) return std::nullopt;
  if (static_cast<float>(pq->scales[0]) != static_cast<float>(pd->scales[0]) || pq->zero_points[0] != pd->zero_points[0])
    return std::nullopt;
  return Pair{q, dq, pq->scales[0], pq->zero_points[0], t};
}

bool same_params(const Pair& a, const Pair& b) {
  return a.type == b.type && a.zp == b.zp && static_cast<float>(a.scale) == static_cast<float>(b.scale);
}

bool is_layout(const ir::Node* n) {
  return n && n->is_onnx_domain() && n->num_outputs() == 1 && (n->op_type() == "Reshape" || n->op_type() == "Transpose");
}

}  // namespace

size_t hoist_qdq_above_layout(ir::Graph& g, PassLog* log) {
  size_t count = 0;
  for (bool changed = true; changed;) {
    changed = false;
    GraphEditor ed(g);  // per sweep: erased nodes' addresses may come back for the next sweep's nodes
    for (ir::Node* q : g.topo_order()) {
      if (ed.erased(q)) continue;
      std::optional<Pair> p = pair_at(g, q);
      if (!p) continue;
      ir::Value* x = q->input(0);
      ir::Node* prod = x->producer();
      // x already on this grid: DQ(Q(DQ(Q(w)))) is DQ(Q(w)), the second pair goes
      if (prod && prod->op_type() == "DequantizeLinear" && prod->input(0)->producer()) {
        std::optional<Pair> first = pair_at(g, prod->input(0)->producer());
        if (first && first->dq == prod && same_params(*first, *p) && !g.is_output(p->dq->output(0))) {
          const std::string name = p->dq->name();
          ed.replace_and_erase(p->dq, p->dq->output(0), x);
          if (log) log->applied(kHoistQdqAboveLayout, name, "a second QuantizeLinear -> DequantizeLinear with the same parameters removed");
          ++count;
          changed = true;
          continue;
        }
      }
      if (!is_layout(prod) || g.is_output(x) || x->uses().size() != 1) continue;
      const std::string where = cat(prod->name(), " -> ", q->name());
      // x' = DQ(Q(layout input)), then the layout op on it, read where the old DQ was
      ir::Node* nq = g.add_node("QuantizeLinear", {prod->input(0), q->input(1), q->input(2)}, 1,
                                g.unique_name(q->name() + "_hoisted"));
      nq->set_opset(q->opset());
      nq->attrs = q->attrs;
      nq->output(0)->type = prod->input(0)->type;
      nq->output(0)->type.dtype = p->type;
      ir::Node* ndq = g.add_node("DequantizeLinear", {nq->output(0), p->dq->input(1), p->dq->input(2)}, 1,
                                 g.unique_name(p->dq->name() + "_hoisted"));
      ndq->set_opset(p->dq->opset());
      ndq->attrs = p->dq->attrs;
      ndq->output(0)->type = prod->input(0)->type;
      std::vector<ir::Value*> in = prod->inputs();
      in[0] = ndq->output(0);
      ir::Node* moved = g.add_node(prod->op_type(), in, 1, g.unique_name(prod->name() + "_after_qdq"));
      moved->set_opset(prod->opset());
      moved->attrs = prod->attrs;
      moved->output(0)->type = p->dq->output(0)->type;
      ed.replace_and_erase(p->dq, p->dq->output(0), moved->output(0));
      if (log) log->applied(kHoistQdqAboveLayout, where, cat("the QuantizeLinear -> DequantizeLinear pair moved above ", prod->op_type()));
      ++count;
      changed = true;
    }
    if (changed) g.remove_dead();
  }
  return count;
}

}  // namespace kiln::transforms
