#pragma once
// RemoveIdentityOps: drops nodes whose output is their input unchanged — the CPU plugin's
// "Power layer with power = 1, scale = 1, offset = 0" in ONNX terms:
//   Pow(x, 1), Mul(x, 1), Mul(1, x), Div(x, 1), Add(x, 0), Add(0, x), Sub(x, 0)
//     (the constant all exact ones / zeros, any shape that broadcasting does not let grow x),
//   Identity, Dropout in inference (no training_mode input, or a constant false; its mask
//     output unread), Cast to x's own element type.
// The output's dtype must equal x's. Readers of the removed output read x. A removed
// output that is a graph output keeps its name: x's producer is rebuilt to produce it
// under that name. When x is a graph input, a constant or already a graph output the
// node stays (logged as skipped).
#include "ir/graph.hpp"
#include "transforms/pass_log.hpp"

namespace kiln::transforms {

inline constexpr const char* kRemoveIdentityOps = "RemoveIdentityOps";

// Returns the number of nodes removed; `log` may be null.
size_t remove_identity_ops(ir::Graph& g, PassLog* log);

}  // namespace kiln::transforms
