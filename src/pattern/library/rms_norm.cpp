// RMSNorm (rms_norm.json). Labels: square, mean_square, add_eps, sqrt, normalise (the Div, or
// the Mul after reciprocal), scale (the Mul by gamma).
#include <kiln/error.hpp>

#include "core/strings.hpp"
#include "pattern/library/checks.hpp"
#include "pattern/library/fusions.hpp"

namespace kiln::pattern::library {

bool rms_norm_ok(const Match& m) {
  const ir::Node* square = m.node("square");
  const ir::Value* x = square->input(0);
  // floating-point data with at least one axis to normalise
  if (!x || !is_floating(x->type.dtype) || rank_of(x) < 1) return false;
  // the mean is of x^2 ...
  if (!scalar_near(square->input(1), x, 2.0)) return false;
  // ... over the last axis alone
  if (!reduces_last_axis(m.node("mean_square"), square->output(0))) return false;
  // epsilon: one non-negative constant, which becomes the attribute
  const Tensor* eps = scalar_constant(outside_operand(m, "add_eps"), x);
  if (!eps || !(eps->to_f64()[0] >= 0)) return false;
  // gamma: a 1-D constant of x's last dim, as RMSNormalization takes it
  const ir::Value* gamma = outside_operand(m, "scale");
  const ir::Dim& c = x->type.shape.dims.back();
  return gamma && gamma->is_constant() && gamma->constant().rank() == 1 && c.is_static() &&
         gamma->constant().shape()[0] == c.value;
}

void rms_norm_fixup(Rewrite& r, ir::Graph&) {
  ir::Node* n = r.new_nodes.at(0);
  const Tensor* eps = outside_constant(r.returned("add_eps"));
  KILN_CHECK(eps, cat(n->describe(), ": RMSNorm fusion lost its epsilon constant"));
  n->attrs["epsilon"] = ir::Attribute(static_cast<float>(eps->to_f64()[0]));
}

}  // namespace kiln::pattern::library
