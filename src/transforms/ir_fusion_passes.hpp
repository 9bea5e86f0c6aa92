#pragma once
// The model-level (ir::Graph) passes of the CPU graph optimizer, in order:
//   QdqToFakeQuantize, RemoveIdentityOps, FuseMatMulIntegerToFloat, FuseConvIntegerToFloat, FoldPadIntoConvolution,
//   MergeGroupConvolution, FoldBatchNormalization, AveragePoolBeforePointwiseConvolution, ReduceToGlobalPooling,
//   FuseSqueezeExcite, ScatterRowsToScatterND,
// then constants and nodes left unread are dropped (ir::Graph::remove_dead, only when a
// pass rewrote something) and shapes are inferred again (ir::infer_shapes).
#include <set>
#include <string>
#include <vector>

#include "ir/graph.hpp"
#include "transforms/pass_log.hpp"

namespace kiln::transforms {

// Runs the passes whose names are not in `disabled` ("all-fusions" disables every one;
// infer_shapes still runs). Returns the total number of rewrites; `log` may be null.
size_t run_ir_fusion_passes(ir::Graph& g, const std::set<std::string>& disabled, PassLog* log);

// Their names, in the order they run.
std::vector<std::string> ir_fusion_pass_names();

}  // namespace kiln::transforms
