#pragma once
// Which layer becomes post-ops of which host (the CPU plugin's fusions, as OpenVINO's), in one
// place for the two that ask: the CPU optimizer's passes on a cpu::Graph (src/cpu/passes/)
// and MarkSkipped on the ir::Graph before snippets tokenization (cpu/mark_skipped.hpp), so
// that they cannot drift apart (test: CpuFusionRules.*). A rule reads tensors through
// TensorFacts, which an ir::Value and a cpu::Edge both give; what depends on the graph's
// structure (who else reads a value, in which order) stays with each caller.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cpu/node.hpp"
#include "cpu/post_ops.hpp"
#include "ir/graph.hpp"
#include "snippets/target_machine.hpp"

namespace kiln::cpu {

// What a rule reads of one tensor.
struct TensorFacts {
  std::string_view name;  // the value's or edge's, which outlive the facts
  DType dtype = DType::undefined;
  std::optional<Shape> shape;        // static shape, when known
  const Tensor* constant = nullptr;  // its value, when it is a constant of the model
  bool graph_input = false;
};
TensorFacts facts_of(const ir::Value& v);
TensorFacts facts_of(const Edge& e);

// What the rules may depend on beyond the graph: how the convolutions compute and which
// instruction set the snippets kernels are generated for (none: no snippets target).
struct FusionTarget {
  bool bf16 = false;                         // inference_precision = bf16
  std::optional<snippets::Isa> snippets_isa;  // resolved (never Auto)
  // The convolutions kiln_convolution() names run on kiln's own kernels (gemm_f32, DepthwiseBlock):
  // a model whose input shapes vary (GraphOptions::shapes_vary / shape_agnostic), in f32, on
  // AVX2 or better (gemm_f32::available()).
  bool kiln_convolutions = false;
};

// A Convolution kiln's kernels compute where FusionTarget::kiln_convolutions holds: constant
// 4-D weights, and 1x1 with group 1 (gemm_f32), depthwise (group = input = output channels:
// DepthwiseBlock), or group 1 with at most im2col_f32::kMaxColumns weights per output (an image
// stem: gemm_f32 on im2col rows). (ConvolutionNode::kiln_gemm_conv and FuseDepthwiseBlock decide
// at the shape; what they refuse there, a padded 1x1 among them, keeps oneDNN's kernels.)
bool kiln_convolution(const ir::Node& conv);

// A written-out Swish (x * Sigmoid(x)) after a Convolution runs in a snippets kernel of its
// own rather than as the convolution's swish post-op: where the convolutions compute in f32
// and snippets kernels run (AVX-512 or AVX2), unless the output is small (`output_elements`
// known and below 4096: a squeeze-and-excitation's [1, C, 1, 1]), where the post-op costs
// less than a node of its own, or the convolution runs on kiln's kernels (`kiln_kernels`:
// target.kiln_convolutions and kiln_convolution()), whose epilogue computes the Swish as the
// snippets kernel does, and in a DepthwiseBlock without the expanded tensor going to memory.
// Otherwise (and wherever no snippets kernel takes it) it is the post-op. `output_elements`
// -1: not known (symbolic shapes).
bool swish_leaves_convolution(const FusionTarget& target, int64_t output_elements, bool kiln_kernels = false);

// A node that takes post-ops: its output's channels are along `channel_axis`.
struct PostOpHost {
  bool convolution = false;  // else FullyConnected (Gemm / MatMul with constant 2-D weights)
  int channel_axis = 1;
  int64_t channels = 0;
};
// An eltwise post-op (oneDNN algorithm and parameters) from ONNX node `from`.
PostOp eltwise_post_op(dnnl::algorithm alg, float alpha, float beta, const std::string& from);

// `r` is a ReLU that the BatchNormalization `bn` (a BatchNorm runtime node: batch_norm_supports)
// takes as its one post-op (FuseBatchNormAndRelu; the node's accepts_post_ops says the same).
bool batch_norm_takes_relu(const ir::Node& bn, const ir::Node& r);

// The BatchNormalization `bn` (a BatchNorm runtime node, its ReLU fused or not) that alone reads
// the output of Concat `concat` computes inside the Concat's copy (FuseConcatAndBatchNorm:
// DenseNet's pre-activation norm on every layer's concatenated features): the Concat joins two
// or more f32 tensors along the channels (axis 1), the dim the batch normalization scales.
// `why` says which condition failed. Who else reads the Concat's output is the caller's to check.
bool concat_takes_batch_norm(const ir::Node& concat, const ir::Node& bn, std::string* why);

// `n` becomes a Convolution or a FullyConnected runtime node (the node factory's own tests:
// convolution_supports, fully_connected_supports).
std::optional<PostOpHost> post_op_host(const ir::Node& n);

// The post-ops computing layer `n` (ir node of inputs `inputs`, output `out`) from its input
// `from` (the host's output) when `n` is a simple layer: an eltwise activation (what the
// Eltwise node runs), HardSigmoid, a binary op with a constant that holds one value or one per
// channel (`channel_axis` of the output), PReLU with such a slope, kiln FakeQuantize with such
// ranges. nullopt when it is not; `why` then says which condition failed (empty when `n` is
// not a simple layer at all).
std::optional<std::vector<PostOp>> simple_post_ops(const ir::Node& n, const std::vector<const TensorFacts*>& inputs,
                                                   const TensorFacts& out, size_t from, int channel_axis,
                                                   std::string* why);
// Whether `n` is of an op simple_post_ops can take at all (by op only; false means it returns
// nullopt with an empty `why` whatever the tensors). Asked first, so that the callers build
// no TensorFacts for the other nodes (every reader of every host, for every new input shape).
bool simple_post_op_kind(const ir::Node& n);

// The post-ops computing kiln FakeQuantize `n` (X = input 0 = the host's output, f32) whose four
// ranges are constants holding one value or one per channel, input_low < input_high everywhere.
// With L = levels - 1, s = L / (ih - il), d = (oh - ol) / L and a the level of the real value 0
// when it lies on the grid (else 0):
//   binary_max(il), binary_min(ih)      clamp, so x <= il gives ol and x >= ih gives oh
//   binary_mul(s), binary_add(a - il*s) t = (x - il) * s, shifted so that ties are decided
//                                       on the grid anchored at 0, as the reference does
//   eltwise_round                       round half to even (the only eltwise op: oneDNN
//                                       2.6 mishandles two eltwise ops of one algorithm)
//   binary_mul(d), binary_add(ol - a*d)
// Constants are computed in double and stored f32; the chain runs in f32, so it equals the
// reference FakeQuantize (double) except for inputs within f32 rounding of a rounding tie,
// which may land one level (d) away, and NaN (the reference passes it through; here the
// clamp decides). nullopt when `n` is not a FakeQuantize (`why` empty) or a condition fails.
std::optional<std::vector<PostOp>> fake_quantize_post_ops(const ir::Node& n, const std::vector<const TensorFacts*>& inputs,
                                                          const TensorFacts& out, size_t from, int channel_axis,
                                                          std::string* why);

// The residual Add `add` a convolution accumulates into (sum post-op), as far as its tensors
// tell: `other` (the Add's other operand) has the host output's shape and is f32, the sum is
// not broadcast, and `other` is a buffer the convolution may write over (made by a node: no
// graph input or constant). The caller checks the rest: `other` is no graph output, the host
// does not read it, nothing reads it after the Add.
bool sum_operand_ok(const ir::Node& add, const TensorFacts& host_out, const TensorFacts& other,
                    const TensorFacts& add_out, std::string* why);

}  // namespace kiln::cpu
