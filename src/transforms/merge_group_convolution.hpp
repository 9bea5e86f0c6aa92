#pragma once
// MergeGroupConvolution: a Split (or a set of Slices of one tensor) along the channels into
// N equal parts, each read by one Conv with identical parameters (weight shape, strides,
// pads, dilations, auto_pad, group 1, constant f32 weights and optional constant bias), and
// a Concat along the channels of exactly those Conv outputs in the same order, becomes one
// Conv with group = N over the unsplit tensor: weights concatenated along the output
// channels, biases too (zeros for a Conv without one). Conditions, the first failing one
// logged: the split is along dim 1 into equal parts of static size that cover the channels
// (Slices: steps 1, contiguous); every part is read by its Conv only (as data input) and is
// no graph output; every Conv output is read by the Concat only and is no graph output;
// the Concat (axis 1) reads exactly the Conv outputs in split order. The Concat's output
// name is kept when it is a graph output. The grouped Conv computes the same function
// (each output channel reads the same input channels with the same weights).
#include "ir/graph.hpp"
#include "transforms/pass_log.hpp"

namespace kiln::transforms {

inline constexpr const char* kMergeGroupConvolution = "MergeGroupConvolution";

// Returns the number of groups merged; `log` may be null.
size_t merge_group_convolution(ir::Graph& g, PassLog* log);

}  // namespace kiln::transforms
