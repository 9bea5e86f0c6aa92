#pragma once
// The snippets Subgraph op (domain "kiln", op "Subgraph"): a fused piece of an ir::Graph
// that the tokenizer (tokenizer.hpp) cut out, kept as the graph attribute `body`.
//
//   Subgraph(x_0 .. x_{N-1}) -> y_0 .. y_{M-1}
//     body       graph: N inputs (one per node input, in order), M outputs (one per node
//                output, in order); one-element constants live inside it
//     kiln_fused strings (optional): names of the original ops, in topological order
//
// Shape inference infers a copy of the body with the node's input types (symbolic dims
// flow through). The reference kernel runs the body on the reference executor, so a
// tokenized graph computes correctly on every executor before the JIT compiles it.
#include <string>

namespace kiln::ir {
class Node;
class OpRegistry;
}  // namespace kiln::ir

namespace kiln::snippets {

inline constexpr const char* kSubgraphDomain = "kiln";
inline constexpr const char* kSubgraphOp = "Subgraph";
inline constexpr const char* kBodyAttr = "body";
inline constexpr const char* kFusedAttr = "kiln_fused";

// True for a kiln Subgraph node.
bool is_subgraph(const ir::Node& n);

void register_subgraph_op(ir::OpRegistry& r);

}  // namespace kiln::snippets
