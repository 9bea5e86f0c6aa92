// LayerNorm as PyTorch decomposes it (layer_norm.json). Labels: mean, centre, square, variance,
// add_eps, sqrt, normalise, then scale (gamma; not in layer_norm_no_affine) and bias (beta; only
// in layer_norm).
#include <kiln/error.hpp>

#include "core/dispatch.hpp"
#include "core/strings.hpp"
#include "pattern/library/checks.hpp"
#include "pattern/library/fusions.hpp"

namespace kiln::pattern::library {

namespace {

// gamma / beta must broadcast like a LayerNormalization parameter over the last axis: rank <= 1,
// or a constant whose leading dims are all 1 (the fix-up reshapes it to 1-D).
bool layer_norm_param_ok(const ir::Value* p, const ir::Value* x) {
  if (!p) return false;
  const int pr = rank_of(p);
  if (pr < 0) return false;
  if (pr <= 1) return true;
  if (!p->is_constant() || rank_of(x) < pr) return false;
  const Shape& s = p->constant().shape();
  for (size_t i = 0; i + 1 < s.size(); ++i)
    if (s[i] != 1) return false;
  return true;
}

Tensor ones(DType dt, int64_t n) {
  Tensor t(dt, Shape{n});
  dispatch_float(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = T(1.0f);
  }, "LayerNorm fusion");
  return t;
}

}  // namespace

bool layer_norm_ok(const Match& m) {
  const ir::Node* mean = m.node("mean");
  const ir::Node* square = m.node("square");
  const ir::Value* x = mean->input(0);
  // LayerNormalization takes floating-point data only
  if (!x || !is_floating(x->type.dtype)) return false;
  // both means over the last axis alone (the fused node's axis -1), dims kept for the broadcasts
  if (!reduces_last_axis(mean, x) || !reduces_last_axis(m.node("variance"), square->output(0))) return false;
  // the variance is the mean of the square, not of another power
  if (!scalar_near(square->input(1), x, 2.0)) return false;
  // epsilon: one non-negative constant, which becomes the attribute
  const Tensor* eps = scalar_constant(outside_operand(m, "add_eps"), x);
  if (!eps || !(eps->to_f64()[0] >= 0)) return false;
  // gamma and beta must be usable as LayerNormalization's scale and bias
  if (m.has("scale") && !layer_norm_param_ok(m.input("scale", {0, 1}), x)) return false;
  if (m.has("bias") && !layer_norm_param_ok(m.input("bias", {0, 1}), x)) return false;
  // without gamma the fix-up makes a scale of ones: it needs the normalised size
  if (!m.has("scale")) {
    const int r = rank_of(x);
    if (r < 1 || !x->type.shape.dims.back().is_static()) return false;
  }
  return true;
}

void layer_norm_fixup(Rewrite& r, ir::Graph& g) {
  ir::Node* ln = r.new_nodes.at(0);
  const Tensor* eps = outside_constant(r.returned("add_eps"));
  KILN_CHECK(eps, cat(ln->describe(), ": LayerNorm fusion lost its epsilon constant"));
  ln->attrs["axis"] = ir::Attribute(int64_t{-1});
  ln->attrs["epsilon"] = ir::Attribute(static_cast<float>(eps->to_f64()[0]));
  const ir::Value* x = ln->input(0);
  if (ln->num_inputs() == 1) {  // layer_norm_no_affine: LayerNormalization needs a scale
    const int64_t c = x->type.shape.dims.back().value;
    g.append_node_input(ln, g.add_constant(g.unique_name(cat(ln->name(), "_scale")), ones(x->type.dtype, c)));
  }
  for (size_t i = 1; i < ln->num_inputs(); ++i) {
    ir::Value* p = ln->input(i);
    if (p->type.shape.rank_known && p->type.shape.rank() > 1) {
      const Tensor& t = p->constant();
      ir::Value* flat = g.add_constant(g.unique_name(cat(p->name(), "_1d")), t.reshaped({t.shape().back()}));
      g.set_node_input(ln, i, flat);
    }
  }
}

}  // namespace kiln::pattern::library
