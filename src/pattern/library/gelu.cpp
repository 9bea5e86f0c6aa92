// GELU in its exported orderings (gelu.json). Every config labels the Mul by 0.5 "half" and the
// Add of 1 "plus_one", wherever the ordering puts them. Exact GELU also has scale_x (x / sqrt 2)
// and erf; tanh GELU has cube (x^3), cube_coeff (* 0.044715), inner, tanh_scale (* sqrt(2/pi))
// and tanh.
#include "pattern/library/checks.hpp"
#include "pattern/library/fusions.hpp"

namespace kiln::pattern::library {

namespace {

constexpr double kSqrt2 = 1.41421356237309504880;
constexpr double kSqrt2OverPi = 0.79788456080286535588;

// x: the tensor of same_tensors group 0, when it is floating-point (Gelu / FastGelu take no other).
const ir::Value* gelu_input(const Match& m) {
  const ir::Value* x = m.resolve(m.config().same_tensors.at(0).at(0));
  return x && is_floating(x->type.dtype) ? x : nullptr;
}

// x / sqrt(2) as Div(x, sqrt 2) or Mul(x, 1/sqrt 2) (either order).
bool erf_scale_ok(const ir::Node* n, const ir::Value* x) {
  if (n->op_type() == "Div") return n->input(0) == x && scalar_near(n->input(1), x, kSqrt2);
  return scalar_near(other_input(n, x), x, 1.0 / kSqrt2);
}

}  // namespace

bool gelu_erf_ok(const Match& m) {
  const ir::Value* x = gelu_input(m);
  if (!x) return false;
  // erf of x / sqrt(2), nothing else
  if (!erf_scale_ok(m.node("scale_x"), x)) return false;
  // 1 + erf(...) and the factor 0.5
  return operand_near(m, "plus_one", x, 1.0) && operand_near(m, "half", x, 0.5);
}

bool fast_gelu_ok(const Match& m) {
  const ir::Value* x = gelu_input(m);
  if (!x) return false;
  // x^3 * 0.044715: the cubic term of the tanh approximation
  if (!operand_near(m, "cube", x, 3.0) || !operand_near(m, "cube_coeff", x, 0.044715)) return false;
  // tanh of sqrt(2/pi) * (...)
  if (!operand_near(m, "tanh_scale", x, kSqrt2OverPi)) return false;
  // 1 + tanh(...) and the factor 0.5
  return operand_near(m, "plus_one", x, 1.0) && operand_near(m, "half", x, 0.5);
}

}  // namespace kiln::pattern::library
