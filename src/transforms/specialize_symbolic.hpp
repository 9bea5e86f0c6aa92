#pragma once
// Stage 1 of a model whose input shapes vary, done once instead of once per shape: the graph is
// prepared for the IR passes with the inputs' dims left symbolic, so that what the passes decide
// holds for every shape the inputs may take (cpu::Executor then binds each new set of shapes
// with specialize_shapes on a copy of the result, and skips the passes).
//
//  - Graph inputs keep their declared dims; an unnamed dynamic dim gets a symbol of its own.
//  - Constant subexpressions are folded as specialize_shapes folds them (weight transposes,
//    dequantised weights), and so are shape computations whose result does not depend on the
//    symbolic dims (Gather(Shape(x), 2) of x [batch, seq, 768] is 768).
//  - A Reshape whose target is computed from shapes gets a constant target when one exists
//    that means the same for every binding: 0 where the element is the input's dim at the
//    same position (the same symbol), -1 for at most one other element ([batch, seq, 12, 64]
//    from [batch, seq, 768] becomes [0, 0, 12, 64]). What cannot be expressed keeps its shape
//    computation, which specialize_shapes folds for each shape.
//  - Every value's dims are inferred; a dim that inference cannot name (a convolution's output
//    width, a Range's length) gets a symbol of its own, so two dims are equal to a pass only
//    when they are equal for every binding.
// Refused (ok = false, with the reason) for graphs with control flow (If / Loop / Scan branches
// are specialised per shape) and values of unknown rank.
#include <string>

#include "ir/graph.hpp"
#include "transforms/specialize_shapes.hpp"

namespace kiln::transforms {

inline constexpr const char* kSymbolicShapes = "SymbolicShapes";  // kiln_disable_passes name

struct SymbolicSpecializeResult {
  bool ok = false;
  std::string reason;            // !ok: why the graph needs per-shape specialisation
  size_t folded_nodes = 0;       // nodes replaced by constants
  size_t static_reshapes = 0;    // Reshapes whose computed target became a constant
  size_t named_dims = 0;         // dims given a symbol of their own
};

// `g` is modified in place (clone first to keep the original).
SymbolicSpecializeResult specialize_symbolic(ir::Graph& g, const SpecializeOptions& options = {});

}  // namespace kiln::transforms
