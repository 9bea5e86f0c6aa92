#include "transforms/ir_fusion_passes.hpp"

#include "ir/op_registry.hpp"
#include "transforms/fold_batch_norm.hpp"
#include "transforms/fold_pad.hpp"
#include "transforms/merge_group_convolution.hpp"
#include "transforms/qdq_to_fake_quantize.hpp"
#include "transforms/remove_identity_ops.hpp"

namespace kiln::transforms {

size_t run_ir_fusion_passes(ir::Graph& g, const std::set<std::string>& disabled, PassLog* log) {
  struct Pass {
    const char* name;
    size_t (*run)(ir::Graph&, PassLog*);
  };
  static const Pass passes[] = {
      {kQdqToFakeQuantize, fuse_qdq_to_fake_quantize},
      {kRemoveIdentityOps, remove_identity_ops},
      {kFoldPadIntoConvolution, fold_pad},
      {kMergeGroupConvolution, merge_group_convolution},
      {kFoldBatchNormalization, fold_batch_norm},
  };
  size_t total = 0;
  if (!disabled.count("all-fusions"))
    for (const Pass& p : passes)
      if (!disabled.count(p.name)) total += p.run(g, log);
  if (total) g.remove_dead();
  ir::infer_shapes(g);
  return total;
}

}  // namespace kiln::transforms
