#include "transforms/ir_fusion_passes.hpp"

#include "ir/op_registry.hpp"
#include "transforms/fold_batch_norm.hpp"
#include "transforms/fold_pad.hpp"
#include "transforms/fuse_matmul_integer_to_float.hpp"
#include "transforms/fuse_squeeze_excite.hpp"
#include "transforms/merge_group_convolution.hpp"
#include "transforms/pool_before_pointwise_conv.hpp"
#include "transforms/qdq_to_fake_quantize.hpp"
#include "transforms/reduce_to_global_pooling.hpp"
#include "transforms/remove_identity_ops.hpp"
#include "transforms/scatter_rows.hpp"

namespace kiln::transforms {

namespace {

struct Pass {
  const char* name;
  size_t (*run)(ir::Graph&, PassLog*);
};

// The passes, in the order they run.
const std::vector<Pass>& passes() {
  static const std::vector<Pass> all = {
      {kQdqToFakeQuantize, fuse_qdq_to_fake_quantize},
      {kRemoveIdentityOps, remove_identity_ops},
      {kFuseMatMulIntegerToFloat, fuse_matmul_integer_to_float},
      {kFuseConvIntegerToFloat, fuse_conv_integer_to_float},
      {kFoldPadIntoConvolution, fold_pad},
      {kMergeGroupConvolution, merge_group_convolution},
      {kFoldBatchNormalization, fold_batch_norm},
      // after the above: a BatchNorm between the convolution and the pool is folded by then
      {kAveragePoolBeforePointwiseConvolution, average_pool_before_pointwise_conv},
      {kReduceToGlobalPooling, reduce_to_global_pooling},
      {kFuseSqueezeExcite, fuse_squeeze_excite},  // after the above: its pool may be a ReduceMean
      {kScatterRowsToScatterND, scatter_rows_to_scatter_nd},
  };
  return all;
}

}  // namespace

std::vector<std::string> ir_fusion_pass_names() {
  std::vector<std::string> names;
  for (const Pass& p : passes()) names.push_back(p.name);
  return names;
}

size_t run_ir_fusion_passes(ir::Graph& g, const std::set<std::string>& disabled, PassLog* log) {
  size_t total = 0;
  if (!disabled.count("all-fusions"))
    for (const Pass& p : passes())
      if (!disabled.count(p.name)) total += p.run(g, log);
  if (total) g.remove_dead();
  ir::infer_shapes(g);
  return total;
}

}  // namespace kiln::transforms
