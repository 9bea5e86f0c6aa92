#include "transforms/qdq_to_qlinear.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "core/strings.hpp"
#include "transforms/graph_edit.hpp"
#include "ir/qdq_params.hpp"

namespace kiln::transforms {

namespace {

bool is_8bit(DType t) { return t == DType::u8 || t == DType::i8; }
double qmin_of(DType t) { return t == DType::u8 ? 0.0 : -128.0; }
double qmax_of(DType t) { return t == DType::u8 ? 255.0 : 127.0; }

// A DequantizeLinear producing a value: its quantized input, constant scale and zero point.
struct Dq {
  ir::Node* node = nullptr;
  ir::Value* q = nullptr;      // the quantized tensor
  ir::Value* scale = nullptr;  // constant f32
  ir::Value* zp = nullptr;     // constant, or null (0)
  int64_t axis = -1;           // -1: per tensor
  DType type() const { return q->type.dtype; }
  size_t count() const { return static_cast<size_t>(scale->constant().size()); }
};

// Where a skip starts: the float op's description.
struct Why {
  std::string text;
  bool fail(std::string s) {
    text = std::move(s);
    return false;
  }
};

// The DequantizeLinear producing `v`, if any, with usable parameters (qdq_params.hpp).
std::optional<Dq> dq_of(const ir::Value* v, Why& why) {
  ir::Node* n = v ? v->producer() : nullptr;
  if (!n || n->op_type() != "DequantizeLinear" || !n->is_onnx_domain())
    return why.fail(cat("'", v ? v->name() : "?", "' is not made by a DequantizeLinear")), std::nullopt;
  const std::optional<ir::QdqParams> p = ir::read_qdq_params(*n, n->input(0)->type.shape, &why.text);
  if (!p) return std::nullopt;
  return Dq{n, n->input(0), p->scale, p->zero_point, p->axis};
}

// An 8-bit activation quantized per tensor.
std::optional<Dq> activation_dq(const ir::Value* v, Why& why) {
  std::optional<Dq> d = dq_of(v, why);
  if (!d) return d;
  if (!is_8bit(d->type())) return why.fail(cat("'", d->q->name(), "' is ", dtype_name(d->type()), ", not u8 / s8")), std::nullopt;
  if (d->axis >= 0) return why.fail(cat(d->node->describe(), " is per axis (activations must be per tensor)")), std::nullopt;
  return d;
}

struct Quant {
  ir::Node* node = nullptr;
  DType type = DType::u8;
  double scale = 1;
  int64_t zp = 0;
};

// The QuantizeLinear that alone reads `v` (no graph output): per tensor, 8-bit.
std::optional<Quant> sole_quantize(const ir::Graph& g, const ir::Value* v, Why& why) {
  if (g.is_output(v)) return why.fail(cat("'", v->name(), "' is a graph output")), std::nullopt;
  if (v->uses().size() != 1) return why.fail(cat("'", v->name(), "' is read by ", v->uses().size(), " nodes")), std::nullopt;
  ir::Node* q = v->uses()[0].node;
  if (q->op_type() != "QuantizeLinear" || !q->is_onnx_domain() || v->uses()[0].input_index != 0)
    return why.fail(cat("'", v->name(), "' is read by ", q->describe(), ", not a QuantizeLinear")), std::nullopt;
  const std::optional<ir::QdqParams> p = ir::read_qdq_params(*q, v->type.shape, &why.text);
  if (!p) return std::nullopt;
  if (p->axis >= 0) return why.fail(cat(q->describe(), " is per axis")), std::nullopt;
  Quant r{q, p->quantized_type(), p->scales[0], p->zero_points[0]};
  if (!is_8bit(r.type)) return why.fail(cat(q->describe(), " writes ", dtype_name(r.type), ", not u8 / s8")), std::nullopt;
  return r;
}

// The clamp [lo, hi] a Relu or Clip applies (constant bounds), else nullopt.
std::optional<std::pair<double, double>> clamp_of(const ir::Node& n) {
  if (!n.is_onnx_domain() || n.num_outputs() != 1) return std::nullopt;
  constexpr double inf = std::numeric_limits<double>::infinity();
  if (n.op_type() == "Relu") return std::make_pair(0.0, inf);
  if (n.op_type() != "Clip") return std::nullopt;
  if (n.opset() < 11) return std::make_pair(double(n.attr_f("min", -3.4028234e38f)), double(n.attr_f("max", 3.4028234e38f)));
  double b[2] = {-inf, inf};
  for (size_t i = 1; i <= 2; ++i) {
    const ir::Value* v = n.input(i);
    if (!v) continue;
    if (!v->is_constant() || v->constant().size() != 1) return std::nullopt;
    b[i - 1] = v->constant().to_f64()[0];
  }
  return std::make_pair(b[0], b[1]);
}

// The op's output `y` through an optional Relu / Clip, to the QuantizeLinear after it. Where
// the clamp's bounds quantize (as QuantizeLinear computes, in float) to the ends of the 8-bit
// range, the saturation does its work and it is dropped; otherwise (a symmetric range, as
// TensorRT-style QDQ models have: Relu's 0 is the zero point) `clamp` receives its bounds in
// the 8-bit domain, for a Clip on the integer result. Exact either way: rounding and
// saturating are monotone, so quantizing a clamped value is clamping the quantized one to the
// quantized bounds.
struct Clamp8 {
  int64_t lo = 0, hi = 0;
};
std::optional<Quant> quantize_after(const ir::Graph& g, const ir::Value* y, Why& why, std::optional<Clamp8>* clamp) {
  if (!g.is_output(y) && y->uses().size() == 1) {
    const ir::Node& act = *y->uses()[0].node;
    if (auto bounds = clamp_of(act)) {
      std::optional<Quant> q = sole_quantize(g, act.output(0), why);
      if (!q) return q;
      const double qmin = qmin_of(q->type), qmax = qmax_of(q->type);
      auto quantized = [&](double v) {
        if (std::isinf(v)) return v < 0 ? qmin : qmax;
        const double r = std::nearbyint(static_cast<float>(v) / static_cast<float>(q->scale)) + static_cast<double>(q->zp);
        return std::clamp(r, qmin, qmax);
      };
      const double lo = quantized(bounds->first), hi = quantized(bounds->second);
      if (lo > qmin || hi < qmax) {
        if (!clamp)
          return why.fail(cat(act.describe(), " clamps to [", bounds->first, ", ", bounds->second, "], inside ",
                              q->node->describe(), "'s range")),
                 std::nullopt;
        if (g.opset_for("") < 12) return why.fail(cat(act.describe(), " changes values and Clip takes 8-bit data from opset 12")), std::nullopt;
        *clamp = Clamp8{static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
      }
      return q;
    }
  }
  return sole_quantize(g, y, why);
}

ir::Value* scalar(ir::Graph& g, const std::string& base, DType t, int64_t v) {
  Tensor z(t, Shape{});
  if (t == DType::u8) z.data<uint8_t>()[0] = static_cast<uint8_t>(v);
  else z.data<int8_t>()[0] = static_cast<int8_t>(v);
  return g.add_constant(g.unique_name(base), std::move(z));
}

// The zero point input of a Dq (a zero of its type when absent).
ir::Value* zero_point(ir::Graph& g, const Dq& d) {
  return d.zp ? d.zp : scalar(g, d.node->name() + "_zero_point", d.type(), 0);
}

// The new node takes the QuantizeLinear's place: its readers read `y` (through a Clip on the
// 8-bit result when the op's activation clamps inside the range: quantize_after).
ir::Node* finish(GraphEditor& ed, ir::Node* made, const Quant& q, const std::optional<Clamp8>& clamp = std::nullopt) {
  ir::Graph& g = ed.graph();
  made->set_opset(made->is_onnx_domain() ? g.opset_for("") : 1);
  made->output(0)->type = q.node->output(0)->type;
  ir::Node* last = made;
  if (clamp) {
    ir::Node* clip = g.add_node("Clip",
                                {made->output(0), scalar(g, made->name() + "_clip_min", q.type, clamp->lo),
                                 scalar(g, made->name() + "_clip_max", q.type, clamp->hi)},
                                1, g.unique_name(made->name() + "_clip"));
    clip->set_opset(g.opset_for(""));
    clip->output(0)->type = q.node->output(0)->type;
    last = clip;
  }
  ed.replace_and_erase(q.node, q.node->output(0), last->output(0));
  return made;
}

std::vector<ir::Value*> q_inputs(ir::Graph& g, const Quant& q) {
  ir::Value* zp = q.node->input(2) ? q.node->input(2) : scalar(g, q.node->name() + "_zero_point", DType::u8, 0);
  return {q.node->input(1), zp};
}

// The values a DequantizeLinear of a constant gives, as it computes them in f32: (q - zero_point)
// * scale, per tensor, or per axis when that axis holds every element (a bias); else nullopt.
std::optional<std::vector<double>> dequantized(const Dq& d) {
  const std::vector<double> q = d.q->constant().to_f64(), s = d.scale->constant().to_f64();
  if (s.size() != 1 && s.size() != q.size()) return std::nullopt;
  const std::vector<double> z = d.zp ? d.zp->constant().to_f64() : std::vector<double>(s.size(), 0.0);
  std::vector<double> out;
  for (size_t i = 0; i < q.size(); ++i) {
    const size_t k = s.size() == 1 ? 0 : i;
    out.push_back(static_cast<double>(static_cast<float>(q[i] - z[k]) * static_cast<float>(s[k])));
  }
  return out;
}

// The bias of a Conv as int32 in the scale x_scale * w_scale[m], or null (and `why`).
ir::Value* int32_bias(ir::Graph& g, const ir::Node& conv, const Dq& x, const Dq& w, int64_t M, Why& why) {
  const ir::Value* b = conv.input(2);
  std::vector<double> values;
  if (b->is_constant() && b->constant().dtype() == DType::f32 && b->constant().size() == M) {
    values = b->constant().to_f64();
  } else {
    std::optional<Dq> bd = dq_of(b, why);
    if (!bd) return nullptr;
    if (!bd->q->is_constant() || bd->type() != DType::i32 || bd->q->constant().size() != M)
      return why.fail("the bias is not a constant int32 DequantizeLinear"), nullptr;
    values = *dequantized(*bd);  // M values, one scale or M
  }
  const std::vector<double> sx = x.scale->constant().to_f64(), sw = w.scale->constant().to_f64();
  Tensor t(DType::i32, Shape{M});
  for (int64_t m = 0; m < M; ++m) {
    const double s = static_cast<double>(static_cast<float>(sx[0]) * static_cast<float>(sw[sw.size() == 1 ? 0 : m]));
    const double v = std::nearbyint(values[static_cast<size_t>(m)] / s);
    if (!(std::abs(v) <= 2147483647.0)) return why.fail(cat("the bias of channel ", m, " overflows int32 in the product's scale")), nullptr;
    t.data<int32_t>()[m] = static_cast<int32_t>(v);
  }
  return g.add_constant(g.unique_name(conv.name() + "_bias_int32"), std::move(t));
}

bool try_conv(GraphEditor& ed, ir::Node* n, Why& why) {
  ir::Graph& g = ed.graph();
  std::optional<Dq> x = activation_dq(n->input(0), why);
  if (!x) return false;
  std::optional<Dq> w = dq_of(n->input(1), why);
  if (!w) return false;
  if (!w->q->is_constant() || !is_8bit(w->type())) return why.fail("the weights are not constant 8-bit data");
  const int64_t M = w->q->constant().shape().empty() ? 0 : w->q->constant().shape()[0];
  if (w->axis > 0 || (w->axis == 0 && static_cast<int64_t>(w->count()) != M))
    return why.fail(cat(w->node->describe(), " is per axis ", w->axis, ", not per output channel"));
  std::optional<Clamp8> clamp;
  std::optional<Quant> q = quantize_after(g, n->output(0), why, &clamp);
  if (!q) return false;
  ir::Value* bias = n->input(2) ? int32_bias(g, *n, *x, *w, M, why) : nullptr;
  if (n->input(2) && !bias) return false;
  std::vector<ir::Value*> in = {x->q, x->scale, zero_point(g, *x), w->q, w->scale, zero_point(g, *w)};
  for (ir::Value* v : q_inputs(g, *q)) in.push_back(v);
  if (bias) in.push_back(bias);
  ir::Node* made = g.add_node("QLinearConv", in, 1, g.unique_name(n->name() + "_quant"));
  for (const char* a : {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"})
    if (n->has_attr(a)) made->attrs[a] = n->attrs.at(a);
  finish(ed, made, *q, clamp);
  return true;
}

// A constant f32 bias of `n` columns that an Add alone reading `y` adds: the Add, else null.
ir::Node* bias_add(const ir::Graph& g, const ir::Value* y, int64_t n, ir::Value** bias) {
  if (g.is_output(y) || y->uses().size() != 1) return nullptr;
  ir::Node* add = y->uses()[0].node;
  if (add->op_type() != "Add" || !add->is_onnx_domain() || add->num_inputs() != 2) return nullptr;
  ir::Value* b = add->input(add->input(0) == y ? 1 : 0);
  if (b == y || !b->is_constant() || b->constant().dtype() != DType::f32 || b->constant().size() != n) return nullptr;
  const Shape& s = b->constant().shape();
  if (s.empty() || s.back() != n) return nullptr;  // [..., N]: one value per column
  *bias = b;
  return add;
}

// The projection a x B with a float result as com.microsoft MatMulIntegerToFloat, taking the
// place of `last` (the MatMul or Gemm, or the bias Add after it): B a constant 8-bit [K, N],
// per tensor or per column; `bias` null or a constant f32 of N values.
void integer_projection(GraphEditor& ed, ir::Node* n, ir::Node* last, const Dq& a, ir::Value* b, ir::Value* b_scale,
                        ir::Value* b_zp, ir::Value* bias) {
  ir::Graph& g = ed.graph();
  std::vector<ir::Value*> in = {a.q, b, a.scale, b_scale, zero_point(g, a), b_zp};
  if (bias) in.push_back(bias);
  if (!g.opset_imports.count("com.microsoft")) g.opset_imports["com.microsoft"] = 1;
  ir::Node* made = g.add_node("MatMulIntegerToFloat", in, 1, g.unique_name(n->name() + "_quant"), "com.microsoft");
  made->set_opset(1);
  made->output(0)->type = last->output(0)->type;
  ed.replace_and_erase(last, last->output(0), made->output(0));
}

// DQ(a) x DQ(constant B) -> MatMul whose float result no QuantizeLinear takes (a transformer's
// projection): MatMulIntegerToFloat, with the bias Add that alone follows.
bool matmul_to_float(GraphEditor& ed, ir::Node* n, const Dq& a, const Dq& b, Why& why) {
  ir::Graph& g = ed.graph();
  if (!b.q->is_constant() || b.q->constant().rank() != 2)
    return why.fail("its result stays float and B is not a constant 2-D tensor");
  const int64_t N = b.q->constant().shape()[1];
  ir::Value* bias = nullptr;
  ir::Node* add = bias_add(g, n->output(0), N, &bias);  // none when the result is a graph output
  if (add) bias = g.add_constant(g.unique_name(bias->name() + "_flat"), bias->constant().reshaped(Shape{N}));
  integer_projection(ed, n, add ? add : n, a, b.q, b.scale, zero_point(g, b), bias);
  return true;
}

// The N float values a Gemm's C adds per column (beta applied): a constant f32, or a
// DequantizeLinear of a constant (what quantizers write: int32 in the scale a_scale * b_scale),
// of N values ([N] or [1, N]) or one; null and `why` otherwise.
ir::Value* gemm_bias(ir::Graph& g, const ir::Node& gemm, int64_t N, Why& why) {
  const ir::Value* c = gemm.input(2);
  std::vector<double> values;
  Shape shape;
  if (c->is_constant() && c->constant().dtype() == DType::f32) {
    values = c->constant().to_f64();
    shape = c->constant().shape();
  } else {
    std::optional<Dq> cd = dq_of(c, why);
    if (!cd) return nullptr;
    if (!cd->q->is_constant()) return why.fail("C is not a constant"), nullptr;
    std::optional<std::vector<double>> v = dequantized(*cd);
    if (!v) return why.fail(cat(cd->node->describe(), " is per axis over part of C's values")), nullptr;
    values = std::move(*v);
    shape = cd->q->constant().shape();
  }
  const bool per_column = static_cast<int64_t>(values.size()) == N && !shape.empty() && shape.back() == N;
  if (!per_column && values.size() != 1)
    return why.fail(cat("C has shape ", shape_to_string(shape), ", not one value per column of the [M, ", N, "] result")), nullptr;
  const double beta = gemm.attr_f("beta", 1.0f);
  std::vector<double> bias(static_cast<size_t>(N));
  for (int64_t j = 0; j < N; ++j)
    bias[static_cast<size_t>(j)] = static_cast<double>(static_cast<float>(beta) * static_cast<float>(values[per_column ? j : 0]));
  return add_f32_constant(g, gemm.name() + "_bias", bias, Shape{N});
}

// DQ(A) x DQ(constant B) -> Gemm with a float result (a classifier's last layer, a Linear
// exported from a 2-D input): MatMulIntegerToFloat, B transposed here when transB, alpha folded
// into B's scale and beta into C.
bool try_gemm(GraphEditor& ed, ir::Node* n, Why& why) {
  ir::Graph& g = ed.graph();
  if (n->attr_i("transA", 0) != 0) return why.fail("A is transposed (transA)");
  std::optional<Dq> a = activation_dq(n->input(0), why);
  if (!a) return false;
  std::optional<Dq> b = dq_of(n->input(1), why);
  if (!b) return false;
  if (!is_8bit(b->type()) || !b->q->is_constant() || b->q->constant().rank() != 2)
    return why.fail("B is not a constant 8-bit 2-D tensor");
  const bool trans_b = n->attr_i("transB", 0) != 0;
  const Tensor& bq = b->q->constant();
  const int64_t K = bq.shape()[trans_b ? 1 : 0], N = bq.shape()[trans_b ? 0 : 1];
  if (b->axis >= 0 && (b->axis != (trans_b ? 0 : 1) || static_cast<int64_t>(b->count()) != N))
    return why.fail(cat(b->node->describe(), " is per axis ", b->axis, ", not per column of the result"));
  ir::Value* bias = n->input(2) ? gemm_bias(g, *n, N, why) : nullptr;
  if (n->input(2) && !bias) return false;
  ir::Value* b_kn = b->q;
  if (trans_b) {  // [N, K] -> [K, N], bytes moved once here
    Tensor t(bq.dtype(), Shape{K, N});
    const auto* src = static_cast<const uint8_t*>(bq.raw());
    auto* dst = static_cast<uint8_t*>(t.raw());
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) dst[k * N + j] = src[j * K + k];
    b_kn = g.add_constant(g.unique_name(b->q->name() + "_transposed"), std::move(t));
  }
  ir::Value* b_scale = b->scale;
  const float alpha = n->attr_f("alpha", 1.0f);
  if (alpha != 1.0f) {
    std::vector<double> s = b->scale->constant().to_f64();
    for (double& v : s) v = static_cast<double>(static_cast<float>(v) * alpha);
    b_scale = add_f32_constant(g, b->scale->name() + "_alpha", s, b->scale->constant().shape());
  }
  integer_projection(ed, n, n, *a, b_kn, b_scale, zero_point(g, *b), bias);
  return true;
}

bool try_matmul(GraphEditor& ed, ir::Node* n, Why& why) {
  ir::Graph& g = ed.graph();
  std::optional<Dq> a = activation_dq(n->input(0), why);
  if (!a) return false;
  std::optional<Dq> b = dq_of(n->input(1), why);
  if (!b) return false;
  if (!is_8bit(b->type())) return why.fail("B is not 8-bit");
  if (b->axis >= 0) {  // per column: a constant [K, N] with axis 1
    const bool column = b->q->is_constant() && b->q->constant().rank() == 2 && b->axis == 1 &&
                        static_cast<int64_t>(b->count()) == b->q->constant().shape()[1];
    if (!column) return why.fail(cat(b->node->describe(), " is per axis but not per column of a constant 2-D B"));
  }
  Why no_q;
  std::optional<Quant> q = sole_quantize(g, n->output(0), no_q);
  if (!q) return matmul_to_float(ed, n, *a, *b, why);
  std::vector<ir::Value*> in = {a->q, a->scale, zero_point(g, *a), b->q, b->scale, zero_point(g, *b)};
  for (ir::Value* v : q_inputs(g, *q)) in.push_back(v);
  finish(ed, g.add_node("QLinearMatMul", in, 1, g.unique_name(n->name() + "_quant")), *q);
  return true;
}

bool try_add(GraphEditor& ed, ir::Node* n, Why& why) {
  ir::Graph& g = ed.graph();
  std::optional<Dq> a = activation_dq(n->input(0), why);
  if (!a) return false;
  std::optional<Dq> b = activation_dq(n->input(1), why);
  if (!b) return false;
  std::optional<Clamp8> clamp;
  std::optional<Quant> q = quantize_after(g, n->output(0), why, &clamp);
  if (!q) return false;
  if (a->type() != q->type || b->type() != q->type)
    return why.fail(cat("the operands are ", dtype_name(a->type()), " and ", dtype_name(b->type()), ", the result ",
                        dtype_name(q->type), " (QLinearAdd takes one type)"));
  std::vector<ir::Value*> in = {a->q, a->scale, zero_point(g, *a), b->q, b->scale, zero_point(g, *b)};
  for (ir::Value* v : q_inputs(g, *q)) in.push_back(v);
  if (!g.opset_imports.count("com.microsoft")) g.opset_imports["com.microsoft"] = 1;
  finish(ed, g.add_node("QLinearAdd", in, 1, g.unique_name(n->name() + "_quant"), "com.microsoft"), *q, clamp);
  return true;
}

// MaxPool and the ops that only move or select values: DQ -> op -> Q with the same parameters
// on both sides is the op on the 8-bit data (other inputs, e.g. Reshape's shape or Slice's
// starts, stay as they are). Concat: every input's DQ with those parameters (a quantizer gives
// the inputs the output's scale and zero point).
bool try_move(GraphEditor& ed, ir::Node* n, Why& why) {
  ir::Graph& g = ed.graph();
  if (n->op_type() == "MaxPool" && (n->opset() < 12 || n->num_outputs() != 1))
    return why.fail(n->num_outputs() != 1 ? "MaxPool has an Indices output" : "MaxPool takes 8-bit data from opset 12");
  std::optional<Quant> q = sole_quantize(g, n->output(0), why);
  if (!q) return false;
  std::vector<ir::Value*> in = n->inputs();
  const size_t data_inputs = n->op_type() == "Concat" ? in.size() : 1;
  for (size_t i = 0; i < data_inputs; ++i) {
    std::optional<Dq> x = activation_dq(n->input(i), why);
    if (!x) return false;
    const int64_t xzp = x->zp ? x->zp->constant().to_i64()[0] : 0;
    if (x->type() != q->type || xzp != q->zp || static_cast<float>(x->scale->constant().to_f64()[0]) != static_cast<float>(q->scale))
      return why.fail(cat(x->node->describe(), " and ", q->node->describe(), " differ in scale, zero point or type"));
    in[i] = x->q;
  }
  ir::Node* made = g.add_node(n->op_type(), in, 1, g.unique_name(n->name() + "_quant"));
  made->attrs = n->attrs;
  finish(ed, made, *q);
  return true;
}

}  // namespace

size_t fuse_qdq_to_qlinear(ir::Graph& g, PassLog* log, const QdqToQLinearOptions& options) {
  GraphEditor ed(g);
  size_t count = 0;
  for (ir::Node* n : g.topo_order()) {
    if (ed.erased(n) || !n->is_onnx_domain() || n->num_outputs() < 1) continue;
    const std::string& op = n->op_type();
    bool (*rule)(GraphEditor&, ir::Node*, Why&) = nullptr;
    const char* made = "";
    if (op == "Conv") rule = try_conv, made = "QLinearConv";
    else if (op == "MatMul") rule = try_matmul, made = "QLinearMatMul (or MatMulIntegerToFloat with a float result)";
    else if (op == "Gemm") rule = try_gemm, made = "MatMulIntegerToFloat";
    else if (op == "Add") rule = try_add, made = "QLinearAdd";
    else if (op == "MaxPool" || op == "Reshape" || op == "Flatten" || op == "Transpose" || op == "Squeeze" ||
             op == "Unsqueeze" || op == "Concat" || op == "Slice")
      rule = try_move, made = "the same op on 8-bit data";
    if (!rule) continue;
    // only where the op reads a DequantizeLinear: the rest of a model is not QDQ at all
    const ir::Value* x = n->input(0);
    if (!x || !x->producer() || x->producer()->op_type() != "DequantizeLinear") continue;
    Why why;
    const std::string name = n->name(), op_type = op;  // a rule may erase n (a projection replaced by its new node)
    if (op == "Conv" && options.conv_kept) {
      if (std::string kept = options.conv_kept(*n); !kept.empty()) {
        if (log) log->skipped(kQdqToQLinear, name, cat("Conv stays float (its QDQ pairs become FakeQuantize): ", kept));
        continue;
      }
    }
    if (rule(ed, n, why)) {
      ++count;
      if (log) log->applied(kQdqToQLinear, name, cat("became ", made));
    } else if (log) {
      log->skipped(kQdqToQLinear, name, cat(op_type, " stays float (its QDQ pairs become FakeQuantize): ", why.text));
    }
  }
  if (count) g.remove_dead();
  return count;
}

}  // namespace kiln::transforms
