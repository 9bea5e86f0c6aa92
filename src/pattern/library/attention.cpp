// Scaled dot-product attention split into heads by Reshape + Transpose (attention.json).
// Labels: reshape_q / transpose_q, reshape_k / transpose_k, reshape_v / transpose_v, matmul_qk,
// scale, add_mask (only in attention), softmax, matmul_pv, transpose_o, reshape_o.
#include <kiln/error.hpp>

#include <cmath>
#include <optional>

#include "core/strings.hpp"
#include "ir/qdq_params.hpp"
#include "pattern/library/checks.hpp"
#include "pattern/library/fusions.hpp"

namespace kiln::pattern::library {

namespace {

bool perm_is(const ir::Node* t, const std::vector<int64_t>& want) { return t->attr_ints("perm", {}) == want; }

// Reshape of a rank-3 [B, S, H*D] tensor to [B, S, H, D] by a constant shape; H, or -1.
int64_t heads_of_split(const ir::Node* r) {
  const ir::Value* x = r->input(0);
  if (rank_of(x) != 3 || !r->input(1) || !r->input(1)->is_constant()) return -1;
  const ir::PartialShape& out = r->output(0)->type.shape;
  if (!out.rank_known || out.rank() != 4 || !out.dims[2].is_static() || !out.dims[3].is_static()) return -1;
  const ir::PartialShape& in = x->type.shape;
  if (!in.dims[2].is_static() || in.dims[2].value != out.dims[2].value * out.dims[3].value) return -1;
  if (!(in.dims[0] == out.dims[0]) || !(in.dims[1] == out.dims[1])) return -1;
  return out.dims[2].value;
}

}  // namespace

bool attention_ok(const Match& m) {
  // Q, K and V all split into the same number of heads
  const int64_t h = heads_of_split(m.node("reshape_q"));
  if (h < 1 || heads_of_split(m.node("reshape_k")) != h || heads_of_split(m.node("reshape_v")) != h) return false;
  // MultiHeadAttention is f32 only
  const ir::Value* q = m.node("reshape_q")->input(0);
  if (q->type.dtype != DType::f32) return false;
  // heads first: Q, V -> [B, H, S, D], K -> [B, H, D, S], and the output back to [B, S, H, D]
  if (!perm_is(m.node("transpose_q"), {0, 2, 1, 3}) || !perm_is(m.node("transpose_k"), {0, 2, 3, 1}) ||
      !perm_is(m.node("transpose_v"), {0, 2, 1, 3}) || !perm_is(m.node("transpose_o"), {0, 2, 1, 3}))
    return false;
  // the scale: MatMul output / c or * c, c a finite non-zero scalar constant
  const ir::Node* sc = m.node("scale");
  const ir::Value* scores = m.node("matmul_qk")->output(0);
  const ir::Value* s = sc->input(0) == scores ? sc->input(1) : nullptr;
  if (!s && sc->op_type() == "Mul" && sc->input(1) == scores) s = sc->input(0);
  const Tensor* c = scalar_constant(s, sc->output(0));
  if (!c || c->to_f64()[0] == 0 || !std::isfinite(c->to_f64()[0])) return false;
  // softmax over the key axis
  const ir::Node* sm = m.node("softmax");
  const int64_t axis = sm->attr_i("axis", sm->opset() >= 13 ? -1 : 1);
  if (axis != -1 && axis != 3) return false;
  // an additive f32 mask of rank <= 4, when the variant has one
  if (m.has("add_mask")) {
    const ir::Value* mask = outside_operand(m, "add_mask");
    if (!mask || mask->type.dtype != DType::f32 || rank_of(mask) < 0 || rank_of(mask) > 4) return false;
  }
  // the merge back: [B, H, S, Dv] -> [B, S, H, Dv] -> [B, S, H*Dv]
  const ir::PartialShape& out = m.node("reshape_o")->output(0)->type.shape;
  return out.rank_known && out.rank() == 3;
}

void attention_fixup(Rewrite& r, ir::Graph&) {
  ir::Node* mha = r.new_nodes.at(0);
  const Tensor* shape = r.returned("reshape_q").constant_input(1);
  KILN_CHECK(shape && shape->size() == 4, cat(mha->describe(), ": attention fusion lost the head split"));
  const OldNode& sc = r.returned("scale");
  const Tensor* c = outside_constant(sc);
  KILN_CHECK(c, cat(mha->describe(), ": attention fusion lost its scale"));
  const double v = c->to_f64()[0];
  mha->attrs["num_heads"] = ir::Attribute(shape->to_i64()[2]);
  mha->attrs["scale"] = ir::Attribute(static_cast<float>(sc.op_type == "Div" ? 1.0 / v : v));
}

namespace {

// A QuantizeLinear / DequantizeLinear with usable per-tensor 8-bit parameters (ir/qdq_params.hpp).
std::optional<ir::QdqParams> per_tensor_8bit(const ir::Node* n) {
  if (!n->is_onnx_domain()) return std::nullopt;
  std::string why;
  std::optional<ir::QdqParams> p = ir::read_qdq_params(*n, n->input(0)->type.shape, &why);
  if (!p || p->axis >= 0 || (p->quantized_type() != DType::u8 && p->quantized_type() != DType::i8)) return std::nullopt;
  return p;
}

}  // namespace

bool attention_qdq_ok(const Match& m) {
  if (!attention_ok(m)) return false;
  // the probabilities through one QuantizeLinear -> DequantizeLinear pair, per tensor, the same
  // parameters on both sides
  const auto q = per_tensor_8bit(m.node("quantize_p")), d = per_tensor_8bit(m.node("dequantize_p"));
  return q && d && static_cast<float>(q->scales[0]) == static_cast<float>(d->scales[0]) &&
         q->zero_points[0] == d->zero_points[0] && q->quantized_type() == d->quantized_type();
}

void attention_qdq_fixup(Rewrite& r, ir::Graph& g) {
  attention_fixup(r, g);
  ir::Node* mha = r.new_nodes.at(0);
  const OldNode& q = r.returned("quantize_p");
  const Tensor* scale = q.constant_input(1);
  KILN_CHECK(scale && scale->size() == 1, cat(mha->describe(), ": attention fusion lost the probabilities' scale"));
  const Tensor* zp = q.inputs.size() > 2 ? q.constant_input(2) : nullptr;
  mha->attrs["probs_scale"] = ir::Attribute(scale->data<float>()[0]);
  mha->attrs["probs_zero_point"] = ir::Attribute(zp ? zp->to_i64()[0] : int64_t{0});
  mha->attrs["probs_type"] = ir::Attribute(int64_t{zp && zp->dtype() == DType::i8 ? 3 : 2});
}

}  // namespace kiln::pattern::library
