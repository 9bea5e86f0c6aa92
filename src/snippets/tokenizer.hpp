#pragma once
// The snippets tokenizer (spec/snippets_design_guide.md, "Tokenizer"): cuts the parts of
// an ir::Graph that snippets can compile into kiln `Subgraph` nodes (subgraph_op.hpp).
//
// Greedy, in topological order. A tokenizable node (`tokenizable`) that the caller did not
// mark as skipped (the CPU layer's MarkSkipped, cpu/mark_skipped.hpp, marks what its own
// fusions will take)
//   - with no producer in a subgraph starts a new one;
//   - otherwise joins its producers' subgraphs, merging them when there are several.
// A join is refused when it would
//   - create a cycle: some path leaves the candidate subgraphs through a node outside
//     them and comes back (other subgraphs count as one node each, as they will be);
//   - give the subgraph more than one graph-output (Result) consumer;
//   - need more data pointers (distinct inputs + outputs of the kernel) than
//     kMaxDataPointers general-purpose registers.
// When merging all producer subgraphs is refused, the node tries to join each of them
// alone (first operand first); if none fits, it starts a new subgraph.
// One-element constants of a subgraph's ops go into its body; other constants become
// node inputs (body parameters). Only subgraphs of at least 2 ops are materialized.
//
// Each Subgraph node is named "<first op>/subgraph", lists the original op names in
// `kiln_fused`, keeps the names of the values it produces (graph output names do not
// change) and gets its output types from the replaced values. Needs inferred types.
#include <cstddef>
#include <functional>
#include <unordered_set>

#include "ir/graph.hpp"
#include "transforms/pass_log.hpp"

namespace kiln::snippets {

// Nodes the tokenizer leaves alone (another part of the compiler takes them).
using SkippedNodes = std::unordered_set<const ir::Node*>;

inline constexpr const char* kTokenizationPass = "SnippetsTokenization";

// Whether snippets can compile node `n` (f32 data only; static or dynamic shapes):
// Abs, Clip (constant one-value bounds), Elu, Erf, Exp, Floor, Ceil, Round, Neg, Relu,
// LeakyRelu, Sigmoid, HardSigmoid, HardSwish, Softplus, Sqrt, Reciprocal, Tanh, Mish,
// com.microsoft Gelu; Add, Sub, Mul, Div, Max, Min (two inputs), Pow, PRelu,
// SquaredDifference (when the registry has it).
bool tokenizable(const ir::Node& n);

// Tokenizes leaving `skipped` alone. A Subgraph gets at most `max_data_pointers` inputs +
// outputs + scratch buffers: the general-purpose registers the code generator has for them
// (the CPU layer passes its target machine's TargetMachine::max_data_pointers()). Returns the
// number of Subgraph nodes created.
size_t tokenize(ir::Graph& g, const SkippedNodes& skipped, size_t max_data_pointers,
                transforms::PassLog* log = nullptr);

}  // namespace kiln::snippets
