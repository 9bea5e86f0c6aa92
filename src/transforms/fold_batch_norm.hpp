#pragma once
// FoldBatchNormalization: an inference BatchNormalization (constant scale / B / mean / var,
// only output 0 read, not training_mode) folded into the weights and bias of the op that
// produces its input, when that output has no other reader:
//   Conv, ConvTranspose (constant weight, optional constant bias):
//       W'[oc] = W[oc] * s[oc],  b' = (b - mean) * s + beta,  s = gamma / sqrt(var + eps)
//   Gemm (constant B; output channel n = column of B, or row with transB = 1):
//       B' scaled per n, C' = s * beta_attr * C + (beta - mean * s), attribute beta = 1
//   MatMul with a constant 2-D weight and a 2-D output (the BN channel is then the last
//       dim): W' scaled per column, then Add(bias) — or the existing constant bias of a
//       MatMul -> Add(constant) -> BatchNormalization chain is updated instead.
// Computed in double, stored f32 (only f32 weights are folded). When the BatchNormalization
// output is a graph output, the producer is rebuilt so that its output carries that name.
#include "ir/graph.hpp"
#include "transforms/pass_log.hpp"

namespace kiln::transforms {

inline constexpr const char* kFoldBatchNormalization = "FoldBatchNormalization";

// Returns the number of BatchNormalization nodes folded; `log` may be null.
size_t fold_batch_norm(ir::Graph& g, PassLog* log);

}  // namespace kiln::transforms
