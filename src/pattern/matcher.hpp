#pragma once
// Finding the old pattern (`patterns.in`) of a PatternConfig in an ir::Graph.
//
// A match assigns one graph node to every pattern node such that
//   - the node's op type is one of the alternatives ("Op" = default ONNX domain,
//     "domain:Op" otherwise) — in node_name search mode the node is looked up by name;
//   - every pattern edge a -> b (port p) holds: an output of a's node is input p of b's node
//     (any input when no port is given);
//   - same_tensors groups resolve to one tensor;
// and it can be rewritten safely (check_match):
//   - every tensor input_tensors names resolves (below);
//   - a matched node's output that is read outside the match or is a graph output is a
//     pattern output (listed in output_tensors), else the match is skipped;
//   - no path leaves the match and re-enters it (the fused node would sit on a cycle).
//
// Resolving {old_index: [ports]}: the inputs at those ports of that node that are produced
// outside the match (graph inputs, constants, other nodes); duplicates collapse; when more
// than one remains, constants are dropped (a data tensor beats a weight). Exactly one must
// remain. With one port this is simply "that input, which must come from outside".
//
// Overlaps: candidate anchors (graph nodes for the main chain's first node) are visited in
// the graph's topological order; each anchor takes the first match the depth-first search
// finds (candidates in use order), and a node claimed by an earlier match is never used
// again. So among overlapping matches the one whose anchor comes first topologically wins.
#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

#include "ir/graph.hpp"
#include "pattern/pattern_config.hpp"

namespace kiln::pattern {

// One match of patterns.in: graph nodes by old-pattern index. Valid until the graph changes.
class Match {
 public:
  Match(ir::Graph& graph, const PatternConfig& config, std::vector<ir::Node*> nodes);

  ir::Graph& graph() const { return *graph_; }
  const PatternConfig& config() const { return *config_; }
  ir::Node* node(int old_index) const;  // throws kiln::Error on a bad index
  // The node of the old-pattern node labelled `label` (config "labels"); kiln::Error naming the
  // pattern and the label when no node has it.
  ir::Node* node(const std::string& label) const;
  // Whether this config labels a node `label` (variants of one fusion may lack a node, e.g. a mask Add).
  bool has(const std::string& label) const { return config_->find_label(label) >= 0; }
  const std::vector<ir::Node*>& nodes() const { return nodes_; }
  bool contains(const ir::Node* n) const { return members_.count(n) != 0; }

  // The tensor {old_index: ports} names (rule above); nullptr when none or ambiguous.
  ir::Value* input(int old_index, const std::vector<int>& ports) const;
  ir::Value* input(const std::string& label, const std::vector<int>& ports) const;
  // Any TensorRef of input_tensors / same_tensors (graph-node refs: that node's output,
  // nullptr if there is no such node outside the match).
  ir::Value* resolve(const TensorRef& ref) const;
  // Same for output_tensors: the old tensor a new output takes over (nullptr if absent).
  ir::Value* old_output(const TensorRef& ref) const;
  // True when `v` is produced by a node of this match.
  bool produced_inside(const ir::Value* v) const;

 private:
  ir::Graph* graph_;
  const PatternConfig* config_;
  std::vector<ir::Node*> nodes_;
  std::unordered_set<const ir::Node*> members_;
};

// Return false to leave a match alone (e.g. a constant has the wrong value).
using MatchFilter = std::function<bool(const Match&)>;

// Checks that `m` can be rewritten on the graph as it is now: structure (ops, edges,
// same_tensors), tensor resolution, pattern outputs, no cycle. Returns "" or the reason.
std::string check_match(const Match& m);

// All non-overlapping matches accepted by check_match and `filter` (may be empty), in
// anchor topological order. Rejected candidates are described in `rejected` (if given).
// node_name mode: at most one match; a name missing from the graph throws kiln::Error.
std::vector<Match> find_matches(ir::Graph& graph, const PatternConfig& config, const MatchFilter& filter = {},
                                std::vector<std::string>* rejected = nullptr);

}  // namespace kiln::pattern
