#pragma once
// Shared by the fusion passes: which runtime nodes are "simple layers" a host node
// (Convolution, FullyConnected) can absorb as post-ops, and the chain-absorbing loop.
#include <optional>
#include <string>
#include <vector>

#include "cpu/graph.hpp"
#include "cpu/post_ops.hpp"
#include "transforms/graph_edit.hpp"
#include "transforms/pass_log.hpp"

namespace kiln::cpu::passes {

// The rules of cpu/fusion_rules.hpp (simple_post_ops, fake_quantize_post_ops) on runtime node
// `c` reading `from` (the host's output, one of c's inputs): the post-ops computing c when it
// is a simple layer, else nullopt with `why` saying which condition failed (empty when c is
// not a simple layer at all).
std::optional<std::vector<PostOp>> simple_post_ops(const Node& c, const Edge* from, int channel_axis,
                                                   std::string* why);
std::optional<std::vector<PostOp>> fake_quantize_post_ops(const Node& c, const Edge* from, int channel_axis,
                                                          std::string* why);

// Absorbs into `host` the chain of simple layers that follows it, one at a time while
// the host's output has exactly that one reader, is no graph output, and oneDNN keeps
// an optimised kernel. Logs under `pass`. Returns how many nodes were absorbed.
size_t fuse_simple_chain(Graph& g, Node* host, const char* pass, int channel_axis, transforms::PassLog* log);

// Why `host` may not accumulate into `other` in place of `add` (the sum fusions), or empty:
// `other` is a graph output or a constant (it is written over), `host` reads it itself, or a node
// after `add` still reads it.
std::string sum_target_problem(Graph& g, const Node& host, const Node& add, const Edge& other);

// "conv_7 -> relu_8"
std::string arrow(const Node& a, const Node& b);

// Whether every element of v is x (the ir passes' helper).
using transforms::all_equal;
// Why Convolution node `n` (over a rank-4 input) is not 1x1 (group 1, stride 1, undilated,
// unpadded), or "".
std::string not_pointwise(const Node& n);

// The nodes of `kind` in execution order, collected before a pass changes the list.
std::vector<Node*> nodes_of_kind(Graph& g, NodeKind kind);

// The one node that reads `host`'s first output, when `accept` takes it; else null.
Node* sole_reader(Graph& g, const Node& host, bool (*accept)(const Node&));

}  // namespace kiln::cpu::passes
