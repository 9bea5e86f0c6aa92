#include "cpu/passes/fuse_util.hpp"

#include <algorithm>
#include <cmath>

#include "core/strings.hpp"
#include "cpu/nodes/eltwise_spec.hpp"

namespace kiln::cpu::passes {

namespace {

using dnnl::algorithm;

PostOp eltwise(algorithm alg, float alpha, float beta, const std::string& from) {
  PostOp op;
  op.kind = PostOp::Kind::eltwise;
  op.alg = alg;
  op.alpha = alpha;
  op.beta = beta;
  op.from = from;
  return op;
}

PostOp with_constant(PostOp::Kind kind, algorithm alg, Tensor c, const std::string& from) {
  PostOp op;
  op.kind = kind;
  op.alg = alg;
  op.constant = std::move(c);
  op.from = from;
  return op;
}

// The constant as an f32 tensor of rank `rank` (leading 1s) if it holds one value or one
// value per channel along `axis` of `out`; else nullopt and why.
std::optional<Tensor> channel_constant(const Edge& e, const Shape& out, int axis, std::string* why) {
  if (e.kind != Edge::Kind::constant) {
    *why = cat("its other operand '", e.name, "' is not a constant");
    return std::nullopt;
  }
  if (e.dtype != DType::f32) {
    *why = cat("its constant '", e.name, "' is ", dtype_name(e.dtype), ", not f32");
    return std::nullopt;
  }
  const Shape& s = e.shape;
  if (s.size() > out.size()) {
    *why = cat("its constant '", e.name, "' has a higher rank than the output");
    return std::nullopt;
  }
  Shape padded(out.size() - s.size(), 1);
  padded.insert(padded.end(), s.begin(), s.end());
  for (size_t d = 0; d < out.size(); ++d) {
    if (padded[d] == 1) continue;
    if (static_cast<int>(d) != axis || padded[d] != out[d]) {
      *why = cat("its constant '", e.name, "' ", shape_to_string(s), " is neither one value nor one per channel");
      return std::nullopt;
    }
  }
  return e.constant.reshaped(padded);
}

// The values of constant `e` if it holds one value or one value per channel along `axis`
// of `out` (any float dtype); else nullopt and why.
std::optional<std::vector<double>> channel_values(const Edge& e, const Shape& out, int axis, const char* what,
                                                  std::string* why) {
  if (!e.constant.defined() || e.kind != Edge::Kind::constant) {
    *why = cat("its ", what, " '", e.name, "' is not a constant");
    return std::nullopt;
  }
  if (!is_floating(e.dtype)) {
    *why = cat("its ", what, " '", e.name, "' is ", dtype_name(e.dtype));
    return std::nullopt;
  }
  const Shape& s = e.shape;
  bool ok = s.size() <= out.size();
  for (size_t i = 0; ok && i < s.size(); ++i) {
    const size_t d = out.size() - s.size() + i;
    ok = s[i] == 1 || (static_cast<int>(d) == axis && s[i] == out[d]);
  }
  if (!ok) {
    *why = cat("its ", what, " '", e.name, "' ", shape_to_string(s), " is neither one value nor one per channel");
    return std::nullopt;
  }
  return e.constant.to_f64();
}

}  // namespace

std::optional<std::vector<PostOp>> fake_quantize_post_ops(const Node& c, const Edge* from, int channel_axis,
                                                          std::string* why) {
  why->clear();
  if (!c.source || c.source->op_type() != "FakeQuantize" || c.source->domain() != "kiln") return std::nullopt;
  if (c.inputs.size() != 5 || c.outputs.size() != 1 || c.inputs[0] != from) return std::nullopt;
  const Edge* out = c.outputs[0];
  if (out->dtype != DType::f32 || from->dtype != DType::f32) {
    *why = cat("FakeQuantize on ", dtype_name(from->dtype), " (only f32 is fused)");
    return std::nullopt;
  }
  if (out->shape != from->shape || channel_axis < 0 || channel_axis >= static_cast<int>(out->shape.size())) {
    *why = cat("FakeQuantize output ", shape_to_string(out->shape), " differs from its input");
    return std::nullopt;
  }
  static const char* names[4] = {"input_low", "input_high", "output_low", "output_high"};
  std::vector<double> r[4];
  size_t n = 1;
  for (size_t k = 0; k < 4; ++k) {
    if (!c.inputs[k + 1]) {
      *why = cat("its ", names[k], " is missing");
      return std::nullopt;
    }
    auto v = channel_values(*c.inputs[k + 1], out->shape, channel_axis, names[k], why);
    if (!v) return std::nullopt;
    r[k] = std::move(*v);
    n = std::max(n, r[k].size());
  }
  const double L = static_cast<double>(c.source->attr_i("levels") - 1);
  auto at = [&](int k, size_t i) { return r[k].size() == 1 ? r[k][0] : r[k][i]; };
  std::vector<double> il(n), ih(n), s(n), a(n), d(n), e(n);
  for (size_t i = 0; i < n; ++i) {
    il[i] = at(0, i);
    ih[i] = at(1, i);
    const double ol = at(2, i), oh = at(3, i);
    if (!(il[i] < ih[i])) {
      *why = cat("its input_low ", il[i], " is not below its input_high ", ih[i], n > 1 ? cat(" (channel ", i, ")") : "");
      return std::nullopt;
    }
    if (!std::isfinite(il[i]) || !std::isfinite(ih[i]) || !std::isfinite(ol) || !std::isfinite(oh) || !(L >= 1)) {
      *why = "its ranges are not finite";
      return std::nullopt;
    }
    s[i] = L / (ih[i] - il[i]);
    // the reference decides ties on the grid anchored at the real value 0 when 0 lies on it
    const double o = il[i] * L / (ih[i] - il[i]);
    const double oi = std::nearbyint(o);
    a[i] = std::fabs(o - oi) <= 1e-4 ? oi : 0.0;
    d[i] = (oh - ol) / L;
    e[i] = ol - a[i] * d[i];
  }
  Shape shape(out->shape.size(), 1);
  if (n > 1) shape[static_cast<size_t>(channel_axis)] = static_cast<int64_t>(n);
  auto all = [](const std::vector<double>& v, double x) {
    for (double y : v)
      if (y != x) return false;
    return true;
  };
  std::vector<PostOp> ops;
  auto bin = [&](algorithm alg, const std::vector<double>& v, double scale) {
    Tensor t(DType::f32, shape);
    float* p = t.data<float>();
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<float>(scale * v[i]);
    ops.push_back(with_constant(PostOp::Kind::binary, alg, std::move(t), c.name));
  };
  bin(algorithm::binary_max, il, 1.0);
  bin(algorithm::binary_min, ih, 1.0);
  if (!all(il, 0.0)) bin(algorithm::binary_add, il, -1.0);
  if (!all(s, 1.0)) bin(algorithm::binary_mul, s, 1.0);
  if (!all(a, 0.0)) bin(algorithm::binary_add, a, 1.0);
  ops.push_back(eltwise(algorithm::eltwise_round, 0.0f, 0.0f, c.name));
  if (!all(d, 1.0)) bin(algorithm::binary_mul, d, 1.0);
  if (!all(e, 0.0)) bin(algorithm::binary_add, e, 1.0);
  return ops;
}

std::string arrow(const Node& a, const Node& b) { return cat(a.name, " -> ", b.name); }

std::optional<std::vector<PostOp>> simple_post_ops(const Node& c, const Edge* from, int channel_axis,
                                                   std::string* why) {
  why->clear();
  if (!c.source || c.outputs.size() != 1) return std::nullopt;
  const ir::Node& n = *c.source;
  const std::string& op = n.op_type();
  const Edge* out = c.outputs[0];
  if (out->dtype != DType::f32) return std::nullopt;
  if (auto fq = fake_quantize_post_ops(c, from, channel_axis, why); fq || !why->empty()) return fq;
  if (std::string(c.type()) == "Eltwise") {
    auto spec = eltwise_spec(n);
    if (!spec) return std::nullopt;
    return std::vector<PostOp>{eltwise(spec->alg, spec->alpha, spec->beta, c.name)};
  }
  if (!n.domain().empty() && n.domain() != "ai.onnx") return std::nullopt;
  if (op == "HardSigmoid" && c.inputs.size() == 1) {
    // max(0, min(1, alpha * x + beta)): a linear and a clip post-op
    return std::vector<PostOp>{eltwise(algorithm::eltwise_linear, n.attr_f("alpha", 0.2f), n.attr_f("beta", 0.5f), c.name),
                               eltwise(algorithm::eltwise_clip_v2, 0.0f, 1.0f, c.name)};
  }
  const bool binary = op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Max" || op == "Min";
  if (!binary && op != "PRelu") return std::nullopt;
  if (c.inputs.size() != 2 || !c.inputs[0] || !c.inputs[1]) return std::nullopt;
  const int k = c.inputs[0] == from ? 0 : 1;  // which operand the host's output is
  if (c.inputs[static_cast<size_t>(k)] != from) return std::nullopt;
  if (out->shape != from->shape) {
    *why = cat(op, " broadcasts the output to ", shape_to_string(out->shape));
    return std::nullopt;
  }
  const Edge& other = *c.inputs[static_cast<size_t>(1 - k)];
  if (op == "PRelu") {
    if (k != 0) return std::nullopt;
    auto slope = channel_constant(other, out->shape, channel_axis, why);
    if (!slope) return std::nullopt;
    return std::vector<PostOp>{with_constant(PostOp::Kind::prelu, algorithm::undef, *slope, c.name)};
  }
  auto cst = channel_constant(other, out->shape, channel_axis, why);
  if (!cst) return std::nullopt;
  auto bin = [&](algorithm a) { return with_constant(PostOp::Kind::binary, a, *cst, c.name); };
  if (op == "Add") return std::vector<PostOp>{bin(algorithm::binary_add)};
  if (op == "Mul") return std::vector<PostOp>{bin(algorithm::binary_mul)};
  if (op == "Max") return std::vector<PostOp>{bin(algorithm::binary_max)};
  if (op == "Min") return std::vector<PostOp>{bin(algorithm::binary_min)};
  if (op == "Sub") {
    if (k == 0) return std::vector<PostOp>{bin(algorithm::binary_sub)};
    // c - x = (-x) + c
    return std::vector<PostOp>{eltwise(algorithm::eltwise_linear, -1.0f, 0.0f, c.name), bin(algorithm::binary_add)};
  }
  if (k == 0) return std::vector<PostOp>{bin(algorithm::binary_div)};  // x / c
  *why = "Div with the host's output as divisor";
  return std::nullopt;
}

namespace {

// Swish written out: Sigmoid(x) read only by a Mul(x, Sigmoid(x)) (either order), x read by
// those two only. Returns {sigmoid, mul} or nulls.
std::pair<Node*, Node*> swish_pair(const Graph& g, const Edge* x, const std::vector<Node*>& readers) {
  if (readers.size() != 2 || x->dtype != DType::f32) return {nullptr, nullptr};
  for (int s = 0; s < 2; ++s) {
    Node* sig = readers[static_cast<size_t>(s)];
    Node* mul = readers[static_cast<size_t>(1 - s)];
    if (!sig->source || !mul->source || sig->source->op_type() != "Sigmoid" || mul->source->op_type() != "Mul") continue;
    if (!sig->source->domain().empty() || !mul->source->domain().empty()) continue;
    if (sig->inputs.size() != 1 || sig->inputs[0] != x || sig->outputs.size() != 1 || mul->inputs.size() != 2 ||
        mul->outputs.size() != 1)
      continue;
    const Edge* so = sig->outputs[0];
    const bool wired = (mul->inputs[0] == x && mul->inputs[1] == so) || (mul->inputs[0] == so && mul->inputs[1] == x);
    auto so_readers = g.consumers(so);
    if (!wired || so_readers.size() != 1 || g.is_graph_output(so) || mul->outputs[0]->shape != x->shape) continue;
    return {sig, mul};
  }
  return {nullptr, nullptr};
}

}  // namespace

size_t fuse_simple_chain(Graph& g, Node* host, const char* pass, int channel_axis, transforms::PassLog* log) {
  size_t fused = 0;
  std::string why;
  for (;;) {
    if (host->outputs.size() != 1) break;
    Edge* out = host->outputs[0];
    auto readers = g.consumers(out);
    if (readers.empty()) break;
    if (auto [sig, mul] = swish_pair(g, out, readers); sig && !g.is_graph_output(out)) {
      // x * sigmoid(x): one swish post-op for both nodes
      const std::vector<PostOp> ops = {eltwise(algorithm::eltwise_swish, 1.0f, 0.0f, mul->name)};
      const std::string where = arrow(*host, *mul);
      if (!host->accepts_post_ops(ops, &why)) {
        if (log) log->skipped(pass, where, cat("Swish (", sig->name, ", ", mul->name, ") not fused: ", why));
        break;
      }
      PostOpList* list = host->post_ops();
      list->ops.insert(list->ops.end(), ops.begin(), ops.end());
      const std::string names = cat(sig->name, " + ", mul->name);
      g.absorb(host, sig);
      g.absorb(host, mul);
      if (log) log->applied(pass, where, cat("Swish (", names, ") as a post-op"));
      ++fused;
      continue;
    }
    // is any reader a simple layer? (only then is a failure worth reporting)
    Node* simple = nullptr;
    std::optional<std::vector<PostOp>> ops;
    for (Node* r : readers) {
      auto o = simple_post_ops(*r, out, channel_axis, &why);
      if (o || !why.empty()) {
        simple = r;
        ops = std::move(o);
        break;
      }
    }
    if (!simple) break;
    const std::string where = arrow(*host, *simple);
    if (readers.size() != 1) {
      std::vector<std::string> names;
      for (Node* r : readers)
        if (r != simple) names.push_back(r->name);
      if (log) log->skipped(pass, where, cat(simple->name, " not fused: ", host->name, "'s output is also read by ", join(names, ", ")));
      break;
    }
    if (g.is_graph_output(out)) {
      if (log) log->skipped(pass, where, cat(simple->name, " not fused: ", host->name, "'s output is a graph output"));
      break;
    }
    if (!ops) {
      if (log) log->skipped(pass, where, cat(simple->name, " not fused: ", why));
      break;
    }
    if (!host->accepts_post_ops(*ops, &why)) {
      if (log) log->skipped(pass, where, cat(simple->name, " not fused: ", why));
      break;
    }
    PostOpList* list = host->post_ops();
    list->ops.insert(list->ops.end(), ops->begin(), ops->end());
    const std::string what = cat(simple->source ? simple->source->op_type() : simple->type(), " as a post-op");
    g.absorb(host, simple);
    if (log) log->applied(pass, where, what);
    ++fused;
  }
  return fused;
}

}  // namespace kiln::cpu::passes
