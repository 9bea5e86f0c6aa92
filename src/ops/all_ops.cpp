#include "ir/op_registry.hpp"
#include "ops/op_families.hpp"
#include "snippets/subgraph_op.hpp"

namespace kiln::ops {

void register_all_ops(ir::OpRegistry& r) {
  register_elementwise_ops(r);
  register_nn_ops(r);
  register_linalg_ops(r);
  register_shape_ops(r);
  register_reduction_ops(r);
  register_quant_ops(r);
  register_misc_ops(r);
  register_control_flow_ops(r);
  snippets::register_subgraph_op(r);  // kiln Subgraph (snippets tokenizer)
}

}  // namespace kiln::ops
