#include "pattern/matcher.hpp"

#include <kiln/error.hpp>

#include <algorithm>
#include <memory>
#include <set>

#include "core/strings.hpp"

namespace kiln::pattern {

namespace {

bool same_domain(const std::string& a, const std::string& b) {
  auto norm = [](const std::string& d) { return d == "ai.onnx" ? std::string() : d; };
  return norm(a) == norm(b);
}

bool op_matches(const ir::Node* n, const PatternNode& p) {
  for (const std::string& alt : p.ops) {
    auto [domain, op] = split_op(alt);
    if (n->op_type() == op && same_domain(n->domain(), domain)) return true;
  }
  return false;
}

// Some output of `a` is input `port` of `b` (any input when port < 0).
bool edge_holds(const ir::Node* a, const ir::Node* b, int port) {
  for (size_t i = 0; i < b->num_inputs(); ++i) {
    if (port >= 0 && i != static_cast<size_t>(port)) continue;
    const ir::Value* v = b->input(i);
    if (v && v->producer() == a) return true;
  }
  return false;
}

}  // namespace

// ---------------- Match ----------------

Match::Match(ir::Graph& graph, const PatternConfig& config, std::vector<ir::Node*> nodes)
    : graph_(&graph), config_(&config), nodes_(std::move(nodes)), members_(nodes_.begin(), nodes_.end()) {}

ir::Node* Match::node(int old_index) const {
  if (old_index < 0 || static_cast<size_t>(old_index) >= nodes_.size())
    throw Error(cat(config_->describe(), ": no node ", old_index, " in patterns.in (", nodes_.size(), " nodes)"));
  return nodes_[static_cast<size_t>(old_index)];
}

ir::Node* Match::node(const std::string& label) const { return node(config_->labelled(label)); }

ir::Value* Match::input(const std::string& label, const std::vector<int>& ports) const {
  return input(config_->labelled(label), ports);
}

bool Match::produced_inside(const ir::Value* v) const { return v && v->producer() && contains(v->producer()); }

ir::Value* Match::input(int old_index, const std::vector<int>& ports) const {
  const ir::Node* n = node(old_index);
  std::vector<ir::Value*> cands;
  for (int p : ports) {
    ir::Value* v = n->input(static_cast<size_t>(p));
    if (!v || produced_inside(v)) continue;
    if (std::find(cands.begin(), cands.end(), v) == cands.end()) cands.push_back(v);
  }
  if (cands.size() > 1) {
    std::vector<ir::Value*> data;
    for (ir::Value* v : cands)
      if (!v->is_constant()) data.push_back(v);
    if (!data.empty()) cands = data;
  }
  return cands.size() == 1 ? cands[0] : nullptr;
}

ir::Value* Match::resolve(const TensorRef& ref) const {
  if (ref.node >= 0) return input(ref.node, ref.ports);
  ir::Node* n = graph_->find_node(ref.graph_node);
  if (!n || contains(n)) return nullptr;
  size_t port = static_cast<size_t>(ref.ports.at(0));
  return port < n->num_outputs() ? n->output(port) : nullptr;
}

ir::Value* Match::old_output(const TensorRef& ref) const {
  ir::Node* n = node(ref.node);
  size_t port = static_cast<size_t>(ref.ports.at(0));
  return port < n->num_outputs() ? n->output(port) : nullptr;
}

// ---------------- checks ----------------

std::string check_match(const Match& m) {
  const PatternConfig& c = m.config();
  // structure
  for (const PatternNode& p : c.in_nodes) {
    const ir::Node* n = m.node(p.index);
    if (c.search_mode == SearchMode::op_type && !op_matches(n, p))
      return cat(n->describe(), " is not ", join(p.ops, "|"), " (node ", p.index, ")");
  }
  if (std::set<const ir::Node*>(m.nodes().begin(), m.nodes().end()).size() != m.nodes().size())
    return "one graph node stands for two pattern nodes";
  for (const PatternEdge& e : c.edges) {
    if (!edge_holds(m.node(e.from), m.node(e.to), e.port))
      return cat("no edge from ", m.node(e.from)->describe(), " to ",
                 e.port >= 0 ? cat("input ", e.port, " of ") : std::string(), m.node(e.to)->describe());
  }
  for (size_t g = 0; g < c.same_tensors.size(); ++g) {
    const ir::Value* first = nullptr;
    for (const TensorRef& r : c.same_tensors[g]) {
      const ir::Value* v = m.resolve(r);
      if (!v) return cat("same_tensors[", g, "]: input ", join(r.ports, "|"), " of ", m.node(r.node)->describe(),
                         " does not resolve to one tensor from outside the pattern");
      if (first && v != first)
        return cat("same_tensors[", g, "]: '", first->name(), "' and '", v->name(), "' are different tensors");
      first = v;
    }
  }
  // tensors the new pattern reads
  for (const auto& [j, map] : c.input_tensors) {
    for (size_t s = 0; s < map.sources.size(); ++s) {
      const TensorRef& r = map.sources[s];
      if (m.resolve(r)) continue;
      if (r.node < 0)
        return cat("input_tensors.", j, "[0][", s, "]: no graph node '", r.graph_node,
                   "' outside the pattern with output ", r.ports[0]);
      return cat("input_tensors.", j, "[0][", s, "]: input ", join(r.ports, "|"), " of ", m.node(r.node)->describe(),
                 " does not resolve to one tensor from outside the pattern");
    }
  }
  // pattern outputs: everything read outside the match must be taken over by a new output
  std::set<const ir::Value*> replaced;
  for (const auto& [j, map] : c.output_tensors) {
    for (size_t s = 0; s < map.sources.size(); ++s) {
      const ir::Value* v = m.old_output(map.sources[s]);
      if (!v)
        return cat("output_tensors.", j, "[0][", s, "]: ", m.node(map.sources[s].node)->describe(), " has no output ",
                   map.sources[s].ports[0]);
      replaced.insert(v);
    }
  }
  for (const ir::Node* n : m.nodes()) {
    for (const ir::Value* v : n->outputs()) {
      if (replaced.count(v)) continue;
      bool outside = m.graph().is_output(v);
      for (const ir::Use& u : v->uses()) outside = outside || !m.contains(u.node);
      if (outside)
        return cat("output '", v->name(), "' of ", n->describe(),
                   " is used outside the pattern but is not a pattern output (output_tensors)");
    }
  }
  // no cycle: nothing reachable from the match through outside nodes may feed the match
  std::vector<const ir::Node*> stack;
  std::set<const ir::Node*> seen;
  for (const ir::Node* n : m.nodes())
    for (const ir::Value* v : n->outputs())
      for (const ir::Use& u : v->uses())
        if (!m.contains(u.node) && seen.insert(u.node).second) stack.push_back(u.node);
  while (!stack.empty()) {
    const ir::Node* x = stack.back();
    stack.pop_back();
    for (const ir::Value* v : x->outputs())
      for (const ir::Use& u : v->uses()) {
        if (m.contains(u.node))
          return cat("rewriting would create a cycle: ", x->describe(), " depends on the pattern and feeds ",
                     u.node->describe());
        if (seen.insert(u.node).second) stack.push_back(u.node);
      }
  }
  return "";
}

// ---------------- search ----------------

namespace {

class Searcher {
 public:
  Searcher(ir::Graph& g, const PatternConfig& c, const MatchFilter& filter, std::vector<std::string>* rejected)
      : g_(g), c_(c), filter_(filter), rejected_(rejected), assign_(c.num_in(), nullptr) {
    // visiting order: breadth-first from the main chain's first node over edges in both directions;
    // each later node is reached through an edge to an already placed node
    const int root = c.in_chains[0][0];
    order_.push_back(root);
    link_.push_back({});
    std::vector<bool> placed(c.num_in(), false);
    placed[static_cast<size_t>(root)] = true;
    for (size_t k = 0; k < order_.size(); ++k) {
      for (const PatternEdge& e : c.edges) {
        int other = e.from == order_[k] ? e.to : e.to == order_[k] ? e.from : -1;
        if (other < 0 || placed[static_cast<size_t>(other)]) continue;
        placed[static_cast<size_t>(other)] = true;
        order_.push_back(other);
        link_.push_back(e);
      }
    }
  }

  std::vector<Match> run() {
    std::vector<Match> out;
    if (c_.search_mode == SearchMode::node_name) {
      std::vector<ir::Node*> nodes;
      for (const PatternNode& p : c_.in_nodes) {
        ir::Node* n = g_.find_node(p.ops[0]);
        if (!n)
          throw Error(cat(c_.describe(), ": patterns.in: search_mode is node_name but the graph has no node named '",
                          p.ops[0], "' (node ", p.index, ")"));
        nodes.push_back(n);
      }
      Match m(g_, c_, nodes);
      if (accept(m)) out.push_back(m);
      return out;
    }
    const PatternNode& root = c_.in_nodes[static_cast<size_t>(order_[0])];
    for (ir::Node* anchor : g_.topo_order()) {
      if (claimed_.count(anchor) || !op_matches(anchor, root)) continue;
      assign_[static_cast<size_t>(order_[0])] = anchor;
      used_.insert(anchor);
      if (search(1)) {
        out.push_back(*found_);
        for (ir::Node* n : found_->nodes()) claimed_.insert(n);
        found_.reset();
      }
      used_.clear();
      std::fill(assign_.begin(), assign_.end(), nullptr);
    }
    return out;
  }

 private:
  bool accept(const Match& m) {
    std::string why = check_match(m);
    if (why.empty() && filter_ && !filter_(m)) why = "rejected by the pass's check (constants, axes or shapes)";
    if (why.empty()) return true;
    if (rejected_ && rejected_->size() < 1000)
      rejected_->push_back(cat("match at ", m.nodes().empty() ? std::string("?") : m.node(c_.in_chains[0][0])->describe(),
                               ": ", why));
    return false;
  }

  // Graph nodes that could stand for pattern node order_[k], found through its link edge.
  std::vector<ir::Node*> candidates(size_t k) const {
    const PatternEdge& e = link_[k];
    std::vector<ir::Node*> out;
    auto add = [&](ir::Node* n) {
      if (n && std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
    };
    if (e.to == order_[k]) {  // placed producer -> this node
      const ir::Node* from = assign_[static_cast<size_t>(e.from)];
      for (const ir::Value* v : from->outputs())
        for (const ir::Use& u : v->uses())
          if (e.port < 0 || u.input_index == static_cast<size_t>(e.port)) add(u.node);
    } else {  // this node -> placed consumer
      const ir::Node* to = assign_[static_cast<size_t>(e.to)];
      for (size_t i = 0; i < to->num_inputs(); ++i) {
        if (e.port >= 0 && i != static_cast<size_t>(e.port)) continue;
        if (const ir::Value* v = to->input(i)) add(v->producer());
      }
    }
    return out;
  }

  bool consistent(int p, const ir::Node* n) const {
    for (const PatternEdge& e : c_.edges) {
      if (e.from == p && assign_[static_cast<size_t>(e.to)] && !edge_holds(n, assign_[static_cast<size_t>(e.to)], e.port))
        return false;
      if (e.to == p && assign_[static_cast<size_t>(e.from)] &&
          !edge_holds(assign_[static_cast<size_t>(e.from)], n, e.port))
        return false;
    }
    return true;
  }

  bool search(size_t k) {
    if (k == order_.size()) {
      Match m(g_, c_, assign_);
      if (!accept(m)) return false;
      found_ = std::make_unique<Match>(m);
      return true;
    }
    const int p = order_[k];
    const PatternNode& pn = c_.in_nodes[static_cast<size_t>(p)];
    for (ir::Node* n : candidates(k)) {
      if (used_.count(n) || claimed_.count(n) || !op_matches(n, pn) || !consistent(p, n)) continue;
      assign_[static_cast<size_t>(p)] = n;
      used_.insert(n);
      if (search(k + 1)) return true;
      used_.erase(n);
      assign_[static_cast<size_t>(p)] = nullptr;
    }
    return false;
  }

  ir::Graph& g_;
  const PatternConfig& c_;
  const MatchFilter& filter_;
  std::vector<std::string>* rejected_;
  std::vector<int> order_;
  std::vector<PatternEdge> link_;  // link_[k]: the edge that reaches order_[k] (unused for k = 0)
  std::vector<ir::Node*> assign_;
  std::unordered_set<const ir::Node*> used_, claimed_;
  std::unique_ptr<Match> found_;
};

}  // namespace

std::vector<Match> find_matches(ir::Graph& graph, const PatternConfig& config, const MatchFilter& filter,
                                std::vector<std::string>* rejected) {
  return Searcher(graph, config, filter, rejected).run();
}

}  // namespace kiln::pattern
