#pragma once
// pattern_mapping: replaces every match of a config's old pattern (`patterns.in`) by its
// new pattern (`patterns.out`), as spec/pattern_mapping.md describes:
//   1. find the matches (pattern/matcher.hpp; overlaps: first anchor in topological order wins)
//      and, per match, gather node names, the input tensors and the tensors the new outputs
//      take over, plus snapshots of the `returns` nodes;
//   2. erase the old nodes and create the new chain: new node j reads the tensors
//      input_tensors gives at their positions; its remaining input slots take, in order,
//      the outputs of new node j-1. A new output listed in output_tensors takes over the old
//      tensor: same name, same type, same consumers (graph outputs included);
//   3. call the pass's hook so it can set attributes (epsilon, axis, ...) from the returned
//      old nodes.
// The new nodes get the registry's opset for their op when the graph imports an older one
// (a fused LayerNormalization-17 in an opset-13 model). Shapes of the new internal tensors
// are left to ir::infer_shapes, which the caller runs once after its passes.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.hpp"
#include "pattern/matcher.hpp"
#include "pattern/pattern_config.hpp"

namespace kiln::pattern {

// A copy of what an old node held, taken before it was erased (safe to read afterwards).
struct OldInput {
  ir::Value* value = nullptr;  // the tensor when it comes from outside the pattern (still in the graph)
  std::string name;
  ir::ValueType type;
  Tensor constant;              // defined when the input is a constant
  bool from_pattern = false;    // produced by a node of the old pattern (value is then nullptr)
};

struct OldNode {
  int index = -1;  // in patterns.in
  std::string label;  // its label in the config ("" when none)
  std::string name, op_type, domain;
  int opset = 0;
  std::map<std::string, ir::Attribute> attrs;
  std::vector<OldInput> inputs;  // by input position; an omitted optional input has an empty name
  std::vector<std::string> output_names;
  std::vector<ir::ValueType> output_types;

  // nullptr unless input i exists and is a constant.
  const Tensor* constant_input(size_t i) const;
  bool has_attr(const std::string& n) const { return attrs.count(n) != 0; }
  int64_t attr_i(const std::string& n, int64_t def) const;
  float attr_f(const std::string& n, float def) const;
  std::vector<int64_t> attr_ints(const std::string& n, const std::vector<int64_t>& def) const;
};

// One rewritten match.
struct Rewrite {
  std::string pattern = "pattern config";  // the config's describe(), for messages
  size_t number = 0;                  // 0, 1, ... in rewrite order (the "_N" of string node names)
  std::vector<ir::Node*> new_nodes;   // patterns.out order; valid until the graph changes again
  std::vector<OldNode> returns;       // the `returns` nodes, in that order
  std::vector<std::string> old_names; // every old node's name, by old index

  // The returned snapshot of old node `old_index` (throws kiln::Error if not in `returns`).
  const OldNode& returned(int old_index) const;
  // The returned snapshot of the old node labelled `label` (kiln::Error naming the pattern and
  // the label if no returned node has it).
  const OldNode& returned(const std::string& label) const;
};

struct PatternResult {
  std::vector<Rewrite> rewrites;
  // Candidate matches that were left alone, with the reason (diagnostics, capped).
  std::vector<std::string> skipped;
  size_t count() const { return rewrites.size(); }
};

// Called after the new nodes of one match are wired in (old nodes are gone; their
// snapshots are in rewrite.returns). May set attributes and add inputs of the new nodes.
using RewriteHook = std::function<void(Rewrite& rewrite, ir::Graph& graph)>;

struct PatternOptions {
  MatchFilter filter;      // called before anything changes; false leaves the match alone
  RewriteHook on_rewrite;  // attribute fix-ups
};

PatternResult pattern_mapping(ir::Graph& graph, const PatternConfig& config, const PatternOptions& options = {});

}  // namespace kiln::pattern
