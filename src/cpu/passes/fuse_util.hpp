#pragma once
// Shared by the fusion passes: which runtime nodes are "simple layers" a host node
// (Convolution, FullyConnected) can absorb as post-ops, and the chain-absorbing loop.
#include <optional>
#include <string>
#include <vector>

#include "cpu/graph.hpp"
#include "cpu/post_ops.hpp"
#include "transforms/pass_log.hpp"

namespace kiln::cpu::passes {

// The post-ops computing node `c` from `from` (the host's output, one of c's inputs)
// when c is a simple layer: an eltwise activation, a binary op with a constant that is
// one value or one value per channel (`channel_axis` of the output), PReLU with such a
// slope, HardSigmoid. nullopt when c is not one; `why` then says which condition failed
// (empty when c is not a simple layer at all). FakeQuantize counts as one: see below.
std::optional<std::vector<PostOp>> simple_post_ops(const Node& c, const Edge* from, int channel_axis,
                                                   std::string* why);

// The post-ops computing a kiln FakeQuantize node `c` (X = `from`, f32) whose four ranges
// are constants holding one value or one value per channel (`channel_axis`), with
// input_low < input_high everywhere. With L = levels - 1, s = L / (ih - il),
// d = (oh - ol) / L and a the level of the real value 0 when it lies on the grid (else 0):
//   binary_max(il), binary_min(ih)      clamp, so x <= il gives ol and x >= ih gives oh
//   binary_mul(s), binary_add(a - il*s) t = (x - il) * s, shifted so that ties are decided
//                                       on the grid anchored at 0, as the reference does
//   eltwise_round                       round half to even (the only eltwise op: oneDNN
//                                       2.6 mishandles two eltwise ops of one algorithm)
//   binary_mul(d), binary_add(ol - a*d)
// Constants are computed in double and stored f32; the chain runs in f32, so it equals the
// reference FakeQuantize (double) except for inputs within f32 rounding of a rounding tie,
// which may land one level (d) away, and NaN (the reference passes it through; here the
// clamp decides). nullopt when c is not a FakeQuantize at all (`why` empty) or a condition
// fails (`why` says which).
std::optional<std::vector<PostOp>> fake_quantize_post_ops(const Node& c, const Edge* from, int channel_axis,
                                                          std::string* why);

// Absorbs into `host` the chain of simple layers that follows it, one at a time while
// the host's output has exactly that one reader, is no graph output, and oneDNN keeps
// an optimised kernel. Logs under `pass`. Returns how many nodes were absorbed.
size_t fuse_simple_chain(Graph& g, Node* host, const char* pass, int channel_axis, transforms::PassLog* log);

// "conv_7 -> relu_8"
std::string arrow(const Node& a, const Node& b);

}  // namespace kiln::cpu::passes
