#include "snippets/mark_skipped.hpp"

#include <cmath>
#include <optional>
#include <unordered_map>

#include "core/strings.hpp"

namespace kiln::snippets {

namespace {

bool onnx_domain(const ir::Node& n) { return n.domain().empty() || n.domain() == "ai.onnx"; }

bool f32(const ir::Value* v) { return v && v->type.dtype == DType::f32; }

const Tensor* constant_of(const ir::Value* v) {
  return v && v->is_constant() && !v->producer() ? &v->constant() : nullptr;
}

std::optional<double> one_value(const ir::Value* v) {
  const Tensor* t = constant_of(v);
  if (!t || t->size() != 1) return std::nullopt;
  return t->to_f64()[0];
}

// A node the CPU optimizer hangs post-ops on, with the axis and size of its channels.
struct Host {
  const ir::Node* node = nullptr;
  int channel_axis = 1;
  int64_t channels = 0;
  bool conv = false;
};

std::optional<Host> host_of(const ir::Node& n) {
  if (!onnx_domain(n) || n.num_outputs() != 1 || n.num_inputs() < 2) return std::nullopt;
  const ir::Value *a = n.input(0), *b = n.input(1);
  const Tensor* w = constant_of(b);
  if (!a || !f32(a) || constant_of(a) || !w || w->dtype() != DType::f32) return std::nullopt;
  const ir::PartialShape& out = n.output(0)->type.shape;
  if (!out.rank_known) return std::nullopt;
  if (n.op_type() == "Conv") {
    // mirrors cpu::convolution_supports
    if (w->rank() < 3 || w->rank() > 5) return std::nullopt;
    if (n.has_input(2) && !constant_of(n.input(2))) return std::nullopt;
    const int64_t group = n.attr_i("group", 1), oc = w->shape()[0];
    if (group < 1 || oc % group != 0) return std::nullopt;
    return Host{&n, 1, oc, true};
  }
  if (w->rank() != 2) return std::nullopt;
  if (n.op_type() == "MatMul" && n.num_inputs() == 2) {
    // mirrors cpu::fully_connected_supports: the output's columns are the channels
    if (out.rank() < 1) return std::nullopt;
    return Host{&n, static_cast<int>(out.rank()) - 1, w->shape()[1], false};
  }
  if (n.op_type() == "Gemm" && n.num_inputs() <= 3 && a->type.shape.rank_known && a->type.shape.rank() == 2) {
    if (n.has_input(2)) {
      const Tensor* c = constant_of(n.input(2));
      if (!c || c->dtype() != DType::f32 || c->rank() > 2) return std::nullopt;
    }
    const bool tb = n.attr_i("transB", 0) != 0;
    return Host{&n, 1, tb ? w->shape()[0] : w->shape()[1], false};
  }
  return std::nullopt;
}

// `v` is an f32 constant holding one value or one value per channel of `h`, laid out to
// broadcast along the channel axis of an output of rank `rank`.
bool channel_constant(const ir::Value* v, const Host& h, size_t rank) {
  const Tensor* t = constant_of(v);
  if (!t || t->dtype() != DType::f32 || t->rank() > rank) return false;
  const size_t lead = rank - t->rank();
  for (size_t i = 0; i < t->rank(); ++i) {
    const int64_t d = t->shape()[i];
    if (d == 1) continue;
    if (static_cast<int>(lead + i) != h.channel_axis || d != h.channels) return false;
  }
  return true;
}

// cpu::eltwise_spec: the unary ops oneDNN computes as one eltwise post-op.
bool eltwise_post_op(const ir::Node& n) {
  const std::string& op = n.op_type();
  if (n.domain() == "com.microsoft")
    return (op == "Gelu" && n.num_inputs() == 1) || (op == "FastGelu" && (n.num_inputs() == 1 || !n.has_input(1)));
  if (!onnx_domain(n)) return false;
  static const char* const kUnary[] = {"Relu", "LeakyRelu", "Elu",       "Sigmoid",  "Tanh",     "Abs",  "Sqrt",
                                       "Exp",  "Log",       "Neg",       "Round",    "HardSwish", "Softplus", "Mish",
                                       "HardSigmoid"};
  for (const char* u : kUnary)
    if (op == u) return n.num_inputs() == 1;
  if (op == "Gelu") {
    const std::string a = n.attr_s("approximate", "none");
    return n.num_inputs() == 1 && (a == "none" || a == "tanh");
  }
  if (op == "Clip") {
    if (n.num_inputs() > 3) return false;
    double lo = -INFINITY, hi = INFINITY;
    for (size_t i = 1; i < 3; ++i) {
      if (!n.has_input(i)) continue;
      const Tensor* t = constant_of(n.input(i));
      auto v = one_value(n.input(i));
      if (!t || t->dtype() != DType::f32 || !v) return false;
      (i == 1 ? lo : hi) = *v;
    }
    if (n.num_inputs() <= 1) {
      lo = n.attr_f("min", -INFINITY);
      hi = n.attr_f("max", INFINITY);
    }
    return !std::isnan(lo) && !std::isnan(hi) && lo <= hi;
  }
  if (op == "Pow") {
    if (n.num_inputs() != 2) return false;
    auto e = one_value(n.input(1));
    return e && (*e == 1.0 || *e == 2.0 || *e == 3.0);
  }
  return false;
}

// cpu::passes::simple_post_ops on ir::Node: `r` reads `from` and becomes post-ops of `h`.
bool simple_layer(const ir::Node& r, const ir::Value* from, const Host& h) {
  if (r.num_outputs() != 1 || !f32(r.output(0)) || !f32(from)) return false;
  const ir::PartialShape& out = r.output(0)->type.shape;
  if (!out.rank_known) return false;
  if (r.op_type() == "FakeQuantize" && r.domain() == "kiln") {
    if (r.num_inputs() != 5 || r.input(0) != from || !(out == from->type.shape)) return false;
    for (size_t k = 1; k < 5; ++k) {
      const Tensor* t = constant_of(r.input(k));
      if (!t || !is_floating(t->dtype()) || t->rank() > out.rank()) return false;
      for (size_t i = 0; i < t->rank(); ++i) {
        const int64_t d = t->shape()[i];
        if (d != 1 && (static_cast<int>(out.rank() - t->rank() + i) != h.channel_axis || d != h.channels)) return false;
      }
    }
    return true;
  }
  if (eltwise_post_op(r)) return r.input(0) == from;
  if (!onnx_domain(r)) return false;
  const std::string& op = r.op_type();
  const bool binary = op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Max" || op == "Min";
  if ((!binary && op != "PRelu") || r.num_inputs() != 2 || !r.input(0) || !r.input(1)) return false;
  const size_t k = r.input(0) == from ? 0 : 1;
  if (r.input(k) != from || !(out == from->type.shape)) return false;
  if ((op == "Div" || op == "PRelu") && k != 0) return false;
  return channel_constant(r.input(1 - k), h, out.rank());
}

// fuse_convolution_and_sum: the residual Add the Conv accumulates into.
bool sum_layer(const ir::Graph& g, const ir::Node& r, const ir::Value* from, const Host& h,
               const std::unordered_map<const ir::Node*, size_t>& pos) {
  if (!h.conv || r.op_type() != "Add" || !onnx_domain(r) || r.num_inputs() != 2 || r.num_outputs() != 1) return false;
  if (!r.input(0) || !r.input(1)) return false;
  const ir::Value* other = r.input(0) == from ? r.input(1) : r.input(0);
  if (other == from || !f32(other) || !f32(from)) return false;
  const ir::PartialShape& s = from->type.shape;
  if (!s.rank_known || !(other->type.shape == s) || !(r.output(0)->type.shape == s)) return false;
  if (!other->producer() || other->is_constant() || g.is_output(other)) return false;
  for (const ir::Value* in : h.node->inputs())
    if (in == other) return false;
  for (const ir::Use& u : other->uses())
    if (u.node != &r && pos.at(u.node) > pos.at(&r)) return false;
  return true;
}

// cpu::passes::fuse_simple_chain's Swish: Sigmoid(x) read only by Mul(x, Sigmoid(x)), x read
// by those two only. Returns the Mul (its Sigmoid is its other input's producer) or null.
const ir::Node* swish_mul(const ir::Graph& g, const ir::Value* x) {
  if (x->uses().size() != 2 || !f32(x)) return nullptr;
  for (int s = 0; s < 2; ++s) {
    const ir::Node* sig = x->uses()[static_cast<size_t>(s)].node;
    const ir::Node* mul = x->uses()[static_cast<size_t>(1 - s)].node;
    if (sig->op_type() != "Sigmoid" || !onnx_domain(*sig) || mul->op_type() != "Mul" || !onnx_domain(*mul)) continue;
    if (sig->num_inputs() != 1 || sig->num_outputs() != 1 || mul->num_inputs() != 2 || mul->num_outputs() != 1) continue;
    const ir::Value* so = sig->output(0);
    const bool wired = (mul->input(0) == x && mul->input(1) == so) || (mul->input(0) == so && mul->input(1) == x);
    if (wired && so->uses().size() == 1 && !g.is_output(so) && mul->output(0)->type.shape == x->type.shape) return mul;
  }
  return nullptr;
}

}  // namespace

SkippedNodes mark_skipped(const ir::Graph& g, transforms::PassLog* log) {
  SkippedNodes skipped;
  const auto order = g.topo_order();
  std::unordered_map<const ir::Node*, size_t> pos;
  for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = i;
  for (const ir::Node* n : order) {
    auto h = host_of(*n);
    if (!h) continue;
    bool summed = false;
    const ir::Value* cur = n->output(0);
    const ir::Node* prev = n;
    for (;;) {
      if (g.is_output(cur)) break;
      if (const ir::Node* mul = swish_mul(g, cur); mul && !skipped.count(mul)) {
        const ir::Node* sig = mul->input(0) == cur ? mul->input(1)->producer() : mul->input(0)->producer();
        skipped.insert(sig);
        skipped.insert(mul);
        if (log)
          log->applied(kMarkSkippedPass, cat(prev->name(), " -> ", mul->name()),
                       cat("left to the CPU optimizer: Swish (", sig->name(), ", ", mul->name(), ") as a post-op of ", n->name()));
        prev = mul;
        cur = mul->output(0);
        continue;
      }
      if (cur->uses().size() != 1) break;
      const ir::Node* r = cur->uses()[0].node;
      if (skipped.count(r)) break;
      std::string what;
      if (simple_layer(*r, cur, *h)) {
        what = cat(r->op_type(), " as a post-op of ", n->name());
      } else if (!summed && sum_layer(g, *r, cur, *h, pos)) {
        summed = true;
        what = cat("the residual Add as a sum post-op of ", n->name());
      } else {
        break;
      }
      skipped.insert(r);
      if (log) log->applied(kMarkSkippedPass, cat(prev->name(), " -> ", r->name()), cat("left to the CPU optimizer: ", what));
      prev = r;
      cur = r->output(0);
    }
  }
  return skipped;
}

}  // namespace kiln::snippets
