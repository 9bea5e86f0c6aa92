#pragma once
// FuseSqueezeExcite: a squeeze-and-excitation block (MobileNet-v3, EfficientNet)
//   p = GlobalAveragePool(x); h = act(Conv1x1(p, W1, B1)); s = gate(Conv1x1(h, W2, B2)); y = Mul(x, s)
// with act Relu or a written-out Swish (Sigmoid(v) and Mul(v, Sigmoid(v))) and gate Sigmoid or
// HardSigmoid, becomes one kiln SqueezeExcite node (ops/nn_squeeze_excite.cpp): its weights
// flattened to [R, C] and [C, R] (views of the constants). The CPU runs it as one node over the
// input's layout, where it took four (a pooling, two convolutions on [N, C, 1, 1], a Mul)
// that every new input shape planned again.
// Conditions: x f32 of rank 4 with known channels; each 1x1 Conv with constant f32 weights
// (and bias, if any), group 1, no padding, taking the channels the block has; every value
// inside the block read only inside it (not a graph output); the Mul's other operand the
// pooled x itself.
#include "ir/graph.hpp"
#include "transforms/pass_log.hpp"

namespace kiln::transforms {

inline constexpr const char* kFuseSqueezeExcite = "FuseSqueezeExcite";

// Returns the number of blocks fused; `log` may be null.
size_t fuse_squeeze_excite(ir::Graph& g, PassLog* log);

}  // namespace kiln::transforms
