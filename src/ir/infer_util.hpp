#pragma once
// Helpers for static shape inference functions.
#include "ir/op_registry.hpp"

namespace kiln::ir {

// Multidirectional (numpy) broadcasting of partial shapes; throws on a static mismatch.
PartialShape broadcast_shapes(const std::vector<PartialShape>& shapes, const Node& node);
// Normalises a possibly negative axis into [0, rank) (or [0, rank] with allow_end);
// throws an error naming the node otherwise.
int64_t normalize_axis(int64_t axis, int64_t rank, const Node& node, bool allow_end = false);
// A Transpose's perm for a rank-`rank` input ("perm" with negative entries normalised, else
// the dims reversed); throws an error naming the node when it is not a permutation.
std::vector<int64_t> transpose_perm(const Node& node, size_t rank);
// infer function: output 0 has the type of input `i`.
std::function<void(InferContext&)> infer_same_as_input(size_t i = 0);
// Product of dims if all static, else an unknown dim.
// Dim i of s, or unknown when the rank is unknown or not larger than i.
inline Dim dim_or_unknown(const PartialShape& s, size_t i) {
  return s.rank_known && i < s.rank() ? s.dims[i] : Dim::unknown();
}

Dim dim_product(const std::vector<Dim>& dims);
// a op b on dims when both static, else unknown (symbolic equality kept for Dim == Dim).
Dim dim_mul(const Dim& a, const Dim& b);
Dim dim_add(const Dim& a, const Dim& b);

}  // namespace kiln::ir
