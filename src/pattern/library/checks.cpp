#include "pattern/library/checks.hpp"

#include <cmath>

namespace kiln::pattern::library {

bool approx(double v, double want) { return std::abs(v - want) <= 1e-3 * std::abs(want) + 1e-7; }

int rank_of(const ir::Value* v) {
  return v && v->type.shape.rank_known ? static_cast<int>(v->type.shape.rank()) : -1;
}

const Tensor* scalar_constant(const ir::Value* c, const ir::Value* x) {
  if (!c || !c->is_constant() || c->constant().size() != 1) return nullptr;
  const int xr = rank_of(x);
  const int cr = static_cast<int>(c->constant().rank());
  if (cr > 0 && (xr < 0 || cr > xr)) return nullptr;
  return &c->constant();
}

bool scalar_near(const ir::Value* c, const ir::Value* x, double want) {
  const Tensor* t = scalar_constant(c, x);
  return t && approx(t->to_f64()[0], want);
}

const ir::Value* other_input(const ir::Node* n, const ir::Value* x) {
  if (n->num_inputs() != 2) return nullptr;
  if (n->input(0) == x) return n->input(1);
  if (n->input(1) == x) return n->input(0);
  return nullptr;
}

const ir::Value* outside_operand(const Match& m, const std::string& label) {
  const ir::Node* n = m.node(label);
  if (n->num_inputs() != 2) return nullptr;
  const bool in0 = m.produced_inside(n->input(0)), in1 = m.produced_inside(n->input(1));
  if (in0 == in1) return nullptr;
  return in0 ? n->input(1) : n->input(0);
}

bool operand_near(const Match& m, const std::string& label, const ir::Value* x, double want) {
  const ir::Value* c = other_input(m.node(label), x);
  if (!c) c = outside_operand(m, label);
  return scalar_near(c, x, want);
}

bool reduces_last_axis(const ir::Node* n, const ir::Value* in) {
  if (n->attr_i("keepdims", 1) != 1) return false;
  std::vector<int64_t> axes;
  if (n->num_inputs() >= 2 && n->has_input(1)) {  // opset-18 form: axes as an input
    if (!n->input(1)->is_constant()) return false;
    axes = n->input(1)->constant().to_i64();
  } else {
    axes = n->attr_ints("axes", {});
  }
  if (axes.size() != 1) return false;
  if (axes[0] == -1) return true;
  const int r = rank_of(in);
  return r > 0 && axes[0] == r - 1;
}

const Tensor* outside_constant(const OldNode& n) {
  for (size_t i = 0; i < n.inputs.size(); ++i)
    if (!n.inputs[i].from_pattern && n.constant_input(i)) return n.constant_input(i);
  return nullptr;
}

}  // namespace kiln::pattern::library
