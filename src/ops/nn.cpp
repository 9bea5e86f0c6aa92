#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"
#include "ops/op_families.hpp"

namespace kiln::ops {

void register_nn_ops(ir::OpRegistry& r) { (void)r; }

}  // namespace kiln::ops
