#pragma once
// A pattern mapping config (spec/pattern_mapping.md) parsed from JSON and validated.
//
// The JSON form (docs/pattern_mapping.md has the walk-through):
//
//   {
//     "name": "layer_norm",                      optional, used in error messages
//     "description": "...",                      optional, ignored
//     "patterns": {
//       "in":  [ main_chain, branch_chain, ... ],
//       "out": [ [[0, "LayerNormalization"], ...] ]     one chain of new nodes
//     },
//     "search_mode": "op_type" | "node_name",    optional, default op_type
//     "node_names":     { "<out idx>": <in idx> | "name" },
//     "input_tensors":  { "<out idx>": [[{"<in idx>": [input idx, ...]}, ...], [[positions], total]] },
//     "output_tensors": { "<out idx>": [[{"<in idx>": [output idx]}, ...], [[positions], total]] },
//     "returns": [<in idx>, ...],
//     "same_tensors": [ [{"<in idx>": [input idx, ...]}, ...], ... ],  kiln extension
//     "labels": { "<in idx>": "label", ... }                           kiln extension
//   }
//
// A chain element is [index, op] or [index, op, port]: op is "Op" (default ONNX domain),
// "domain:Op" or a list of such alternatives; port pins the input of this node that the
// previous element of the chain feeds (any input when omitted). A branch chain starts with
// its head and ends with its tail: an element whose index was declared by an earlier chain
// ([index] or [index, op]) refers to that node, and [] means "no head" / "no tail".
//
// labels name nodes of patterns.in so C++ checks and fix-ups can ask for "scale" instead of
// node 7 (Match::node(label), Rewrite::returned(label)). A label is an identifier
// ([A-Za-z_][A-Za-z0-9_]*), unique within its config; nodes without one are fine.
#include <nlohmann/json_fwd.hpp>

#include <map>
#include <string>
#include <vector>

namespace kiln::pattern {

enum class SearchMode { op_type, node_name };

// One node of the old pattern (`patterns.in`).
struct PatternNode {
  int index = 0;
  // Alternatives: op types ("Op" / "domain:Op") in op_type mode, node names in node_name mode.
  std::vector<std::string> ops;
  std::string label;  // from "labels"; "" when the node has none
};

// producer -> consumer inside the old pattern: some output of `from` is input `port` of `to`.
struct PatternEdge {
  int from = 0;
  int to = 0;
  int port = -1;  // -1: any input of `to`
};

// A node of the new pattern (`patterns.out`), in chain order (index == position).
struct OutNode {
  int index = 0;
  std::string op_type;
  std::string domain;  // "" = default ONNX domain
};

// One source of input_tensors / output_tensors / same_tensors.
struct TensorRef {
  // Index into patterns.in, or -1 when the tensor is an output of the graph node `graph_node`
  // (a node outside the pattern, the spec's {'reshape_0': [0]} form).
  int node = -1;
  std::string graph_node;
  // input_tensors / same_tensors with a pattern node: input indices of that node; several
  // mean "whichever of these is not produced inside the pattern". output_tensors: one output
  // index. graph_node: one output index of that node.
  std::vector<int> ports;
};

// The value of one input_tensors / output_tensors entry.
struct TensorMap {
  std::vector<TensorRef> sources;
  std::vector<int> positions;  // positions[i] = slot of the new node that sources[i] fills
  int total = 0;               // number of inputs / outputs of the new node
};

struct NodeNameRule {
  int old_index = -1;  // >= 0: take the name of that old node
  std::string name;    // otherwise: this name with "_<match number>" appended
};

struct PatternConfig {
  std::string name;
  std::vector<PatternNode> in_nodes;               // in_nodes[i].index == i
  std::vector<PatternEdge> edges;                  // every chain adjacency
  std::vector<std::vector<int>> in_chains;         // node indices of each chain as written (refs included)
  std::vector<OutNode> out_nodes;                  // out_nodes[i].index == i
  SearchMode search_mode = SearchMode::op_type;
  std::map<int, NodeNameRule> node_names;          // out index -> rule
  std::map<int, TensorMap> input_tensors;          // out index -> inputs
  std::map<int, TensorMap> output_tensors;         // out index -> outputs
  std::vector<int> returns;                        // old indices
  std::vector<std::vector<TensorRef>> same_tensors;  // groups that must resolve to one value

  size_t num_in() const { return in_nodes.size(); }
  size_t num_out() const { return out_nodes.size(); }
  // Number of outputs of new node i (output_tensors total, 1 when not given).
  int out_outputs(int i) const;
  // The index of the old node labelled `label`, or -1 when no node has that label.
  int find_label(const std::string& label) const;
  // Same, but a missing label throws kiln::Error naming the pattern, the label and the labels it has.
  int labelled(const std::string& label) const;
  // "pattern 'name'" or "pattern config": the prefix of error messages.
  std::string describe() const;
};

// Throw kiln::Error naming the offending key (e.g. "input_tensors.0[0][1]") and what was expected.
PatternConfig parse_pattern_config(const nlohmann::json& j);
PatternConfig parse_pattern_config_string(const std::string& text, const std::string& origin = "<string>");
PatternConfig load_pattern_config(const std::string& path);
// A JSON array of configs, or one config object.
std::vector<PatternConfig> parse_pattern_configs(const nlohmann::json& j);
std::vector<PatternConfig> parse_pattern_configs_string(const std::string& text,
                                                        const std::string& origin = "<string>");

// Splits "domain:Op" into {domain, op}; plain "Op" has domain "".
std::pair<std::string, std::string> split_op(const std::string& op);

}  // namespace kiln::pattern
