#pragma once
// Constant folding without a copy: a Gather whose result is a run of consecutive rows of its
// constant data (a position table's first L rows, gathered by Range(0, L)) is that run, a view
// sharing the data's storage (Tensor::subrange). Every new input shape of a model whose shapes
// vary folds such a Gather again; a view keeps the plan from holding a copy of the rows.
// Conditions: the data is a numeric tensor (strings stay copies); the indices, negative ones
// taken from the end, step by +1 within the axis; every dim before the axis is 1 (so the rows
// are adjacent in memory).
#include <optional>
#include <vector>

#include "ir/graph.hpp"

namespace kiln::transforms {

// The output of `n` as a view of its input, when it is one; nullopt: fold by running the kernel.
// `inputs` are the node's constant inputs (null for an omitted optional one).
std::optional<Tensor> fold_as_view(const ir::Node& n, const std::vector<const Tensor*>& inputs);

}  // namespace kiln::transforms
