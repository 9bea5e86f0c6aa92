#include "transforms/scatter_rows.hpp"

#include <algorithm>

#include "core/strings.hpp"
#include "transforms/graph_edit.hpp"

namespace kiln::transforms {

namespace {

// Empty when ScatterElements `n` writes whole rows (the header's conditions), else why not.
// `rows`: the index tensor before its Expand.
std::string why_not(const ir::Node& n, ir::Value** rows) {
  if (n.attr_s("reduction", "none") != "none") return cat("its reduction is ", n.attr_s("reduction"));
  const ir::Value *data = n.input(0), *idx = n.input(1), *upd = n.input(2);
  if (!data || !idx || !upd) return "an input is missing";
  const ir::PartialShape &ds = data->type.shape, &us = upd->type.shape;
  if (!ds.rank_known || !us.rank_known || ds.rank() != us.rank() || ds.rank() == 0)
    return cat("the ranks of its data ", ds.to_string(), " and updates ", us.to_string(), " are not known and equal");
  const int64_t rank = static_cast<int64_t>(ds.rank());
  int64_t axis = n.attr_i("axis", 0);
  if (axis < 0) axis += rank;
  if (axis != 0) return cat("it scatters along axis ", axis, ", not 0");
  const ir::Node* expand = idx->producer();
  if (!expand || expand->op_type() != "Expand" || !expand->is_onnx_domain())
    return cat("its indices '", idx->name(), "' are not an Expand");
  ir::Value* src = expand->input(0);
  if (!src || src->type.dtype != DType::i64) return "the expanded indices are not int64";
  const ir::PartialShape& is = src->type.shape;
  if (!is.rank_known || is.rank() != ds.rank()) return cat("the expanded indices ", is.to_string(), " have another rank");
  for (size_t k = 1; k < is.rank(); ++k)
    if (!(is.dims[k] == ir::Dim(1)))
      return cat("the expanded indices ", is.to_string(), " are not one per row (dim ", k, " is not 1)");
  if (!(is.dims[0] == us.dims[0]) || is.dims[0].is_unknown())
    return cat("the expanded indices ", is.to_string(), " are not one per row of the updates ", us.to_string());
  for (size_t k = 1; k < us.rank(); ++k)
    if (!(us.dims[k] == ds.dims[k]) || us.dims[k].is_unknown())
      return cat("the updates ", us.to_string(), " do not cover whole rows of the data ", ds.to_string());
  *rows = src;
  return "";
}

}  // namespace

size_t scatter_rows_to_scatter_nd(ir::Graph& g, PassLog* log) {
  GraphEditor ed(g);
  size_t count = 0;
  for (ir::Node* n : g.topo_order()) {
    if (ed.erased(n) || n->op_type() != "ScatterElements" || !n->is_onnx_domain()) continue;
    ir::Value* rows = nullptr;
    const std::string reason = why_not(*n, &rows);
    if (!reason.empty()) {
      if (log) log->skipped(kScatterRowsToScatterND, n->name(), cat("ScatterElements kept: ", reason));
      continue;
    }
    ir::Value* shape = g.add_constant(g.unique_name(n->name() + "_rows_shape"), Tensor::from_vector<int64_t>({-1, 1}, {2}));
    ir::Node* reshape = g.add_node("Reshape", {rows, shape}, std::vector<std::string>{g.unique_name(n->name() + "_rows")},
                                   g.unique_name(n->name() + "/rows"));
    reshape->set_opset(std::max(n->opset(), 5));
    reshape->output(0)->type = {DType::i64, ir::PartialShape({rows->type.shape.dims[0], ir::Dim(1)})};
    ir::Node* nd = g.add_node("ScatterND", {n->input(0), reshape->output(0), n->input(2)},
                              std::vector<std::string>{g.unique_name(n->name() + "_nd")},
                              g.unique_name(n->name() + "/ScatterND"));
    nd->set_opset(std::max(n->opset(), 11));
    nd->output(0)->type = n->output(0)->type;
    const std::string where = n->name();
    ed.replace_and_erase(n, n->output(0), nd->output(0));
    ++count;
    if (log) log->applied(kScatterRowsToScatterND, where, "ScatterElements of rows -> ScatterND");
  }
  return count;
}

}  // namespace kiln::transforms
