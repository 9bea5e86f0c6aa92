#include "cpu/passes/fuse_util.hpp"

#include <algorithm>
#include <cmath>

#include "core/strings.hpp"
#include "cpu/fusion_rules.hpp"

namespace kiln::cpu::passes {

namespace {

// Runs a rule of cpu/fusion_rules.hpp on runtime node `c` reading `from`.
template <class Rule>
std::optional<std::vector<PostOp>> on_node(const Node& c, const Edge* from, std::string* why, Rule rule) {
  why->clear();
  if (!c.source || c.outputs.size() != 1) return std::nullopt;
  const auto at = std::find(c.inputs.begin(), c.inputs.end(), from);
  if (!from || at == c.inputs.end()) return std::nullopt;
  std::vector<TensorFacts> facts(c.inputs.size());
  std::vector<const TensorFacts*> inputs(c.inputs.size(), nullptr);
  for (size_t i = 0; i < c.inputs.size(); ++i)
    if (c.inputs[i]) {
      facts[i] = facts_of(*c.inputs[i]);
      inputs[i] = &facts[i];
    }
  return rule(*c.source, inputs, facts_of(*c.outputs[0]), static_cast<size_t>(at - c.inputs.begin()));
}

}  // namespace

std::optional<std::vector<PostOp>> fake_quantize_post_ops(const Node& c, const Edge* from, int channel_axis,
                                                          std::string* why) {
  return on_node(c, from, why, [&](const ir::Node& n, const auto& inputs, const TensorFacts& out, size_t k) {
    return cpu::fake_quantize_post_ops(n, inputs, out, k, channel_axis, why);
  });
}

std::optional<std::vector<PostOp>> simple_post_ops(const Node& c, const Edge* from, int channel_axis,
                                                   std::string* why) {
  if (c.source && !simple_post_op_kind(*c.source)) {  // no facts built for the other ops
    why->clear();
    return std::nullopt;
  }
  return on_node(c, from, why, [&](const ir::Node& n, const auto& inputs, const TensorFacts& out, size_t k) {
    return cpu::simple_post_ops(n, inputs, out, k, channel_axis, why);
  });
}

std::string sum_target_problem(Graph& g, const Node& host, const Node& add, const Edge& other) {
  if (g.is_graph_output(&other) || other.kind == Edge::Kind::constant)
    return cat("the other input '", other.name, "' is a graph output or a constant and may not be overwritten");
  for (const Edge* in : host.inputs)
    if (in == &other) return cat("the convolution itself reads '", other.name, "'");
  const int add_pos = g.position(&add);
  for (Node* r : g.readers_of(&other))
    if (r != &add && g.position(r) > add_pos) return cat("the other input is still read by node ", r->name);
  return "";
}

std::string not_pointwise(const Node& n) {
  const ir::Node& s = *n.source;
  const Shape& w = n.inputs[1]->shape;
  if (w.size() != 4 || w[2] != 1 || w[3] != 1) return "not 1x1";
  if (s.attr_i("group", 1) != 1) return "grouped";
  // (asked of every convolution by several passes, for every new shape: attributes read in place)
  auto all = [&](const char* name, int64_t x) {
    const std::vector<int64_t>* v = s.find_ints(name);
    return !v || all_equal(*v, x);
  };
  if (!all("strides", 1) || !all("dilations", 1)) return "strided or dilated";
  const std::string* auto_pad = s.find_string("auto_pad");
  if (!all("pads", 0) || (auto_pad && *auto_pad != "NOTSET")) return "padded";
  return "";
}

std::vector<Node*> nodes_of_kind(Graph& g, NodeKind kind) {
  std::vector<Node*> out;
  for (auto& n : g.nodes())
    if (n->kind() == kind) out.push_back(n.get());
  return out;
}

Node* sole_reader(Graph& g, const Node& host, bool (*accept)(const Node&)) {
  const std::vector<Node*>& readers = g.readers_of(host.outputs.at(0));
  return readers.size() == 1 && accept(*readers[0]) ? readers[0] : nullptr;
}

std::string arrow(const Node& a, const Node& b) { return cat(a.name, " -> ", b.name); }

namespace {

// Swish written out: Sigmoid(x) read only by a Mul(x, Sigmoid(x)) (either order), x read by
// those two only. Returns {sigmoid, mul} or nulls.
std::pair<Node*, Node*> swish_pair(const Graph& g, const Edge* x, const std::vector<Node*>& readers) {
  if (readers.size() != 2 || x->dtype != DType::f32) return {nullptr, nullptr};
  for (int s = 0; s < 2; ++s) {
    Node* sig = readers[static_cast<size_t>(s)];
    Node* mul = readers[static_cast<size_t>(1 - s)];
    if (!sig->source || !mul->source || sig->source->op_type() != "Sigmoid" || mul->source->op_type() != "Mul") continue;
    if (!sig->source->is_onnx_domain() || !mul->source->is_onnx_domain()) continue;
    if (sig->inputs.size() != 1 || sig->inputs[0] != x || sig->outputs.size() != 1 || mul->inputs.size() != 2 ||
        mul->outputs.size() != 1)
      continue;
    const Edge* so = sig->outputs[0];
    const bool wired = (mul->inputs[0] == x && mul->inputs[1] == so) || (mul->inputs[0] == so && mul->inputs[1] == x);
    const size_t so_readers = g.readers_of(so).size();
    if (!wired || so_readers != 1 || g.is_graph_output(so) || mul->outputs[0]->shape != x->shape) continue;
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
    const std::vector<Node*>& readers = g.readers_of(out);  // not read after an absorb() below
    if (readers.empty()) break;
    if (auto [sig, mul] = swish_pair(g, out, readers); sig && !g.is_graph_output(out)) {
      // x * sigmoid(x): one swish post-op for both nodes
      const std::vector<PostOp> ops = {eltwise_post_op(dnnl::algorithm::eltwise_swish, 1.0f, 0.0f, mul->name)};
      const std::string where = log ? arrow(*host, *mul) : std::string();
      if (!host->accepts_post_ops(ops, &why)) {
        if (log) log->skipped(pass, where, cat("Swish (", sig->name, ", ", mul->name, ") not fused: ", why));
        break;
      }
      PostOpList* list = host->post_ops();
      list->ops.insert(list->ops.end(), ops.begin(), ops.end());
      const std::string names = log ? cat(sig->name, " + ", mul->name) : std::string();
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
    const std::string where = log ? arrow(*host, *simple) : std::string();
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
    const std::string what = log ? cat(simple->source ? simple->source->op_type() : simple->type(), " as a post-op") : std::string();
    g.absorb(host, simple);
    if (log) log->applied(pass, where, what);
    ++fused;
  }
  return fused;
}

}  // namespace kiln::cpu::passes
