#pragma once
// MarkSkipped: which nodes the CPU graph optimizer will fuse into a Convolution or a
// FullyConnected (Gemm / MatMul with constant 2-D weights) as oneDNN post-ops, so the
// snippets tokenizer leaves them alone and the two fusers never fight over a node.
//
// The marks are a set of nodes returned to the caller (not node attributes: every
// attribute must be declared by the op's schema, so a tag attribute would make the graph
// fail validation). `tokenize(g, log)` runs this pass itself; `tokenize(g, skipped, log)`
// takes a set the caller computed (or an empty one).
//
// What is marked mirrors src/cpu/passes/ (fuse_util.cpp `simple_post_ops`,
// fuse_convolution_and_sum.cpp) on ir::Node alone: from each host, the chain of
// single-consumer (and not graph-output) simple layers —
//   - unary activations oneDNN has as eltwise (Relu, LeakyRelu, Elu, Sigmoid, Tanh, Abs,
//     Sqrt, Exp, Log, Neg, Round, HardSwish, Softplus, Mish, Gelu, com.microsoft
//     Gelu / FastGelu, Clip with constant one-value bounds, Pow by a constant 1, 2 or 3),
//     HardSigmoid;
//   - Add / Sub / Mul / Div / Max / Min / PRelu whose other operand is an f32 constant
//     holding one value or one value per channel (axis 1 of a Conv, the last axis of an
//     FC) and that do not broadcast the chain's value (Div and PRelu: chain value first);
//   - kiln FakeQuantize with constant one-value / per-channel ranges;
//   - after a Conv, once: the residual Add of two equally shaped f32 values whose other
//     operand is made by a node (not a graph input or constant), is no graph output, is
//     not read by the Conv and has no reader after the Add ("conv + sum").
#include <string>
#include <unordered_set>

#include "ir/graph.hpp"
#include "transforms/pass_log.hpp"

namespace kiln::snippets {

inline constexpr const char* kMarkSkippedPass = "SnippetsMarkSkipped";

using SkippedNodes = std::unordered_set<const ir::Node*>;

// The nodes to leave to the CPU optimizer. Needs inferred types (ir::infer_shapes).
// Logs one applied entry per marked node ("conv_1 -> relu_2", "post-op of conv_1").
SkippedNodes mark_skipped(const ir::Graph& g, transforms::PassLog* log = nullptr);

}  // namespace kiln::snippets
