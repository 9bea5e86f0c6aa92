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

// A box of `in` as the runs it is made of: the innermost axis that is cut (the last not whole)
// and every whole axis after it are one run, contiguous in the input and in the box alike.
// `count` runs of `run_bytes`; run r starts at `base` plus, on each outer axis (the axes before
// the run's first), r's index times that axis's input stride (`outer`: extents, `outer_stride`:
// byte strides). Elements of `elem` bytes.
struct SliceRuns {
  int64_t count = 0;
  size_t run_bytes = 0;
  size_t base = 0;
  std::vector<int64_t> outer;
  std::vector<size_t> outer_stride;
};
SliceRuns slice_runs(const Shape& in, const SliceBox& box, size_t elem);

// The element offset of `box` in `in` when the box is one contiguous run of it, else nullopt.
std::optional<int64_t> contiguous_offset(const Shape& in, const SliceBox& box);

}  // namespace kiln::cpu
