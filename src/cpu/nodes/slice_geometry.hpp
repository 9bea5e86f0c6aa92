#pragma once
// Where each output of a Slice (steps of 1), Split, or Gather of one constant index takes its
// elements from: a box of the input, `begin` and `extent` per input axis (an output of Gather
// has the indexed axis removed, or kept as 1 for a one-element index: the same bytes). From
// static shapes and constant parameters only; nullopt for anything else (a step other than 1,
// computed starts, an index tensor of several elements). Shared by the SliceView node (an
// output that is one contiguous run of the input's bytes is a view) and the SliceCopy node
// (the others copy their runs).
#include <kiln/tensor.hpp>

#include <optional>
#include <vector>

#include "ir/graph.hpp"

namespace kiln::cpu {

struct SliceBox {
  std::vector<int64_t> begin, extent;  // per input axis
};
struct SliceGeometry {
  Shape in;                    // the input's shape
  std::vector<SliceBox> outs;  // one per output
};

std::optional<SliceGeometry> slice_geometry(const ir::Node& n);

// The element offset of `box` in `in` when the box is one contiguous run of it, else nullopt.
std::optional<int64_t> contiguous_offset(const Shape& in, const SliceBox& box);

}  // namespace kiln::cpu
