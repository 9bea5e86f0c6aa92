#pragma once
// Brings nodes of older opsets to the form of the newest one kiln knows, so kernels
// and passes see one form: int attributes that later became inputs are moved to
// constant inputs (Split, Squeeze, Unsqueeze, Slice, ReduceSum, Pad), Resize-10 gets
// its absent roi input, and attributes that only mattered for training in ancient
// opsets (is_test, consumed_inputs) are dropped.
#include "ir/graph.hpp"

namespace kiln::frontend {

void normalize_opset(ir::Graph& g);

}  // namespace kiln::frontend
