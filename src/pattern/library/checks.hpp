#pragma once
// What the checks of the shipped fusions (src/pattern/library/<family>.cpp) have in common:
// constants compared with a tolerance, the operands of two-input nodes, last-axis reductions,
// and the constant an old node took from outside the pattern. Nodes are asked for by label.
#include <string>

#include "ir/graph.hpp"
#include "pattern/matcher.hpp"
#include "pattern/pattern_mapping.hpp"

namespace kiln::pattern::library {

// `v` is within a relative 1e-3 (plus 1e-7) of `want`: exporters round their constants.
bool approx(double v, double want);

// The rank of `v` when known, else -1.
int rank_of(const ir::Value* v);

// `c` as a one-element constant that does not raise the rank of `x` when broadcast with it,
// else nullptr.
const Tensor* scalar_constant(const ir::Value* c, const ir::Value* x);

// `c` is such a constant and approx `want`.
bool scalar_near(const ir::Value* c, const ir::Value* x, double want);

// The other input of a two-input node one of whose inputs is `x`, else nullptr.
const ir::Value* other_input(const ir::Node* n, const ir::Value* x);

// The one input of the two-input node labelled `label` that comes from outside the match,
// else nullptr.
const ir::Value* outside_operand(const Match& m, const std::string& label);

// The constant operand of the node labelled `label` (the input beside `x`, or else the one
// from outside the match) is approx `want`.
bool operand_near(const Match& m, const std::string& label, const ir::Value* x, double want);

// ReduceMean `n` averages over exactly the last axis of `in` and keeps the dims.
bool reduces_last_axis(const ir::Node* n, const ir::Value* in);

// The first constant input of a returned old node that came from outside the pattern (an
// epsilon, a scale), else nullptr.
const Tensor* outside_constant(const OldNode& n);

}  // namespace kiln::pattern::library
