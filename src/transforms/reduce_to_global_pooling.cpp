#include "transforms/reduce_to_global_pooling.hpp"

#include <algorithm>

#include "core/strings.hpp"
#include "transforms/graph_edit.hpp"

namespace kiln::transforms {

namespace {

// Empty when `n` reduces exactly the spatial axes of an f32 [N, C, ...] tensor, else why not.
std::string why_not(const ir::Node& n) {
  const ir::Value* x = n.input(0);
  if (!x) return "it has no data input";
  if (x->type.dtype != DType::f32) return cat("its input is ", dtype_name(x->type.dtype), ", not f32");
  const ir::PartialShape& s = x->type.shape;
  // rank 4-5 only: a rank-3 [B, L, D] is a sequence (a LayerNorm's mean), not [N, C, W]
  if (!s.rank_known || s.rank() < 4 || s.rank() > 5) return cat("its input ", s.to_string(), " is not an image (rank 4 or 5)");
  std::vector<int64_t> axes;
  const ir::Value* a = n.input(1);  // opset 18: axes as an input
  if (a) {
    if (!a->is_constant()) return cat("its axes '", a->name(), "' are not a constant");
    axes = a->constant().to_i64();
  } else if (n.has_attr("axes")) {
    axes = n.attr_ints("axes");
  } else {
    return "it reduces every axis (no axes given)";
  }
  const int64_t rank = static_cast<int64_t>(s.rank());
  for (int64_t& v : axes) v = v < 0 ? v + rank : v;
  std::sort(axes.begin(), axes.end());
  std::vector<int64_t> spatial;
  for (int64_t k = 2; k < rank; ++k) spatial.push_back(k);
  if (axes != spatial) return cat("it reduces axes [", join(axes), "], not the spatial ones [", join(spatial), "]");
  return "";
}

}  // namespace

size_t reduce_to_global_pooling(ir::Graph& g, PassLog* log) {
  GraphEditor ed(g);
  size_t count = 0;
  for (ir::Node* n : g.topo_order()) {
    if (ed.erased(n) || !n->is_onnx_domain() || n->num_outputs() != 1) continue;
    const std::string op = n->op_type();  // a copy: the log below outlives the node
    if (op != "ReduceMean" && op != "ReduceMax") continue;
    std::string reason = why_not(*n);
    ir::Value* y = n->output(0);
    const bool keep = n->attr_i("keepdims", 1) != 0;
    ir::Value* x = n->input(0);
    if (!reason.empty()) {
      if (log) log->skipped(kReduceToGlobalPooling, n->name(), cat(op, " kept: ", reason));
      continue;
    }
    const std::string pool_op = op == "ReduceMean" ? "GlobalAveragePool" : "GlobalMaxPool";
    ir::Node* pool = g.add_node(pool_op, {x}, std::vector<std::string>{g.unique_name(n->name() + "_pool")},
                                g.unique_name(n->name() + "/" + pool_op));
    pool->set_opset(n->opset());
    ir::Value* out = pool->output(0);
    ir::PartialShape pooled = x->type.shape;
    for (size_t k = 2; k < pooled.rank(); ++k) pooled.dims[k] = ir::Dim(1);
    out->type = {DType::f32, pooled};
    if (!keep) {
      ir::Node* flat = g.add_node("Flatten", {out}, std::vector<std::string>{g.unique_name(n->name() + "_flat")},
                                  g.unique_name(n->name() + "/Flatten"));
      flat->set_opset(n->opset());
      flat->attrs["axis"] = int64_t(1);  // [N, C * 1 * 1]
      flat->output(0)->type = y->type;
      out = flat->output(0);
    }
    const std::string where = n->name();
    ed.replace_and_erase(n, y, out);
    ++count;
    if (log) log->applied(kReduceToGlobalPooling, where, cat(op, " -> ", pool_op, keep ? "" : " + Flatten"));
  }
  return count;
}

}  // namespace kiln::transforms
