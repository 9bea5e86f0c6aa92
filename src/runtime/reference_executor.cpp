#include "runtime/reference_executor.hpp"

#include "core/node_timer.hpp"

#include <unordered_set>

#include "core/strings.hpp"

namespace kiln::runtime {

ReferenceExecutor::ReferenceExecutor(std::shared_ptr<const ir::Graph> graph) : graph_(std::move(graph)) {
  auto order = graph_->topo_order();
  std::unordered_map<const ir::Value*, size_t> last_use;
  for (size_t i = 0; i < order.size(); ++i)
    for (const ir::Value* v : order[i]->inputs())
      if (v) last_use[v] = i;
  std::unordered_set<const ir::Value*> keep(graph_->outputs().begin(), graph_->outputs().end());
  for (size_t i = 0; i < order.size(); ++i) {
    Step s{order[i], &ir::validate_node(*order[i]), {}};
    if (!s.schema->run) throw Error(cat(order[i]->describe(), ": op has no reference kernel"));
    steps_.push_back(std::move(s));
  }
  for (auto& [v, i] : last_use)
    if (!keep.count(v) && !v->is_constant() && !v->is_graph_input()) steps_[i].release_after.push_back(v);
  // outputs nobody reads (optional outputs) are released right after their producer
  for (size_t i = 0; i < order.size(); ++i)
    for (const ir::Value* out : order[i]->outputs())
      if (!last_use.count(out) && !keep.count(out)) steps_[i].release_after.push_back(out);
}

void check_input(const ir::Value& input, const Tensor& t, std::unordered_map<std::string, int64_t>& symbols,
                 bool check_dims) {
  const ir::ValueType& ty = input.type;
  KILN_CHECK(t.defined() || t.kind() != ValueKind::tensor, cat("input '", input.name(), "' was not set"));
  auto kind_name = [](ValueKind k) { return k == ValueKind::tensor ? "a tensor" : k == ValueKind::sequence ? "a sequence" : "an optional"; };
  KILN_CHECK(t.kind() == ty.kind, cat("input '", input.name(), "': expected ", kind_name(ty.kind), ", got ", kind_name(t.kind())));
  if (ty.kind != ValueKind::tensor) {  // the element type; the items' shapes vary
    KILN_CHECK(ty.dtype == DType::undefined || t.dtype() == ty.dtype || t.dtype() == DType::undefined,
               cat("input '", input.name(), "': expected element type ", dtype_name(ty.dtype), ", got ",
                   dtype_name(t.dtype())));
    return;
  }
  KILN_CHECK(ty.dtype == DType::undefined || t.dtype() == ty.dtype,
             cat("input '", input.name(), "': expected element type ", dtype_name(ty.dtype), ", got ",
                 dtype_name(t.dtype())));
  if (!ty.shape.rank_known) return;
  KILN_CHECK(t.rank() == ty.shape.rank(), cat("input '", input.name(), "': expected rank ", ty.shape.rank(), " ",
                                              ty.shape.to_string(), ", got shape ", shape_to_string(t.shape())));
  if (!check_dims) return;
  for (size_t i = 0; i < t.rank(); ++i) {
    const ir::Dim& d = ty.shape.dims[i];
    int64_t got = t.shape()[i];
    if (d.is_static()) {
      KILN_CHECK(got == d.value, cat("input '", input.name(), "': dim ", i, " must be ", d.value, " (expected shape ",
                                     ty.shape.to_string(), "), got shape ", shape_to_string(t.shape())));
    } else if (d.is_symbolic()) {
      auto [it, fresh] = symbols.emplace(d.symbol, got);
      KILN_CHECK(fresh || it->second == got,
                 cat("input '", input.name(), "': dim ", i, " ('", d.symbol, "') is ", got,
                     " but another input bound '", d.symbol, "' to ", it->second));
    }
  }
}

std::vector<Tensor> ReferenceExecutor::run(const std::vector<Tensor>& inputs,
                                           const std::unordered_map<const ir::Value*, Tensor>* outer,
                                           std::vector<ProfilingInfo>* profile) const {
  if (profile) profile->clear();
  std::optional<ir::TensorLimit> limit;  // nested bodies (max_tensor_bytes_ 0) keep the caller's
  if (max_tensor_bytes_) limit.emplace(max_tensor_bytes_);
  const auto& gin = graph_->inputs();
  KILN_CHECK(inputs.size() == gin.size(),
             cat("graph '", graph_->name, "' expects ", gin.size(), " inputs, got ", inputs.size()));
  std::unordered_map<const ir::Value*, Tensor> env;
  std::unordered_map<std::string, int64_t> symbols;
  for (size_t i = 0; i < gin.size(); ++i) {
    check_input(*gin[i], inputs[i], symbols, !input_dims_are_hints_);
    env[gin[i]] = inputs[i];
  }
  auto lookup = [&](const ir::Value* v) -> const Tensor* {
    if (v->is_constant()) return &v->constant();
    auto it = env.find(v);
    if (it != env.end()) return &it->second;
    if (outer) {
      auto jt = outer->find(v);
      if (jt != outer->end()) return &jt->second;
    }
    return nullptr;
  };
  for (const Step& s : steps_) {
    const ir::Node& n = *s.node;
    std::vector<const Tensor*> ins(n.num_inputs(), nullptr);
    for (size_t i = 0; i < n.num_inputs(); ++i) {
      if (const ir::Value* v = n.input(i)) {
        ins[i] = lookup(v);
        KILN_CHECK(ins[i], cat(n.describe(), ": input '", v->name(), "' has no value"));
      }
    }
    std::vector<Tensor> outs(n.num_outputs());
    ir::RunContext ctx(n, std::move(ins), outs);
    NodeTimer timer;
    if (profile) timer.start();
    s.schema->run(ctx);
    if (profile) {
      ProfilingInfo row;
      row.node_name = n.name().empty() ? n.op_type() : n.name();
      row.node_type = n.op_type();
      DType dt = n.num_outputs() ? n.output(0)->type.dtype : DType::undefined;
      row.exec_type = cat("ref_any_", dtype_name(dt));
      timer.stop(row);
      profile->push_back(std::move(row));
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      KILN_CHECK(outs[i].defined(), cat(n.describe(), ": kernel did not produce output ", i));
      env[n.output(i)] = std::move(outs[i]);
    }
    for (const ir::Value* v : s.release_after) env.erase(v);
  }
  std::vector<Tensor> result;
  for (const ir::Value* out : graph_->outputs()) {
    const Tensor* t = lookup(out);
    KILN_CHECK(t, cat("graph output '", out->name(), "' was not computed"));
    result.push_back(*t);
  }
  return result;
}

}  // namespace kiln::runtime
