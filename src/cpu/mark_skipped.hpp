#pragma once
// MarkSkipped: which nodes the CPU graph optimizer will fuse into a Convolution or a
// FullyConnected (Gemm / MatMul with constant 2-D weights) as oneDNN post-ops, so the
// snippets tokenizer leaves them alone and the two fusers never fight over a node. It belongs
// to the CPU layer (as in OpenVINO, where the plugin marks them): it asks the same rules the
// CPU passes apply (cpu/fusion_rules.hpp) of the ir::Graph, before lowering. From each host,
// the chain of single-consumer (and not graph-output) simple layers, a written-out Swish, and
// after a Conv, once, the residual Add it accumulates into ("conv + sum"). A Swish after a
// Conv stays with the snippets where swish_leaves_convolution(target, its output's size, whether
// kiln's kernels compute the Conv) says so.
//
// The marks are a set of nodes handed to snippets::tokenize (not node attributes: every
// attribute must be declared by the op's schema, so a tag attribute would make the graph fail
// validation). What oneDNN itself refuses (Node::accepts_post_ops) is not known here: such a
// node is marked, left out of the snippets, and runs as a node of its own.
#include "cpu/fusion_rules.hpp"
#include "ir/graph.hpp"
#include "snippets/tokenizer.hpp"
#include "transforms/pass_log.hpp"

namespace kiln::cpu {

inline constexpr const char* kMarkSkippedPass = "SnippetsMarkSkipped";

// The nodes to leave to the CPU optimizer. Needs inferred static types (ir::infer_shapes).
// Logs one applied entry per marked node ("conv_1 -> relu_2", "post-op of conv_1").
// `target`: the precision and snippets ISA the graph compiles for (the default: f32, no
// snippets target, every Swish a post-op).
snippets::SkippedNodes mark_skipped(const ir::Graph& g, transforms::PassLog* log = nullptr,
                                    const FusionTarget& target = {});

}  // namespace kiln::cpu
