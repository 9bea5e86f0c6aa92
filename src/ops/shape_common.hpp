#pragma once
// Private helpers for the "shape" family (shape_ops.cpp, shape_index.cpp, shape_resize.cpp).
// Data-movement kernels copy elements by size only (ElemN), so they work for every dtype
// including bool without a per-type instantiation.
#include <kiln/tensor.hpp>

#include <cstdint>
#include <limits>
#include <vector>

#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"

namespace kiln::ops::shape_detail {

// An opaque element of N bytes: copying it is a plain load/store and aliasing-safe.
template <size_t N>
struct ElemN {
  unsigned char b[N];
};

// Calls fn(TypeTag<ElemN<size>>) for the element size of `t`.
template <typename Fn>
decltype(auto) dispatch_bytes(DType t, Fn&& fn, const char* what = "operation") {
  switch (dtype_size(t)) {
    case 1: return fn(TypeTag<ElemN<1>>{});
    case 2: return fn(TypeTag<ElemN<2>>{});
    case 4: return fn(TypeTag<ElemN<4>>{});
    case 8: return fn(TypeTag<ElemN<8>>{});
    default: throw_unsupported_dtype(t, what);
  }
}

template <typename T>
const T* raw_as(const Tensor& t) {
  return static_cast<const T*>(t.raw());
}
template <typename T>
T* raw_as(Tensor& t) {
  return static_cast<T*>(t.raw());
}

// out = transpose(in viewed with `in_shape`, perm); out must already have the permuted shape
// and the same dtype as in.
void transpose_into(const Tensor& in, const Shape& in_shape, const std::vector<int64_t>& perm, Tensor& out);

// The values of input i when it is a constant; false otherwise.
bool const_ints(const ir::InferContext& ctx, size_t i, std::vector<int64_t>& out);

// Checks that input i of the node is an integer tensor (index inputs).
void require_int_dtype(const RunContext& ctx, size_t i, const char* what);
void require_int_dtype(const ir::InferContext& ctx, size_t i, const char* what);

// Reads index input i as int64 values.
std::vector<int64_t> index_values(const RunContext& ctx, size_t i);

// Wraps a negative index and checks the range [-dim, dim); throws naming the node.
inline int64_t wrap_index(const RunContext& ctx, int64_t idx, int64_t dim, const char* what) {
  if (idx < -dim || idx >= dim) throw ctx.error(what, " index ", idx, " is out of range for a dimension of size ", dim);
  return idx < 0 ? idx + dim : idx;
}

// Element count of a shape a kernel is about to allocate; throws naming the node when a
// dim is negative or the count is absurdly large (instead of overflowing).
inline int64_t checked_numel(const RunContext& ctx, const Shape& s) {
  constexpr int64_t kMax = int64_t{1} << 48;
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) throw ctx.error("output shape ", shape_to_string(s), " has a negative dim");
    if (d != 0 && n > kMax / d) throw ctx.error("output shape ", shape_to_string(s), " is too large");
    n *= d;
  }
  return n;
}

// PartialShape of the given rank with unknown dims.
inline ir::PartialShape unknown_dims(size_t rank) { return ir::PartialShape(std::vector<ir::Dim>(rank, ir::Dim::unknown())); }

// Rank of a 1-D shape-like input when known statically (its length), else -1.
int64_t static_length(const ir::InferContext& ctx, size_t i);

void register_index_ops(ir::OpRegistry& r);   // shape_index.cpp
void register_resize_ops(ir::OpRegistry& r);  // shape_resize.cpp
void register_crop_ops(ir::OpRegistry& r);    // shape_crop.cpp: CenterCropPad, Col2Im

}  // namespace kiln::ops::shape_detail
