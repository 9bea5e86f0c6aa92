#include "pattern/pattern_config.hpp"

#include <kiln/error.hpp>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/strings.hpp"

namespace kiln::pattern {

using json = nlohmann::json;

int PatternConfig::out_outputs(int i) const {
  auto it = output_tensors.find(i);
  return it == output_tensors.end() ? 1 : it->second.total;
}

std::string PatternConfig::describe() const { return name.empty() ? "pattern config" : cat("pattern '", name, "'"); }

int PatternConfig::find_label(const std::string& label) const {
  if (label.empty()) return -1;
  for (const PatternNode& n : in_nodes)
    if (n.label == label) return n.index;
  return -1;
}

int PatternConfig::labelled(const std::string& label) const {
  const int i = find_label(label);
  if (i >= 0) return i;
  std::vector<std::string> have;
  for (const PatternNode& n : in_nodes)
    if (!n.label.empty()) have.push_back(n.label);
  throw Error(cat(describe(), ": no node of patterns.in is labelled '", label, "' (labels: ",
                  have.empty() ? "none" : join(have, ", "), ")"));
}

std::pair<std::string, std::string> split_op(const std::string& op) {
  size_t p = op.rfind(':');
  if (p == std::string::npos) return {"", op};
  return {op.substr(0, p), op.substr(p + 1)};
}

namespace {

// Reports errors as "<label>: <key>: <what>".
class Parser {
 public:
  explicit Parser(std::string label) : label_(std::move(label)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw Error(cat(label_, ": ", key, ": ", what));
  }

  static std::string show(const json& j) {
    std::string s = j.dump();
    return s.size() > 80 ? s.substr(0, 77) + "..." : s;
  }

  int get_int(const std::string& key, const json& j, const char* expected, int min_value = 0) const {
    if (!j.is_number_integer()) fail(key, cat("expected ", expected, ", got ", show(j)));
    int64_t v = j.get<int64_t>();
    if (v < min_value || v > 1000000) fail(key, cat("expected ", expected, ", got ", v));
    return static_cast<int>(v);
  }

  // "7" -> 7; anything that is not a plain decimal number -> -1.
  static int digits_key(const std::string& k) {
    if (k.empty() || k.size() > 7) return -1;
    for (char ch : k)
      if (ch < '0' || ch > '9') return -1;
    return std::stoi(k);
  }

  // An object key that must be a node index of `pattern` ("patterns.in" / "patterns.out"), which has `count` nodes.
  int index_key(const std::string& key, const std::string& k, size_t count, const char* pattern) const {
    int i = digits_key(k);
    if (i < 0) fail(key, cat("expected a node index of ", pattern, " as key (\"0\", \"1\", ...), got \"", k, "\""));
    if (static_cast<size_t>(i) >= count)
      fail(cat(key, ".", k), cat(pattern, " has ", count, " node(s) (indices 0..", count - 1, "), no node ", i));
    return i;
  }
  int out_key(const std::string& key, const std::string& k, size_t num_out) const {
    return index_key(key, k, num_out, "patterns.out");
  }

  int in_index(const std::string& key, const json& j, size_t num_in) const {
    int i = get_int(key, j, "a node index of patterns.in");
    if (static_cast<size_t>(i) >= num_in)
      fail(key, cat("patterns.in has ", num_in, " node(s) (indices 0..", num_in - 1, "), no node ", i));
    return i;
  }

  std::vector<std::string> ops(const std::string& key, const json& j, bool single) const {
    const char* expected = single ? "a node name (string)" : "an op type (\"Op\" or \"domain:Op\") or a list of them";
    std::vector<std::string> out;
    if (j.is_string()) {
      out.push_back(j.get<std::string>());
    } else if (j.is_array() && !single && !j.empty()) {
      for (const json& e : j) {
        if (!e.is_string()) fail(key, cat("expected ", expected, ", got ", show(j)));
        out.push_back(e.get<std::string>());
      }
    } else {
      fail(key, cat("expected ", expected, ", got ", show(j)));
    }
    for (const std::string& s : out) {
      if (s.empty()) fail(key, cat("expected ", expected, ", got an empty string"));
      if (!single && split_op(s).second.empty()) fail(key, cat("op type \"", s, "\" has an empty op name"));
    }
    return out;
  }

  std::string label_;
};

void parse_in(const Parser& p, const json& in, PatternConfig& c) {
  const bool by_name = c.search_mode == SearchMode::node_name;
  if (!in.is_array() || in.empty())
    p.fail("patterns.in", cat("expected a non-empty list of chains (the main chain, then branch chains), got ",
                              Parser::show(in)));
  std::map<int, std::vector<std::string>> declared;
  std::map<int, size_t> declared_in_chain;
  for (size_t ci = 0; ci < in.size(); ++ci) {
    const std::string ckey = cat("patterns.in[", ci, "]");
    const json& chain = in[ci];
    if (!chain.is_array() || chain.empty())
      p.fail(ckey, cat("expected a non-empty list of [index, op_type] elements, got ", Parser::show(chain)));
    std::vector<int> ids;
    int prev = -1;
    for (size_t ei = 0; ei < chain.size(); ++ei) {
      const std::string ekey = cat(ckey, "[", ei, "]");
      const json& el = chain[ei];
      const bool first = ei == 0, last = ei + 1 == chain.size();
      if (!el.is_array() || el.size() > 3)
        p.fail(ekey, cat("expected [index, op_type] or [index, op_type, port], got ", Parser::show(el)));
      if (el.empty()) {
        if (ci == 0) p.fail(ekey, "the main chain cannot contain [] (it only marks a branch without head or tail)");
        if (!first && !last)
          p.fail(ekey, "[] (no head / no tail) is only allowed as the first or last element of a branch chain");
        if (chain.size() == 1) p.fail(ekey, "a branch chain needs at least one node");
        prev = -1;
        continue;
      }
      const int idx = p.get_int(cat(ekey, "[0]"), el[0], "a node index (integer >= 0)");
      std::vector<std::string> ops;
      if (el.size() >= 2) ops = p.ops(cat(ekey, "[1]"), el[1], by_name);
      int port = -1;
      if (el.size() == 3) port = p.get_int(cat(ekey, "[2]"), el[2], "an input port (integer >= 0)");
      auto d = declared.find(idx);
      if (d != declared.end()) {
        if (declared_in_chain[idx] == ci)
          p.fail(ekey, cat("node index ", idx, " is declared twice in this chain"));
        if (ci == 0) p.fail(ekey, cat("node index ", idx, " is declared twice"));
        if (!first && !last)
          p.fail(ekey, cat("node ", idx, " was declared by an earlier chain; only the first (head) and last (tail) ",
                           "element of a branch chain may refer to an earlier node"));
        if (!ops.empty() && ops != d->second)
          p.fail(cat(ekey, "[1]"), cat("node ", idx, " is declared as ", join(d->second, "|"), ", here as ",
                                       join(ops, "|")));
      } else {
        if (ops.empty())
          p.fail(ekey, cat("node ", idx, " is not declared by an earlier chain, so it needs an op type: [", idx,
                           ", \"Op\"]"));
        declared[idx] = ops;
        declared_in_chain[idx] = ci;
      }
      if (port >= 0 && prev < 0)
        p.fail(cat(ekey, "[2]"), "this element has no previous node in its chain, so it takes no input port");
      if (prev >= 0) {
        if (prev == idx) p.fail(ekey, cat("edge from node ", idx, " to itself"));
        c.edges.push_back({prev, idx, port});
      }
      prev = idx;
      ids.push_back(idx);
    }
    c.in_chains.push_back(ids);
  }
  for (int i = 0; i < static_cast<int>(declared.size()); ++i) {
    if (!declared.count(i))
      p.fail("patterns.in", cat("node indices must be 0..", declared.size() - 1, " without gaps; ", i, " is missing"));
    c.in_nodes.push_back({i, declared[i], ""});
  }
  // every node must be reachable from the main chain's first node (edges in either direction)
  std::set<int> seen{c.in_chains[0][0]};
  std::vector<int> stack{c.in_chains[0][0]};
  while (!stack.empty()) {
    int n = stack.back();
    stack.pop_back();
    for (const PatternEdge& e : c.edges) {
      int other = e.from == n ? e.to : e.to == n ? e.from : -1;
      if (other >= 0 && seen.insert(other).second) stack.push_back(other);
    }
  }
  for (const PatternNode& n : c.in_nodes)
    if (!seen.count(n.index))
      p.fail("patterns.in", cat("node ", n.index, " is not connected to the main chain (a branch needs a head or a ",
                                "tail that refers to an earlier node)"));
}

void parse_out(const Parser& p, const json& out, PatternConfig& c) {
  const json* chain = &out;
  bool bare = out.is_array() && !out.empty() && out[0].is_array() && !out[0].empty() && out[0][0].is_number();
  std::string key = "patterns.out";
  if (!bare) {
    if (!out.is_array() || out.size() != 1)
      p.fail(key, cat("expected one chain of new nodes, [[[0, \"Op\"], [1, \"Op\"], ...]], got ", Parser::show(out)));
    chain = &out[0];
    key = "patterns.out[0]";
  }
  if (!chain->is_array() || chain->empty())
    p.fail(key, cat("expected a non-empty list of [index, op_type] elements, got ", Parser::show(*chain)));
  for (size_t i = 0; i < chain->size(); ++i) {
    const std::string ekey = cat(key, "[", i, "]");
    const json& el = (*chain)[i];
    if (!el.is_array() || el.size() != 2 || !el[1].is_string())
      p.fail(ekey, cat("expected [index, \"Op\"] (one op type, \"domain:Op\" for another domain), got ",
                       Parser::show(el)));
    int idx = p.get_int(cat(ekey, "[0]"), el[0], "a node index (integer >= 0)");
    if (idx != static_cast<int>(i))
      p.fail(cat(ekey, "[0]"), cat("expected index ", i, ", got ", idx, " (new nodes are numbered 0, 1, ... in ",
                                   "chain order)"));
    auto [domain, op] = split_op(el[1].get<std::string>());
    if (op.empty()) p.fail(cat(ekey, "[1]"), "expected a non-empty op type");
    c.out_nodes.push_back({idx, op, domain});
  }
}

// One {"<in idx>": [tensor indices]} or {"<graph node name>": [output index]} object.
TensorRef parse_ref(const Parser& p, const std::string& key, const json& j, const PatternConfig& c,
                    bool allow_graph_node, bool single_port) {
  if (!j.is_object() || j.size() != 1)
    p.fail(key, cat("expected one {\"<node index of patterns.in>\": [tensor indices]} object, got ", Parser::show(j)));
  const std::string k = j.begin().key();
  const json& v = j.begin().value();
  TensorRef r;
  int idx = Parser::digits_key(k);
  if (idx >= 0) {
    if (static_cast<size_t>(idx) >= c.num_in())
      p.fail(key, cat("patterns.in has ", c.num_in(), " node(s) (indices 0..", c.num_in() - 1, "), no node ", idx));
    r.node = idx;
  } else if (!allow_graph_node) {
    p.fail(key, cat("expected a node index of patterns.in as key (\"0\", \"1\", ...), got \"", k, "\""));
  } else {
    r.graph_node = k.rfind("node:", 0) == 0 ? k.substr(5) : k;
    if (r.graph_node.empty()) p.fail(key, "expected a graph node name after \"node:\"");
  }
  if (!v.is_array() || v.empty())
    p.fail(cat(key, ".", k), cat("expected a non-empty list of tensor indices, got ", Parser::show(v)));
  for (size_t i = 0; i < v.size(); ++i)
    r.ports.push_back(p.get_int(cat(key, ".", k, "[", i, "]"), v[i], "a tensor index (integer >= 0)"));
  if ((single_port || r.node < 0) && r.ports.size() != 1)
    p.fail(cat(key, ".", k), cat("expected exactly one ", r.node < 0 ? "output index of that graph node" : "output index",
                                 ", got ", Parser::show(v)));
  return r;
}

TensorMap parse_map(const Parser& p, const std::string& key, const json& j, const PatternConfig& c, bool outputs) {
  const char* expected = outputs ? "[[{\"<in idx>\": [output idx]}, ...], [[positions], total]]"
                                 : "[[{\"<in idx>\": [input idx, ...]}, ...], [[positions], total]]";
  if (!j.is_array() || j.size() != 2 || !j[0].is_array())
    p.fail(key, cat("expected ", expected, ", got ", Parser::show(j)));
  TensorMap m;
  for (size_t i = 0; i < j[0].size(); ++i)
    m.sources.push_back(parse_ref(p, cat(key, "[0][", i, "]"), j[0][i], c, !outputs, outputs));
  const json& pt = j[1];
  if (!pt.is_array() || pt.size() != 2 || !pt[0].is_array())
    p.fail(cat(key, "[1]"), cat("expected [[positions], total], got ", Parser::show(pt)));
  m.total = p.get_int(cat(key, "[1][1]"), pt[1], "the total number of tensors (integer >= 0)");
  if (pt[0].size() != m.sources.size())
    p.fail(cat(key, "[1][0]"), cat("expected ", m.sources.size(), " position(s), one per tensor source, got ",
                                   pt[0].size()));
  if (m.sources.size() > static_cast<size_t>(m.total))
    p.fail(cat(key, "[1][1]"), cat("total ", m.total, " is smaller than the ", m.sources.size(), " tensors given"));
  std::set<int> seen;
  for (size_t i = 0; i < pt[0].size(); ++i) {
    const std::string pkey = cat(key, "[1][0][", i, "]");
    int pos = p.get_int(pkey, pt[0][i], "a position (integer >= 0)");
    if (pos >= m.total) p.fail(pkey, cat("position ", pos, " is out of range for total ", m.total));
    if (!seen.insert(pos).second) p.fail(pkey, cat("position ", pos, " is given twice"));
    m.positions.push_back(pos);
  }
  return m;
}

std::map<int, TensorMap> parse_maps(const Parser& p, const std::string& key, const json& j, const PatternConfig& c,
                                    bool outputs) {
  if (!j.is_object()) p.fail(key, cat("expected an object keyed by node index of patterns.out, got ", Parser::show(j)));
  std::map<int, TensorMap> out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    int i = p.out_key(key, it.key(), c.num_out());
    out[i] = parse_map(p, cat(key, ".", it.key()), it.value(), c, outputs);
  }
  return out;
}

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; });
}

// "labels": {"<in idx>": "label"}: identifiers, one per node at most, unique in the config.
void parse_labels(const Parser& p, const json& j, PatternConfig& c) {
  if (!j.is_object())
    p.fail("labels", cat("expected an object {\"<node index of patterns.in>\": \"label\"}, got ", Parser::show(j)));
  for (auto it = j.begin(); it != j.end(); ++it) {
    const int i = p.index_key("labels", it.key(), c.num_in(), "patterns.in");
    const std::string key = cat("labels.", it.key());
    if (!it.value().is_string()) p.fail(key, cat("expected a label (string), got ", Parser::show(it.value())));
    const std::string label = it.value().get<std::string>();
    if (!is_identifier(label))
      p.fail(key, cat("label \"", label, "\" is not an identifier (letters, digits and _, not starting with a digit)"));
    const int other = c.find_label(label);
    if (other >= 0) p.fail(key, cat("label \"", label, "\" is already the label of node ", other));
    c.in_nodes[static_cast<size_t>(i)].label = label;
  }
}

void cross_check(const Parser& p, PatternConfig& c) {
  // outputs: each old tensor is taken over by at most one new output
  std::set<std::pair<int, int>> taken;
  for (auto& [i, m] : c.output_tensors)
    for (size_t s = 0; s < m.sources.size(); ++s) {
      auto key = std::make_pair(m.sources[s].node, m.sources[s].ports[0]);
      if (!taken.insert(key).second)
        p.fail(cat("output_tensors.", i, "[0][", s, "]"),
               cat("output ", key.second, " of old node ", key.first, " is already an output of another new node"));
    }
  // inputs: slots not given are fed, in order, by the previous new node's outputs
  for (int j = 0; j < static_cast<int>(c.num_out()); ++j) {
    auto it = c.input_tensors.find(j);
    if (it == c.input_tensors.end()) {
      if (j == 0)
        p.fail("input_tensors", "out node 0 needs an entry: it has no previous new node to take its inputs from");
      TensorMap m;
      m.total = c.out_outputs(j - 1);
      c.input_tensors[j] = m;
      continue;
    }
    const TensorMap& m = it->second;
    const int unfilled = m.total - static_cast<int>(m.positions.size());
    if (unfilled > 0 && j == 0)
      p.fail("input_tensors.0", cat(unfilled, " of its ", m.total, " inputs are not given and out node 0 has no ",
                                    "previous new node to feed them"));
    if (j > 0 && unfilled > c.out_outputs(j - 1))
      p.fail(cat("input_tensors.", j), cat(unfilled, " inputs are left to be fed by out node ", j - 1, ", which has only ",
                                           c.out_outputs(j - 1), " output(s)"));
  }
}

}  // namespace

PatternConfig parse_pattern_config(const json& j) {
  PatternConfig c;
  if (j.is_object() && j.contains("name")) {
    if (!j["name"].is_string()) Parser("pattern config").fail("name", cat("expected a string, got ", Parser::show(j["name"])));
    c.name = j["name"].get<std::string>();
  }
  Parser p(c.describe());
  if (!j.is_object()) p.fail("<top level>", cat("expected a JSON object, got ", Parser::show(j)));
  static const std::set<std::string> known = {"name", "description", "patterns", "search_mode", "node_names",
                                              "input_tensors", "output_tensors", "returns", "same_tensors",
                                              "labels"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!known.count(it.key()))
      p.fail(it.key(), "unknown key; expected patterns, search_mode, node_names, input_tensors, output_tensors, "
                       "returns, same_tensors, labels, name or description");
  for (const char* req : {"patterns", "input_tensors", "output_tensors"})
    if (!j.contains(req)) p.fail(req, "missing required key");

  if (j.contains("search_mode")) {
    const json& m = j["search_mode"];
    if (m == "op_type") c.search_mode = SearchMode::op_type;
    else if (m == "node_name") c.search_mode = SearchMode::node_name;
    else p.fail("search_mode", cat("expected \"op_type\" or \"node_name\", got ", Parser::show(m)));
  }

  const json& pats = j["patterns"];
  if (!pats.is_object()) p.fail("patterns", cat("expected {\"in\": [...], \"out\": [...]}, got ", Parser::show(pats)));
  for (auto it = pats.begin(); it != pats.end(); ++it)
    if (it.key() != "in" && it.key() != "out") p.fail(cat("patterns.", it.key()), "unknown key; expected in and out");
  if (!pats.contains("in")) p.fail("patterns.in", "missing required key");
  if (!pats.contains("out")) p.fail("patterns.out", "missing required key");
  parse_in(p, pats["in"], c);
  parse_out(p, pats["out"], c);
  if (j.contains("labels")) parse_labels(p, j["labels"], c);

  if (j.contains("node_names")) {
    const json& nn = j["node_names"];
    if (!nn.is_object()) p.fail("node_names", cat("expected an object keyed by node index of patterns.out, got ",
                                                  Parser::show(nn)));
    for (auto it = nn.begin(); it != nn.end(); ++it) {
      int i = p.out_key("node_names", it.key(), c.num_out());
      const std::string key = cat("node_names.", it.key());
      NodeNameRule r;
      if (it.value().is_string()) {
        r.name = it.value().get<std::string>();
        if (r.name.empty()) p.fail(key, "expected a non-empty name");
      } else if (it.value().is_number_integer()) {
        r.old_index = p.in_index(key, it.value(), c.num_in());
      } else {
        p.fail(key, cat("expected a node index of patterns.in or a name string, got ", Parser::show(it.value())));
      }
      c.node_names[i] = r;
    }
  }
  c.input_tensors = parse_maps(p, "input_tensors", j["input_tensors"], c, false);
  c.output_tensors = parse_maps(p, "output_tensors", j["output_tensors"], c, true);

  if (j.contains("returns")) {
    const json& r = j["returns"];
    if (!r.is_array()) p.fail("returns", cat("expected a list of node indices of patterns.in, got ", Parser::show(r)));
    for (size_t i = 0; i < r.size(); ++i) c.returns.push_back(p.in_index(cat("returns[", i, "]"), r[i], c.num_in()));
  }
  if (j.contains("same_tensors")) {
    const json& s = j["same_tensors"];
    if (!s.is_array()) p.fail("same_tensors", cat("expected a list of groups, got ", Parser::show(s)));
    for (size_t g = 0; g < s.size(); ++g) {
      const std::string key = cat("same_tensors[", g, "]");
      if (!s[g].is_array() || s[g].size() < 2)
        p.fail(key, cat("expected a list of at least two {\"<in idx>\": [input idx, ...]} objects, got ",
                        Parser::show(s[g])));
      std::vector<TensorRef> group;
      for (size_t m = 0; m < s[g].size(); ++m)
        group.push_back(parse_ref(p, cat(key, "[", m, "]"), s[g][m], c, false, false));
      c.same_tensors.push_back(group);
    }
  }
  cross_check(p, c);
  return c;
}

namespace {
json parse_text(const std::string& text, const std::string& origin) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers like 1e999
    throw Error(cat("pattern config ", origin, ": not valid JSON: ", e.what()));
  }
}
}  // namespace

PatternConfig parse_pattern_config_string(const std::string& text, const std::string& origin) {
  return parse_pattern_config(parse_text(text, origin));
}

PatternConfig load_pattern_config(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw Error(cat("pattern config: cannot open '", path, "'"));
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_pattern_config_string(ss.str(), cat("'", path, "'"));
}

std::vector<PatternConfig> parse_pattern_configs(const json& j) {
  std::vector<PatternConfig> out;
  if (j.is_array()) {
    for (const json& e : j) out.push_back(parse_pattern_config(e));
  } else {
    out.push_back(parse_pattern_config(j));
  }
  return out;
}

std::vector<PatternConfig> parse_pattern_configs_string(const std::string& text, const std::string& origin) {
  return parse_pattern_configs(parse_text(text, origin));
}

}  // namespace kiln::pattern
