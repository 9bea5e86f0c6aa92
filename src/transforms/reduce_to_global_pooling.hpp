#pragma once
// ReduceToGlobalPooling: ReduceMean / ReduceMax over every spatial axis of an f32 [N, C, ...]
// tensor (axes {2, ..., rank-1}, rank 4 or 5) is GlobalAveragePool / GlobalMaxPool, which the
// CPU runs as a pooling primitive in the producer's blocked layout, instead of a reduction
// that first reorders to the plain layout (`x.mean([2, 3])` in PyTorch: ShuffleNet, MnasNet,
// many heads). keepdims = 0 adds a Flatten(axis 1): [N, C, 1, 1] -> [N, C], a view.
// Conditions: constant axes (attribute, or input 1 from opset 18), exactly the spatial ones;
// a known rank of 4 or 5 (a rank-3 [B, L, D] is a sequence, left to the reductions).
#include "ir/graph.hpp"
#include "transforms/pass_log.hpp"

namespace kiln::transforms {

inline constexpr const char* kReduceToGlobalPooling = "ReduceToGlobalPooling";

// Returns the number of reductions rewritten; `log` may be null.
size_t reduce_to_global_pooling(ir::Graph& g, PassLog* log);

}  // namespace kiln::transforms
