#pragma once
// Post-ops: the simple layers a fusion pass folds into a Convolution, FullyConnected
// or Pooling node, applied by oneDNN to the output while it is still in registers
// (eltwise activations, binary ops with a constant per-channel / per-tensor operand,
// PReLU with a constant slope, and sum: accumulate into another tensor's buffer).
#include <kiln/tensor.hpp>

#include "cpu/gemm_f32.hpp"

#include <functional>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::cpu {

class FusionDecisions;

struct Edge;

struct PostOp {
  enum class Kind { eltwise, binary, prelu, sum, dw };
  Kind kind = Kind::eltwise;
  dnnl::algorithm alg = dnnl::algorithm::undef;  // eltwise / binary algorithm
  float alpha = 0.0f, beta = 0.0f;                // eltwise parameters
  Tensor constant;  // binary / prelu operand (f32, rank of the output, broadcast dims 1)
  int input = -1;   // sum: index of the accumulated tensor among the node's inputs
  // dw: a 3x3 depthwise convolution (pad 1) on the host's output; `constant` holds its
  // [C, 1, 3, 3] weights, `dw_bias` its [C] bias (or undefined), `conv_out` the host
  // convolution's own output shape (the node's output is the depthwise one)
  int64_t dw_stride = 1;
  Tensor dw_bias;
  Shape conv_out;
  std::string from;  // the ONNX node it came from
};

class PostOpList {
 public:
  std::vector<PostOp> ops;

  bool empty() const { return ops.empty(); }
  // The sum post-op's input index, or -1.
  int sum_input() const;
  // The depthwise post-op, or null.
  const PostOp* dw() const;
  // Appends every op to `po` (whose existing entries keep their indices) and creates
  // the constant operand memories.
  void append_to(dnnl::post_ops& po);
  // The execution arguments of the constant operands.
  void add_args(std::unordered_map<int, dnnl::memory>& args) const;
  // The ops as given to oneDNN: adjacent linear ops merged into one.
  std::vector<PostOp> merged() const;
  // Non-empty (the reason) when oneDNN is known to compute this chain wrongly.
  std::string unsupported_combination() const;
  // This list with `extra` appended, as a host's accepts_post_ops() first checks it: null
  // (and `why`) when oneDNN computes the chain wrongly, or it has a sum `host` cannot take.
  std::optional<PostOpList> with(const std::vector<PostOp>& extra, bool allow_sum, const char* host,
                                 std::string* why) const;
  // "Relu+Add(sum)+Clip" for diagnostics.
  std::string describe() const;            // the ops' origins, "a+b"
  void describe_into(std::string& out) const;  // the same, appended

 private:
  std::vector<std::pair<int, dnnl::memory>> operands_;  // execution argument -> operand memory
};

// The list as the epilogue of kiln's GEMM (cpu/gemm_f32.hpp), appended to `out`: false when an op
// is not one it computes (PReLU, sum, depthwise, an eltwise it lacks, a binary operand that is
// not one value or one per channel, the last axis of an output of rank `rank`).
bool to_gemm_epilogue(const PostOpList& list, size_t rank, int64_t channels, gemm_f32::Epilogue& out);
// The same for a convolution computed as a GEMM over channels-last pixels (the channels, axis 1
// of NCHW, are the GEMM's columns), the ops from index `from` on (a leading sum is the caller's):
// false, with `why` when given, when one is not an op the epilogue computes.
bool to_gemm_epilogue_per_channel(const PostOpList& list, size_t from, int64_t channels, gemm_f32::Epilogue& out,
                                  std::string* why);

// Whether the primitive made for `trial` keeps an optimised kernel: `impl_of(list)` names the
// implementation oneDNN picks for a list (throwing dnnl::error when it rejects it); a reference
// kernel is refused unless the host's `current` list gets one too, and so is leaving a brgemm
// kernel for another family. `why` says what failed. With `decisions` (a model whose input
// shapes vary), the answer for this `host` (its name and output tensor) and these two chains
// is asked once and shared by every plan of the model.
bool keeps_jit(PostOpList& trial, PostOpList& current, const std::function<std::string(PostOpList&)>& impl_of,
               const char* primitive, std::string* why, FusionDecisions* decisions = nullptr,
               const std::string& host = "");

}  // namespace kiln::cpu
