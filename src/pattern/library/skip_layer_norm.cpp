// A residual Add feeding a LayerNormalization (skip_layer_norm.json). Labels: residual_add,
// layer_norm.
#include "pattern/library/fusions.hpp"

namespace kiln::pattern::library {

bool skip_layer_norm_ok(const Match& m) {
  const ir::Node* add = m.node("residual_add");
  const ir::Node* ln = m.node("layer_norm");
  const ir::Value *a = add->input(0), *b = add->input(1);
  // SkipLayerNormalization adds two f32 tensors of one shape, without broadcasting: equal dims,
  // each a number or the same symbol (equal for every input shape), the last one a number
  if (!a || !b || a->type.dtype != DType::f32 || b->type.dtype != DType::f32) return false;
  const ir::PartialShape &sa = a->type.shape, &sb = b->type.shape;
  if (!sa.rank_known || sa.dims.empty() || !(sa == sb) || !sa.dims.back().is_static()) return false;
  for (const ir::Dim& d : sa.dims)
    if (d.is_unknown()) return false;
  // a LayerNormalization with gamma and beta and only its normalised output
  if (ln->num_inputs() != 3 || ln->num_outputs() != 1) return false;
  // normalised over the last axis, the only one SkipLayerNormalization knows
  const int64_t axis = ln->attr_i("axis", -1);
  if (axis != -1 && axis != static_cast<int64_t>(sa.rank()) - 1) return false;
  // gamma and beta: 1-D constants of the last dim
  for (size_t i = 1; i < 3; ++i) {
    const ir::Value* p = ln->input(i);
    if (!p || !p->is_constant() || p->constant().rank() != 1 || p->constant().shape()[0] != sa.dims.back().value)
      return false;
  }
  return true;
}

void skip_layer_norm_fixup(Rewrite& r, ir::Graph&) {
  r.new_nodes.at(0)->attrs["epsilon"] = ir::Attribute(r.returned("layer_norm").attr_f("epsilon", 1e-5f));
}

}  // namespace kiln::pattern::library
