#include "pattern/pattern_mapping.hpp"

#include <kiln/error.hpp>

#include <algorithm>
#include <set>

#include "core/strings.hpp"
#include "ir/op_registry.hpp"

namespace kiln::pattern {

// ---------------- snapshots ----------------

const Tensor* OldNode::constant_input(size_t i) const {
  return i < inputs.size() && inputs[i].constant.defined() ? &inputs[i].constant : nullptr;
}

int64_t OldNode::attr_i(const std::string& n, int64_t def) const {
  auto it = attrs.find(n);
  if (it == attrs.end()) return def;
  if (auto* v = std::get_if<int64_t>(&it->second.value)) return *v;
  throw Error(cat("old node '", name, "' (", op_type, "): attribute '", n, "' is not an int"));
}

float OldNode::attr_f(const std::string& n, float def) const {
  auto it = attrs.find(n);
  if (it == attrs.end()) return def;
  if (auto* v = std::get_if<float>(&it->second.value)) return *v;
  throw Error(cat("old node '", name, "' (", op_type, "): attribute '", n, "' is not a float"));
}

std::vector<int64_t> OldNode::attr_ints(const std::string& n, const std::vector<int64_t>& def) const {
  auto it = attrs.find(n);
  if (it == attrs.end()) return def;
  if (auto* v = std::get_if<std::vector<int64_t>>(&it->second.value)) return *v;
  throw Error(cat("old node '", name, "' (", op_type, "): attribute '", n, "' is not a list of ints"));
}

const OldNode& Rewrite::returned(int old_index) const {
  for (const OldNode& n : returns)
    if (n.index == old_index) return n;
  throw Error(cat(pattern, ": old node ", old_index, " is not in the config's returns"));
}

const OldNode& Rewrite::returned(const std::string& label) const {
  for (const OldNode& n : returns)
    if (!label.empty() && n.label == label) return n;
  std::vector<std::string> have;
  for (const OldNode& n : returns) have.push_back(n.label.empty() ? cat("node ", n.index) : n.label);
  throw Error(cat(pattern, ": no old node labelled '", label, "' is in the config's returns (returned: ",
                  have.empty() ? "none" : join(have, ", "), ")"));
}

namespace {

OldNode snapshot(const Match& m, int index) {
  const ir::Node* n = m.node(index);
  OldNode s;
  s.index = index;
  s.label = m.config().in_nodes.at(static_cast<size_t>(index)).label;
  s.name = n->name();
  s.op_type = n->op_type();
  s.domain = n->domain();
  s.opset = n->opset();
  s.attrs = ir::AttrMap::PlainMap(n->attrs);
  for (ir::Value* v : n->inputs()) {
    OldInput in;
    if (v) {
      in.name = v->name();
      in.type = v->type;
      in.from_pattern = m.produced_inside(v);
      if (!in.from_pattern) in.value = v;
      if (v->is_constant()) in.constant = v->constant();
    }
    s.inputs.push_back(in);
  }
  for (ir::Value* v : n->outputs()) {
    s.output_names.push_back(v->name());
    s.output_types.push_back(v->type);
  }
  return s;
}

// Old nodes leave consumers first (erase_node needs outputs without uses).
void erase_match(ir::Graph& g, const Match& m) {
  std::vector<ir::Node*> left = m.nodes();
  while (!left.empty()) {
    auto it = std::find_if(left.begin(), left.end(), [](const ir::Node* n) {
      for (const ir::Value* v : n->outputs())
        if (!v->uses().empty()) return false;
      return true;
    });
    if (it == left.end())
      throw Error(cat(m.config().describe(), ": internal error: old pattern nodes still in use after rewiring"));
    g.erase_node(*it);
    left.erase(it);
  }
}

// Who read an old tensor that a new output takes over.
struct Takeover {
  std::string name;
  ir::ValueType type;
  std::vector<ir::Use> uses;        // outside consumers
  std::vector<size_t> graph_outputs;  // positions in graph.outputs()
};

Rewrite rewrite_match(ir::Graph& g, const Match& m, size_t number) {
  const PatternConfig& c = m.config();
  Rewrite r;
  r.pattern = c.describe();
  r.number = number;
  for (ir::Node* n : m.nodes()) r.old_names.push_back(n->name());
  for (int k : c.returns) r.returns.push_back(snapshot(m, k));

  // inputs of each new node (nullptr slots are fed by the previous new node)
  std::vector<std::vector<ir::Value*>> ins(c.num_out());
  for (size_t j = 0; j < c.num_out(); ++j) {
    const TensorMap& map = c.input_tensors.at(static_cast<int>(j));
    ins[j].assign(static_cast<size_t>(map.total), nullptr);
    for (size_t s = 0; s < map.sources.size(); ++s)
      ins[j][static_cast<size_t>(map.positions[s])] = m.resolve(map.sources[s]);
  }
  // old tensors taken over by new outputs: (new node, output slot) -> takeover
  std::map<std::pair<size_t, size_t>, Takeover> takeovers;
  for (const auto& [j, map] : c.output_tensors) {
    for (size_t s = 0; s < map.sources.size(); ++s) {
      ir::Value* old = m.old_output(map.sources[s]);
      Takeover t{old->name(), old->type, {}, {}};
      for (const ir::Use& u : old->uses())
        if (!m.contains(u.node)) t.uses.push_back(u);
      for (size_t o = 0; o < g.outputs().size(); ++o)
        if (g.outputs()[o] == old) t.graph_outputs.push_back(o);
      takeovers[{static_cast<size_t>(j), static_cast<size_t>(map.positions[s])}] = t;
    }
  }
  // detach the outside readers, then drop the old nodes (their tensor names become free)
  for (auto& [slot, t] : takeovers) {
    for (const ir::Use& u : t.uses) g.set_node_input(u.node, u.input_index, nullptr);
    for (size_t o : t.graph_outputs) g.set_output(o, nullptr);
  }
  erase_match(g, m);

  for (size_t j = 0; j < c.num_out(); ++j) {
    const OutNode& on = c.out_nodes[j];
    std::string name;
    auto nn = c.node_names.find(static_cast<int>(j));
    if (nn == c.node_names.end()) name = g.unique_name(on.op_type);
    else if (nn->second.old_index >= 0) name = r.old_names[static_cast<size_t>(nn->second.old_index)];
    else name = cat(nn->second.name, "_", number);

    const size_t nout = static_cast<size_t>(c.out_outputs(static_cast<int>(j)));
    std::vector<std::string> out_names(nout);
    for (size_t o = 0; o < nout; ++o) {
      auto t = takeovers.find({j, o});
      out_names[o] = t != takeovers.end() ? t->second.name : g.unique_name(cat(name, "_out", o));
    }
    std::vector<ir::Value*> inputs = ins[j];
    size_t next = 0;
    for (ir::Value*& v : inputs)
      if (!v) v = r.new_nodes.at(j - 1)->output(next++);
    ir::Node* node = g.add_node(on.op_type, inputs, out_names, name, on.domain);
    if (const ir::OpSchema* s = ir::OpRegistry::instance().find(on.domain, on.op_type))
      if (node->opset() != 0 && node->opset() < s->since_version) node->set_opset(s->since_version);
    for (size_t o = 0; o < nout; ++o) {
      auto t = takeovers.find({j, o});
      if (t == takeovers.end()) continue;
      ir::Value* v = node->output(o);
      v->type = t->second.type;
      for (const ir::Use& u : t->second.uses) g.set_node_input(u.node, u.input_index, v);
      for (size_t pos : t->second.graph_outputs) g.set_output(pos, v);
    }
    r.new_nodes.push_back(node);
  }
  return r;
}

}  // namespace

PatternResult pattern_mapping(ir::Graph& graph, const PatternConfig& config, const PatternOptions& options) {
  PatternResult result;
  std::vector<Match> matches = find_matches(graph, config, options.filter, &result.skipped);
  for (const Match& m : matches) {
    // an earlier rewrite may have changed the surroundings (e.g. made a path between matches)
    std::string why = check_match(m);
    if (!why.empty()) {
      result.skipped.push_back(cat("match at ", m.nodes()[0]->describe(), ": ", why));
      continue;
    }
    Rewrite r = rewrite_match(graph, m, result.rewrites.size());
    if (options.on_rewrite) options.on_rewrite(r, graph);
    result.rewrites.push_back(std::move(r));
  }
  return result;
}

}  // namespace kiln::pattern
