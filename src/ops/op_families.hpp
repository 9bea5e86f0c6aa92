#pragma once
// Each file under src/ops/ registers one family of ops. register_all_ops calls them all.
namespace kiln::ir {
class OpRegistry;
}

namespace kiln::ops {
void register_elementwise_ops(ir::OpRegistry& r);     // elementwise.cpp: unary/binary math, activations, compare, logic, Where, Cast, Clip
void register_nn_ops(ir::OpRegistry& r);              // nn.cpp: Conv, ConvTranspose, pools, BatchNorm, InstanceNorm, LRN, ...
void register_linalg_ops(ir::OpRegistry& r);          // linalg.cpp: Gemm, MatMul, Einsum, MatMulInteger, Det, ...
void register_shape_ops(ir::OpRegistry& r);           // shape_ops.cpp: Reshape, Transpose, Concat, Slice, Gather, Pad, Resize, ...
void register_reduction_ops(ir::OpRegistry& r);       // reduction.cpp: Reduce*, ArgMax/Min, Softmax, LayerNorm, TopK, CumSum, ...
void register_quant_ops(ir::OpRegistry& r);           // quant.cpp: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, ...
void register_qlinear_ops(ir::OpRegistry& r);         // quant_qlinear.cpp: ONNX Runtime's QLinearAdd, QLinearMul, QLinearConcat, QGemm, ...
void register_misc_ops(ir::OpRegistry& r);            // misc.cpp: everything else the conformance suite needs
void register_control_flow_ops(ir::OpRegistry& r);
void register_string_ops(ir::OpRegistry& r);
void register_sequence_ops(ir::OpRegistry& r);        // sequence.cpp: Sequence*, SplitToSequence, ConcatFromSequence, SequenceMap, Optional*          // strings.cpp: StringNormalizer, RegexFullMatch, StringConcat, StringSplit, Equal on strings     // control_flow.cpp: If, Loop, Scan (bodies run by the reference executor)
void register_all_ops(ir::OpRegistry& r);
}  // namespace kiln::ops
