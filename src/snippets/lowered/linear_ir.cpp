#include "snippets/lowered/linear_ir.hpp"

#include <kiln/error.hpp>

#include <algorithm>
#include <sstream>
#include <unordered_map>

#include "core/strings.hpp"
#include "ir/graph.hpp"

namespace kiln::snippets::lowered {

PortDescriptor& ExpressionPort::get_descriptor() const {
  return type_ == Input ? expr_->get_input_port_descriptor(index_) : expr_->get_output_port_descriptor(index_);
}

const PortConnectorPtr& ExpressionPort::get_port_connector() const {
  return type_ == Input ? expr_->get_input_port_connector(index_) : expr_->get_output_port_connector(index_);
}

void PortConnector::remove_consumer(const ExpressionPort& p) {
  consumers_.erase(std::remove(consumers_.begin(), consumers_.end(), p), consumers_.end());
}

Expression::Expression(Op op, size_t num_inputs, size_t num_outputs)
    : op_(std::move(op)), inputs_(num_inputs), in_desc_(num_inputs), out_desc_(num_outputs) {
  for (size_t i = 0; i < num_outputs; ++i)
    outputs_.push_back(std::make_shared<PortConnector>(ExpressionPort(this, ExpressionPort::Output, i)));
}

std::string expr_name(const Expression& e) { return cat(e.type(), "#", e.id()); }

LinearIR::iterator LinearIR::find(const Expression* e) {
  auto it = position_.find(e);
  return it == position_.end() ? exprs_.end() : it->second;
}

LinearIR::iterator LinearIR::append(ExpressionPtr e) {
  const Expression* key = e.get();
  auto it = exprs_.insert(exprs_.end(), std::move(e));
  position_[key] = it;
  return it;
}

void LinearIR::reorder(const std::vector<ExpressionPtr>& order) {
  KILN_CHECK(order.size() == exprs_.size(), "LinearIR::reorder: not a permutation of the expressions");
  container sorted;
  for (const ExpressionPtr& e : order) {
    auto it = find(e.get());
    KILN_CHECK(it != exprs_.end(), cat("LinearIR::reorder: ", expr_name(*e), " is not in the Linear IR"));
    sorted.splice(sorted.end(), exprs_, it);  // list nodes move: the positions stay valid
  }
  exprs_.swap(sorted);
}

void LinearIR::connect(const ExpressionPort& source, const ExpressionPort& in) {
  Expression* e = in.get_expr();
  auto& slot = e->inputs_.at(in.get_index());
  if (slot) slot->remove_consumer(in);
  slot = source.get_expr()->outputs_.at(source.get_index());
  slot->add_consumer(in);
}

ExpressionPtr LinearIR::make_expression(Op op, const std::vector<ExpressionPort>& inputs, size_t num_outputs) {
  auto e = std::make_shared<Expression>(std::move(op), inputs.size(), num_outputs);
  e->id_ = next_id_++;
  for (size_t i = 0; i < inputs.size(); ++i) {
    connect(inputs[i], e->get_input_port(i));
    e->in_desc_[i] = inputs[i].get_descriptor();
    e->in_desc_[i].reg = -1;
    e->in_desc_[i].strides.clear();  // a memory fact: PropagateLayout sets it where memory is accessed
  }
  for (size_t i = 0; i < num_outputs; ++i) {
    if (!inputs.empty()) e->out_desc_[i] = e->in_desc_[0];
    e->out_desc_[i].reg = -1;
    e->out_desc_[i].strides.clear();
  }
  return e;
}

ExpressionPtr LinearIR::insert_node(iterator pos, Op op, const std::vector<ExpressionPort>& inputs, size_t num_outputs,
                                    const std::vector<size_t>& loop_ids) {
  auto e = make_expression(std::move(op), inputs, num_outputs);
  e->loop_ids = loop_ids;
  position_[e.get()] = exprs_.insert(pos, e);
  return e;
}

void LinearIR::replace_with_expr(const std::vector<ExpressionPtr>& old, const ExpressionPtr& new_expr) {
  KILN_CHECK(!old.empty(), "replace_with_expr: nothing to replace");
  const ExpressionPtr& first = old.front();
  const ExpressionPtr& last = old.back();
  KILN_CHECK(first->num_inputs() == new_expr->num_inputs() && last->num_outputs() == new_expr->num_outputs(),
             cat("replace_with_expr: ", expr_name(*new_expr), " does not match the ports of ", expr_name(*first), "..",
                 expr_name(*last)));
  // Inputs: the new expression reads what the first one read (if not already connected).
  for (size_t i = 0; i < first->num_inputs(); ++i) {
    if (!new_expr->inputs_[i]) connect(first->inputs_[i]->get_source(), new_expr->get_input_port(i));
    first->inputs_[i]->remove_consumer(first->get_input_port(i));
  }
  // Outputs: consumers of the last one now read the new expression.
  for (size_t i = 0; i < last->num_outputs(); ++i) {
    auto consumers = last->outputs_[i]->get_consumers();
    for (const auto& c : consumers) connect(new_expr->get_output_port(i), c);
  }
  if (new_expr->loop_ids.empty()) new_expr->loop_ids = last->loop_ids;
  auto pos = find(last.get());
  KILN_CHECK(pos != exprs_.end(), "replace_with_expr: expression not in the Linear IR");
  position_[new_expr.get()] = exprs_.insert(std::next(pos), new_expr);
  // Drop the old chain; inner connections die with it.
  for (const auto& o : old) {
    for (size_t i = 0; i < o->num_inputs(); ++i)
      if (o->inputs_[i]) o->inputs_[i]->remove_consumer(o->get_input_port(i));
    auto at = find(o.get());
    KILN_CHECK(at != exprs_.end(), cat("replace_with_expr: ", expr_name(*o), " is not in the Linear IR"));
    position_.erase(o.get());
    exprs_.erase(at);
  }
}

ExpressionPtr LinearIR::replace_with_node(const std::vector<ExpressionPtr>& old, Op op) {
  KILN_CHECK(!old.empty(), "replace_with_node: nothing to replace");
  auto e = std::make_shared<Expression>(std::move(op), old.front()->num_inputs(), old.back()->num_outputs());
  e->id_ = next_id_++;
  for (size_t i = 0; i < e->num_inputs(); ++i) e->in_desc_[i] = old.front()->in_desc_[i];
  for (size_t i = 0; i < e->num_outputs(); ++i) e->out_desc_[i] = old.back()->out_desc_[i];
  e->loop_ids = old.back()->loop_ids;
  replace_with_expr(old, e);
  return e;
}

void LinearIR::erase(iterator it) {
  const ExpressionPtr& e = *it;
  for (size_t i = 0; i < e->num_outputs(); ++i)
    KILN_CHECK(e->outputs_[i]->get_consumers().empty(), cat("erase: ", expr_name(*e), " still has consumers"));
  for (size_t i = 0; i < e->num_inputs(); ++i)
    if (e->inputs_[i]) e->inputs_[i]->remove_consumer(e->get_input_port(i));
  position_.erase(e.get());
  exprs_.erase(it);
}

namespace {

Op op_from_node(const ir::Node& n) {
  Op op(n.op_type());
  for (const auto& [name, a] : n.attrs) {
    if (a.type() == ir::AttrType::f) op.attrs[name] = std::get<float>(a.value);
    else if (a.type() == ir::AttrType::i) op.attrs[name] = static_cast<double>(std::get<int64_t>(a.value));
  }
  // the few facts emitters need beyond numeric attributes
  if (n.op_type() == "Gelu" && n.has_attr("approximate") && n.attr_s("approximate") == "tanh") op.attrs["tanh"] = 1;
  if (n.op_type() == "Cast" && n.has_input(0)) op.attrs["from_f32"] = n.input(0)->type.dtype == DType::f32 ? 1 : 0;
  return op;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::vector<std::string> parts;
  for (auto d : s) parts.push_back(std::to_string(d));
  return "[" + join(parts, ",") + "]";
}

}  // namespace

std::unique_ptr<LinearIR> LinearIR::from_graph(const ir::Graph& body, const std::vector<std::vector<int64_t>>& input_shapes,
                                               const std::vector<int64_t>& output_shape,
                                               const std::vector<std::vector<int64_t>>& input_strides) {
  KILN_CHECK(input_shapes.size() == body.inputs().size(),
             cat("snippets: ", input_shapes.size(), " input shapes for a body with ", body.inputs().size(), " inputs"));
  KILN_CHECK(input_strides.empty() || input_strides.size() == input_shapes.size(),
             cat("snippets: ", input_strides.size(), " input strides for ", input_shapes.size(), " inputs"));
  auto lir = std::make_unique<LinearIR>();
  lir->master_shape_ = output_shape;
  std::unordered_map<const ir::Value*, ExpressionPort> produced;
  for (size_t i = 0; i < body.inputs().size(); ++i) {
    Op op{"Parameter", {{"index", static_cast<double>(i)}}};
    auto e = lir->make_expression(op, {}, 1);
    e->out_desc_[0].shape = input_shapes[i];
    e->out_desc_[0].layout = {0, 1};
    if (!input_strides.empty()) e->out_desc_[0].strides = input_strides[i];
    lir->append(e);
    produced[body.inputs()[i]] = e->get_output_port(0);
  }
  for (const ir::Node* n : body.topo_order()) {
    std::vector<ExpressionPort> ins;
    for (size_t i = 0; i < n->num_inputs(); ++i) {
      const ir::Value* v = n->input(i);
      KILN_CHECK(v != nullptr, cat("snippets: ", n->describe(), " has an omitted input ", i));
      auto it = produced.find(v);
      KILN_CHECK(it != produced.end(), cat("snippets: ", n->describe(), " reads '", v->name(),
                                           "', which is not a body input or computed in the body (a constant must "
                                           "be a one-element Scalar)"));
      ins.push_back(it->second);
    }
    auto e = lir->make_expression(op_from_node(*n), ins, n->num_outputs());
    for (size_t o = 0; o < n->num_outputs(); ++o) {
      e->out_desc_[o].shape = output_shape;
      e->out_desc_[o].layout = {0, 1};
      produced[n->output(o)] = e->get_output_port(o);
    }
    if (e->kind() == OpKind::Scalar) e->out_desc_[0].shape = {1, 1};
    lir->append(e);
  }
  for (size_t i = 0; i < body.outputs().size(); ++i) {
    auto it = produced.find(body.outputs()[i]);
    KILN_CHECK(it != produced.end(), cat("snippets: body output ", i, " is not computed"));
    Op op{"Result", {{"index", static_cast<double>(i)}}};
    auto e = lir->make_expression(op, {it->second}, 0);
    e->in_desc_[0].shape = output_shape;
    e->in_desc_[0].layout = {0, 1};
    lir->append(e);
  }
  return lir;
}

std::string LinearIR::debug_print() const {
  std::ostringstream os;
  for (const auto& e : exprs_) {
    os << expr_name(*e);
    for (const auto& [k, v] : e->op().attrs) os << " " << k << "=" << v;
    os << " loops=[" << join([&] {
      std::vector<std::string> s;
      for (auto l : e->loop_ids) s.push_back(std::to_string(l));
      return s;
    }(), ",") << "]";
    os << " in(";
    for (size_t i = 0; i < e->num_inputs(); ++i) {
      const auto& d = e->get_input_port_descriptor(i);
      os << (i ? ", " : "") << expr_name(*e->input_expr(i)) << ":" << e->get_input_port_connector(i)->get_source().get_index()
         << " " << shape_str(d.shape) << " sub=" << shape_str(d.subtensor) << " r" << d.reg;
    }
    os << ") out(";
    for (size_t i = 0; i < e->num_outputs(); ++i) {
      const auto& d = e->get_output_port_descriptor(i);
      os << (i ? ", " : "") << shape_str(d.shape) << " sub=" << shape_str(d.subtensor) << " r" << d.reg << " consumers="
         << e->get_output_port_connector(i)->get_consumers().size();
    }
    os << ")";
    if (e->live_begin >= 0) os << " live=[" << e->live_begin << "," << e->live_end << "]";
    os << "\n";
  }
  return os.str();
}

std::string LinearIR::serialize_control_flow() const {
  std::ostringstream os;
  std::string indent;
  for (const auto& e : exprs_) {
    if (e->kind() == OpKind::LoopEnd) indent.resize(indent.size() >= 2 ? indent.size() - 2 : 0);
    os << indent << expr_name(*e);
    if (is_loop_op(e->kind())) {
      const LoopInfo& l = loops_.at(static_cast<size_t>(e->op().attr("loop")));
      os << " loop=" << e->op().attr("loop") << " work_amount=" << l.work_amount << " increment=" << l.increment
         << " dim=" << l.dim_idx << (l.is_tail ? " tail" : "");
      if (e->kind() == OpKind::LoopEnd) {
        os << " shifts={";
        bool first = true;
        for (const auto* ports : {&l.entry_points, &l.exit_points})
          for (const auto& p : *ports) {
            os << (first ? "" : ", ") << expr_name(*p.expr) << ":" << (p.is_incremented ? p.ptr_increment : 0) << "/"
               << (p.is_incremented ? p.finalization_offset : 0);
            first = false;
          }
        os << "}";
      }
    } else {
      for (const auto& [k, v] : e->op().attrs) os << " " << k << "=" << v;
      if (e->num_outputs() && e->get_output_port_descriptor(0).reg >= 0) os << " -> r" << e->get_output_port_descriptor(0).reg;
    }
    os << "\n";
    if (e->kind() == OpKind::LoopBegin) indent += "  ";
  }
  return os.str();
}

std::string LinearIR::serialize_data_flow() const {
  std::ostringstream os;
  for (const auto& e : exprs_) {
    if (is_loop_op(e->kind())) continue;
    os << expr_name(*e) << "(";
    for (size_t i = 0; i < e->num_inputs(); ++i) os << (i ? ", " : "") << expr_name(*e->input_expr(i));
    os << ")";
    for (const auto& [k, v] : e->op().attrs) os << " " << k << "=" << v;
    if (e->num_outputs()) os << " " << shape_str(e->get_output_port_descriptor(0).shape);
    os << "\n";
  }
  return os.str();
}

}  // namespace kiln::snippets::lowered
