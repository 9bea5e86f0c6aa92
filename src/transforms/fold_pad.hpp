#pragma once
// FoldPadIntoConvolution: a Pad whose only reader is a Conv / AveragePool / MaxPool (as its
// data input) becomes part of that node's `pads` attribute. Conditions: mode "constant";
// constant pads (and axes, if given) that pad only spatial dims (not N, C) and are not
// negative; the consumer's auto_pad NOTSET, absent or VALID (VALID becomes NOTSET with the
// folded pads) and ceil_mode 0. The pad value must be what the consumer pads with itself:
// 0 for Conv and AveragePool, -inf for MaxPool (so a zero Pad is never folded into a MaxPool,
// nor one whose Indices output is read). An AveragePool with count_include_pad = 0 takes the
// Pad only when it has no padding of its own (it then averages whole windows of the padded
// input, as with count_include_pad = 1, which it gets).
#include "ir/graph.hpp"
#include "transforms/pass_log.hpp"

namespace kiln::transforms {

inline constexpr const char* kFoldPadIntoConvolution = "FoldPadIntoConvolution";

// Returns the number of Pad nodes folded; `log` may be null.
size_t fold_pad(ir::Graph& g, PassLog* log);

}  // namespace kiln::transforms
