#include "transforms/remove_identity_ops.hpp"

#include "core/onnx_dtype.hpp"
#include "core/strings.hpp"
#include "transforms/graph_edit.hpp"

namespace kiln::transforms {

namespace {

// A node this pass looks at: `x` is the value its output would equal. `reason` is empty
// when the node can go, else the first condition that failed.
struct Match {
  bool candidate = false;
  ir::Value* x = nullptr;
  std::string reason;
};

// Empty when broadcasting a constant of shape `c` against x (shape `xs`) provably leaves
// x's shape as it is; otherwise why that cannot be shown.
std::string growth(const ir::PartialShape& xs, const Shape& c) {
  if (!xs.rank_known) return cat("the rank of the other operand is unknown");
  if (c.size() > xs.rank())
    return cat("the constant of shape ", shape_to_string(c), " has a higher rank than the other operand ",
               xs.to_string(), " (broadcasting would grow it)");
  for (size_t i = 0; i < c.size(); ++i) {
    const int64_t d = c[c.size() - 1 - i];
    const ir::Dim& xd = xs.dims[xs.rank() - 1 - i];
    if (d == 1 || (xd.is_static() && xd.value == d)) continue;
    return cat("the constant of shape ", shape_to_string(c), " would broadcast the other operand ", xs.to_string(),
               " to a larger shape");
  }
  return "";
}

Match match_binary(const ir::Node& n) {
  const std::string& op = n.op_type();
  double neutral;
  bool commutative;
  if (op == "Mul") neutral = 1, commutative = true;
  else if (op == "Add") neutral = 0, commutative = true;
  else if (op == "Div" || op == "Pow") neutral = 1, commutative = false;
  else if (op == "Sub") neutral = 0, commutative = false;
  else return {};
  if (n.num_inputs() != 2 || !n.input(0) || !n.input(1)) return {};
  auto neutral_const = [&](const ir::Value* v) { return v->is_constant() && all_equal(v->constant(), neutral); };
  Match m;
  const ir::Value* c = nullptr;
  if (neutral_const(n.input(1))) {
    m.x = n.input(0);
    c = n.input(1);
  } else if (commutative && neutral_const(n.input(0))) {
    m.x = n.input(1);
    c = n.input(0);
  } else {
    return {};
  }
  m.candidate = true;
  m.reason = growth(m.x->type.shape, c->constant().shape());
  return m;
}

Match match(const ir::Graph& g, const ir::Node& n) {
  if (!is_onnx_domain(n) || n.num_inputs() == 0 || !n.input(0) || n.num_outputs() == 0) return {};
  const std::string& op = n.op_type();
  Match m;
  m.x = n.input(0);
  if (op == "Identity") {
    m.candidate = true;
  } else if (op == "Dropout") {
    m.candidate = true;
    if (const ir::Value* tm = n.input(2)) {
      if (!tm->is_constant()) m.reason = cat("its training_mode input '", tm->name(), "' is not a constant");
      else if (!all_equal(tm->constant(), 0)) m.reason = "its training_mode input is true";
    }
    if (m.reason.empty() && n.num_outputs() > 1) {
      std::string r = other_reader(g, n.output(1), nullptr);
      if (!r.empty()) m.reason = cat("its mask output '", n.output(1)->name(), "' is read by ", r);
    }
  } else if (op == "Pad") {
    // no padding on any side: every mode copies x as it is
    const ir::Value* pads = n.input(1);
    if (pads) {
      if (!pads->is_constant()) return {};
      if (!all_equal(pads->constant(), 0)) return {};
    } else if (!n.has_attr("pads") || n.attr_ints("pads") != std::vector<int64_t>(n.attr_ints("pads").size(), 0)) {
      return {};
    }
    m.candidate = true;
  } else if (op == "Transpose") {
    // the identity permutation (an absent perm reverses the dims: only rank <= 1 stays)
    const int64_t rank = m.x->type.shape.rank_known ? static_cast<int64_t>(m.x->type.shape.rank()) : -1;
    if (rank < 0) return {};
    std::vector<int64_t> keep(static_cast<size_t>(rank));
    for (int64_t i = 0; i < rank; ++i) keep[static_cast<size_t>(i)] = i;
    if (n.has_attr("perm") ? n.attr_ints("perm") != keep : rank > 1) return {};
    m.candidate = true;
  } else if (op == "Cast") {
    if (!n.has_attr("to") || m.x->type.dtype == DType::undefined) return {};
    DType to;
    try {
      to = dtype_from_onnx_code(n.attr_i("to"), n.describe());
    } catch (const Error&) {
      return {};
    }
    if (to != m.x->type.dtype) return {};
    m.candidate = true;
  } else {
    return match_binary(n);
  }
  return m;
}

}  // namespace

size_t remove_identity_ops(ir::Graph& g, PassLog* log) {
  GraphEditor ed(g);
  size_t count = 0;
  for (ir::Node* n : g.topo_order()) {
    if (ed.erased(n)) continue;
    Match m = match(g, *n);
    if (!m.candidate) continue;
    ir::Value* y = n->output(0);
    const std::string op = n->op_type();
    if (m.reason.empty() && (m.x->type.dtype == DType::undefined || y->type.dtype != m.x->type.dtype))
      m.reason = cat("its output type ", dtype_name(y->type.dtype), " differs from its input's ",
                     dtype_name(m.x->type.dtype));
    if (m.reason.empty()) m.reason = why_not_replaceable(g, y, m.x);
    if (!m.reason.empty()) {
      if (log) log->skipped(kRemoveIdentityOps, n->name(), cat(op, " not removed: ", m.reason));
      continue;
    }
    const std::string where = n->name();
    const std::string from = y->name();
    const std::string x_name = m.x->name();
    const bool output = g.is_output(y);
    ed.replace_and_erase(n, y, m.x);
    ++count;
    if (log)
      log->applied(kRemoveIdentityOps, where,
                   output ? cat(op, " removed; '", x_name, "' is renamed to the graph output '", from, "'")
                          : cat(op, " removed; its readers read '", x_name, "'"));
  }
  return count;
}

}  // namespace kiln::transforms
