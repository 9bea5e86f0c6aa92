#pragma once
// ScatterRowsToScatterND: ScatterElements along axis 0 whose indices are an Expand of one
// index per row ([N, 1, ..., 1]) writes whole rows: updates row n goes to data row I[n]. That
// is ScatterND with indices I as [N, 1], which copies each row as one block instead of
// computing an offset per element, and needs no expanded index tensor (torchvision's
// MultiScaleRoIAlign: `result.scatter_(0, index.view(-1, 1, 1, 1).expand(...), level_result)`,
// in every two-stage detector: 1.9M elements, 9.6 + 2.5 ms of Faster R-CNN's 70).
// Conditions: reduction none; axis 0; the indices an Expand of an int64 tensor whose dims
// after the first are 1 and whose first equals the updates'; the updates' dims after the
// first equal the data's (each row written whole); ranks known.
#include "ir/graph.hpp"
#include "transforms/pass_log.hpp"

namespace kiln::transforms {

inline constexpr const char* kScatterRowsToScatterND = "ScatterRowsToScatterND";

// Returns the number of ScatterElements rewritten; `log` may be null.
size_t scatter_rows_to_scatter_nd(ir::Graph& g, PassLog* log);

}  // namespace kiln::transforms
