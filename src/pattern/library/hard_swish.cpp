// x * clip(x + 3, 0, 6) / 6 and its clip(x + 3, 0, 6) / 6 core (hard_swish.json). Labels:
// add_three, clip, over_six (the Div by 6 or Mul by 1/6), and times_x in the hard-swish configs.
#include <limits>
#include <optional>
#include <utility>

#include "pattern/library/checks.hpp"
#include "pattern/library/fusions.hpp"

namespace kiln::pattern::library {

namespace {

// Clip's bounds from its constant inputs (opset >= 11) or attributes; nullopt if not constant.
std::optional<std::pair<double, double>> clip_bounds(const ir::Node* c) {
  double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
  auto bound = [&](size_t i, const char* attr, double& v) {
    if (c->num_inputs() > i && c->has_input(i)) {
      const ir::Value* b = c->input(i);
      if (!b->is_constant() || b->constant().size() != 1) return false;
      v = b->constant().to_f64()[0];
    } else if (c->has_attr(attr)) {
      v = c->attr_f(attr);
    }
    return true;
  };
  if (!bound(1, "min", lo) || !bound(2, "max", hi)) return std::nullopt;
  return std::make_pair(lo, hi);
}

}  // namespace

bool relu6_over_6_ok(const Match& m) {
  // x: the Add's operand from outside (the one beside the 3)
  const ir::Value* x = outside_operand(m, "add_three");
  if (!x) x = m.node("add_three")->input(0);
  // HardSwish / HardSigmoid take floating-point data only
  if (!x || !is_floating(x->type.dtype)) return false;
  // x + 3
  if (!operand_near(m, "add_three", x, 3.0)) return false;
  // clipped to [0, 6]
  auto b = clip_bounds(m.node("clip"));
  if (!b || !approx(b->first, 0.0) || !approx(b->second, 6.0)) return false;
  // then / 6 or * 1/6; the config pins input 0 to the chain, so the constant is input 1
  const ir::Node* d = m.node("over_six");
  return d->num_inputs() == 2 && scalar_near(d->input(1), x, d->op_type() == "Div" ? 6.0 : 1.0 / 6.0);
}

void hard_sigmoid_fixup(Rewrite& r, ir::Graph&) {
  ir::Node* n = r.new_nodes.at(0);
  n->attrs["alpha"] = ir::Attribute(static_cast<float>(1.0 / 6.0));
  n->attrs["beta"] = ir::Attribute(0.5f);
}

}  // namespace kiln::pattern::library
