#pragma once
// Specialises a graph to concrete input shapes: every graph input gets its actual
// static shape, constant subexpressions are evaluated once with the reference kernels
// (shape computations such as Shape -> Gather -> Concat -> Reshape, weight transposes,
// dequantised weights) and replaced by constants, and static shapes are inferred for
// every remaining value. The fast runtime graph is built from the result.
#include <kiln/tensor.hpp>

#include <vector>

#include "ir/graph.hpp"
#include "ir/op_registry.hpp"

namespace kiln::transforms {

struct SpecializeResult {
  size_t folded_nodes = 0;    // nodes replaced by constants
  bool all_static = true;     // every value has a static shape afterwards
  std::string first_dynamic;  // a value whose shape stayed unknown (data-dependent), if any
};

struct SpecializeOptions {
  // DequantizeLinear of constant 8-bit / int32 data (a QDQ model's weights and biases) stays a
  // node, for QdqToQLinear to read the integers; fold_weight_dequantize folds what it leaves.
  bool keep_weight_dequantize = false;
  // Every node of `g` was validated (ir::validate_node) already: a copy of a model's template,
  // validated once when it was made. Only the schemas are looked up.
  bool nodes_validated = false;
};

// `g` is modified in place (use ir::Graph::clone() first to keep the original).
SpecializeResult specialize_shapes(ir::Graph& g, const std::vector<Shape>& input_shapes,
                                   const SpecializeOptions& options = {});

// Evaluates node `n` (schema `s`; its inputs constants, or a Shape / Size of a static shape)
// with the reference kernel and replaces its outputs by constants; false (nothing changed)
// when the outputs would be too large to keep.
bool fold_node(ir::Graph& g, ir::Node* n, const ir::OpSchema& s);

// Folds `n` (schema `s`) when its value is known before run time: every input a constant, or a
// Shape / Size of a value of static shape; not random ops or control flow, nor a weight's
// DequantizeLinear that `options` keeps. Returns whether it was folded (fold_node).
bool fold_if_known(ir::Graph& g, ir::Node* n, const ir::OpSchema& s, const SpecializeOptions& options);

// A DequantizeLinear of constant 8-bit / int32 data with constant parameters.
bool is_weight_dequantize(const ir::Node& n);
// Folds every such node; returns how many.
size_t fold_weight_dequantize(ir::Graph& g);

}  // namespace kiln::transforms
