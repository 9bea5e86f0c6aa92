#pragma once
// Specialises a graph to concrete input shapes: every graph input gets its actual
// static shape, constant subexpressions are evaluated once with the reference kernels
// (shape computations such as Shape -> Gather -> Concat -> Reshape, weight transposes,
// dequantised weights) and replaced by constants, and static shapes are inferred for
// every remaining value. The fast runtime graph is built from the result.
#include <kiln/tensor.hpp>

#include <vector>

#include "ir/graph.hpp"

namespace kiln::transforms {

struct SpecializeResult {
  size_t folded_nodes = 0;    // nodes replaced by constants
  bool all_static = true;     // every value has a static shape afterwards
  std::string first_dynamic;  // a value whose shape stayed unknown (data-dependent), if any
};

// `g` is modified in place (use ir::Graph::clone() first to keep the original).
SpecializeResult specialize_shapes(ir::Graph& g, const std::vector<Shape>& input_shapes);

}  // namespace kiln::transforms
