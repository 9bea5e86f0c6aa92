#include <kiln/error.hpp>

#include <limits>

#include "core/strings.hpp"
#include "snippets/lowered/pass/passes.hpp"

namespace kiln::snippets::lowered::pass {

namespace {

// A value's descriptor: the master shape for vectors, [rows, 1] for per-row values.
void set_shape(const ExpressionPtr& e, std::vector<int64_t> shape) { e->get_output_port_descriptor(0).shape = std::move(shape); }

}  // namespace

// Softmax(x) = e / sum(e) with e = exp(x - max(x)), and LogSoftmax(x) = (x - max(x)) -
// log(sum(e)), along the inner dim, written with the ops a kernel runs: each reduction is a
// VectorFill (the start value) updated in place by an Accumulate* per vector and folded to
// one value by a Horizon*. MarkLoops then gives every op reading a Horizon's value an inner
// loop of its own after the one that accumulated it.
size_t decompose_reductions(LinearIR& lir) {
  std::vector<ExpressionPtr> todo;
  for (auto& e : lir.expressions())
    if (is_reduction_op(e->kind())) todo.push_back(e);
  const auto& master = lir.master_shape();
  KILN_CHECK(todo.empty() || master.size() == 2, "DecomposeReductions: the master shape must be 2-D [rows, inner]");
  const std::vector<int64_t> per_row = todo.empty() ? std::vector<int64_t>{} : std::vector<int64_t>{master[0], 1};
  for (const ExpressionPtr& r : todo) {
    KILN_CHECK(r->num_inputs() == 1 && r->num_outputs() == 1, cat("DecomposeReductions: ", expr_name(*r), " needs one input"));
    auto pos = lir.find(r.get());
    const ExpressionPort x = r->get_input_port_connector(0)->get_source();
    auto node = [&](const std::string& type, const std::vector<ExpressionPort>& ins, double value = 0,
                    const std::vector<int64_t>& shape = {}) {
      Op op{type, {}};
      if (type == "VectorFill") op.attrs["value"] = value;
      auto e = lir.insert_node(pos, op, ins, 1, {});
      set_shape(e, shape.empty() ? master : shape);
      return e;
    };
    auto fill_max = node("VectorFill", {}, -std::numeric_limits<double>::infinity());
    auto acc_max = node("AccumulateMax", {fill_max->get_output_port(0), x});
    auto max = node("HorizonMax", {acc_max->get_output_port(0)}, 0, per_row);
    auto shifted = node("Sub", {x, max->get_output_port(0)});
    auto exp = node("Exp", {shifted->get_output_port(0)});
    auto fill_sum = node("VectorFill", {}, 0.0);
    auto acc_sum = node("AccumulateSum", {fill_sum->get_output_port(0), exp->get_output_port(0)});
    auto sum = node("HorizonSum", {acc_sum->get_output_port(0)}, 0, per_row);
    ExpressionPtr y;
    if (r->kind() == OpKind::Softmax) {
      auto inv = node("Reciprocal", {sum->get_output_port(0)}, 0, per_row);
      y = node("Mul", {exp->get_output_port(0), inv->get_output_port(0)});
    } else {
      auto log = node("Log", {sum->get_output_port(0)}, 0, per_row);
      y = node("Sub", {shifted->get_output_port(0), log->get_output_port(0)});
    }
    auto consumers = r->get_output_port_connector(0)->get_consumers();
    for (const auto& c : consumers) LinearIR::connect(y->get_output_port(0), c);
    lir.erase(lir.find(r.get()));
  }
  return todo.size();
}

}  // namespace kiln::snippets::lowered::pass
