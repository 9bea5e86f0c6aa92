#include "transforms/graph_edit.hpp"

#include <kiln/error.hpp>

#include "core/strings.hpp"

namespace kiln::transforms {

void GraphEditor::erase(ir::Node* n) {
  g_.erase_node(n);
  gone_.insert(n);
}

ir::Node* GraphEditor::copy_node(ir::Node* src, const std::vector<std::string>& output_names,
                                 const std::string& name) {
  ir::Node* c = g_.add_node(src->op_type(), src->inputs(), output_names, name, src->domain());
  c->set_opset(src->opset());
  c->attrs = src->attrs;
  for (size_t i = 0; i < src->num_outputs(); ++i) {
    ir::Value* from = src->output(i);
    ir::Value* to = c->output(i);
    to->type = from->type;
    if (from->is_constant()) to->set_constant(from->constant());
    g_.replace_all_uses(from, to);
  }
  return c;
}

ir::Value* GraphEditor::rename(ir::Value* v, const std::string& name) {
  ir::Node* p = v->producer();
  KILN_CHECK(p, cat("rename: value '", v->name(), "' is not produced by a node"));
  KILN_CHECK(!g_.find_value(name), cat("rename: value name '", name, "' is already taken"));
  const size_t k = v->producer_output();
  const std::string node_name = p->name();
  std::vector<std::string> names;
  for (ir::Value* o : p->outputs()) names.push_back(o == v ? name : o->name());
  // The old outputs hold their names until the old node is gone: go through a copy with
  // generated names first, then make the final copy under the wanted names.
  ir::Node* tmp = copy_node(p, std::vector<std::string>(p->num_outputs()), "");
  erase(p);
  ir::Node* fin = copy_node(tmp, names, node_name);
  erase(tmp);
  return fin->output(k);
}

ir::Value* GraphEditor::replace_and_erase(ir::Node* dead, ir::Value* from, ir::Value* to) {
  const bool was_output = g_.is_output(from);
  const std::string name = from->name();
  g_.replace_all_uses(from, to);
  erase(dead);
  return was_output ? rename(to, name) : to;
}

std::string why_not_replaceable(const ir::Graph& g, const ir::Value* from, const ir::Value* to) {
  if (!g.is_output(from)) return "";
  const std::string head = cat("its output '", from->name(), "' is a graph output and '", to->name(), "' ");
  if (to->is_graph_input()) return head + "is a graph input";
  if (!to->producer()) return head + "is a constant";
  if (g.is_output(to)) return head + "is already a graph output";
  return "";
}

const ir::Node* written_out_swish(const ir::Graph& g, const ir::Value* x) {
  if (x->uses().size() != 2 || x->type.dtype != DType::f32) return nullptr;
  for (int s = 0; s < 2; ++s) {
    const ir::Node* sig = x->uses()[static_cast<size_t>(s)].node;
    const ir::Node* mul = x->uses()[static_cast<size_t>(1 - s)].node;
    if (sig->op_type() != "Sigmoid" || !sig->is_onnx_domain() || mul->op_type() != "Mul" || !mul->is_onnx_domain()) continue;
    if (sig->num_inputs() != 1 || sig->num_outputs() != 1 || mul->num_inputs() != 2 || mul->num_outputs() != 1) continue;
    const ir::Value* so = sig->output(0);
    const bool wired = (mul->input(0) == x && mul->input(1) == so) || (mul->input(0) == so && mul->input(1) == x);
    if (wired && so->uses().size() == 1 && !g.is_output(so) && mul->output(0)->type.shape == x->type.shape) return mul;
  }
  return nullptr;
}

std::string other_reader(const ir::Graph& g, const ir::Value* v, const ir::Node* except) {
  for (const ir::Use& u : v->uses())
    if (u.node != except) return u.node->name();
  if (g.is_output(v)) return cat("the graph output '", v->name(), "'");
  return "";
}

bool all_equal(const std::vector<int64_t>& v, int64_t x) {
  for (int64_t e : v)
    if (e != x) return false;
  return true;
}

int64_t static_dim(const ir::Value* v, size_t d) {
  const ir::PartialShape& s = v->type.shape;
  if (!s.rank_known || s.rank() <= d || !s.dims[d].is_static()) return -1;
  return s.dims[d].value;
}

bool all_equal(const Tensor& t, double value) {
  if (!t.defined()) return false;
  for (double d : t.to_f64())
    if (d != value) return false;
  return true;
}

ir::Value* add_f32_constant(ir::Graph& g, const std::string& base, const std::vector<double>& values, Shape shape) {
  Tensor t(DType::f32, std::move(shape));
  KILN_CHECK(static_cast<int64_t>(values.size()) == t.size(),
             cat("add_f32_constant: ", values.size(), " values for shape ", shape_to_string(t.shape())));
  float* p = t.data<float>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = static_cast<float>(values[i]);
  return g.add_constant(g.unique_name(base), std::move(t));
}

}  // namespace kiln::transforms
