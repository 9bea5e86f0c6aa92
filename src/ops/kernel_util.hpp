#pragma once
// Helpers shared by the reference kernels: strides, broadcasting iteration, axis
// normalisation. Keep kernels simple; these make them short.
#include <kiln/tensor.hpp>

#include <array>
#include <vector>

#include "core/dispatch.hpp"
#include "core/onnx_dtype.hpp"
#include "core/strings.hpp"
#include "ir/infer_util.hpp"
#include "ir/op_registry.hpp"

namespace kiln::ops {

using ir::RunContext;

// Row-major strides (in elements).
std::vector<int64_t> strides_of(const Shape& s);

// Numpy broadcast of concrete shapes; throws kiln::Error naming the node on mismatch.
Shape broadcast_shape(const std::vector<Shape>& shapes, const ir::Node& node);

// Strides of `in` as seen from `out` after broadcasting (0 where broadcast).
std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out);

// Calls fn(out_index, offsets) for every element of `out`, where offsets[k] is the
// element offset in operand k (shapes broadcast to `out`).
template <size_t K, typename Fn>
void for_each_broadcast(const Shape& out, const std::array<Shape, K>& ins, Fn&& fn) {
  const int64_t n = shape_size(out);
  if (n == 0) return;
  const size_t r = out.size();
  std::array<std::vector<int64_t>, K> st;
  for (size_t k = 0; k < K; ++k) st[k] = broadcast_strides(ins[k], out);
  std::vector<int64_t> idx(r, 0);
  std::array<int64_t, K> off{};
  for (int64_t i = 0; i < n; ++i) {
    fn(i, off);
    // increment the multi-index, updating offsets
    for (size_t d = r; d-- > 0;) {
      ++idx[d];
      for (size_t k = 0; k < K; ++k) off[k] += st[k][d];
      if (idx[d] < out[d]) break;
      for (size_t k = 0; k < K; ++k) off[k] -= st[k][d] * idx[d];
      idx[d] = 0;
    }
  }
}

// normalize_axis(axis, rank, node[, allow_end]) from ir/infer_util.hpp serves kernels too.
using ir::normalize_axis;

// Reads an optional 1-D int input as a vector (empty if absent).
std::vector<int64_t> optional_ints(const RunContext& ctx, size_t i);

// Returns `t` after checking that it holds exactly one value (a scalar or a 1-element
// tensor); otherwise throws ctx.error("<what> must hold one value, got shape ...").
const Tensor& one_value(const RunContext& ctx, const Tensor& t, const std::string& what);

// Element type named by integer attribute `attr` holding an ONNX TensorProto.DataType code
// (Cast 'to', EyeLike 'dtype', ...); unsupported codes throw kiln::Error naming the node and
// attribute ("... is not supported"). The first form requires the attribute, the second
// returns `absent` when it is not set.
DType dtype_attr(const ir::Node& n, const char* attr);
DType dtype_attr(const ir::Node& n, const char* attr, DType absent);

// Makes a data-movement op (Concat, Slice, Gather, ...) move string tensors as objects: its
// kernel copies bytes, which for std::string would leave two tensors owning one buffer. When
// an input in `data_inputs` (every input with kAllInputs) is a string tensor, each such input
// is replaced by int64 indices into one table of their strings, the kernel moves the indices,
// and each output is made strings again from the table. Other element types run as before.
inline constexpr size_t kAllInputs = static_cast<size_t>(-1);
void strings_as_indices(ir::OpSchema& s, std::vector<size_t> data_inputs);

}  // namespace kiln::ops
