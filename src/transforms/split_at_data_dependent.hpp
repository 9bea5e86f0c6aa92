#pragma once
// A specialised graph whose shapes depend on data (a NonZero's count, a NonMaxSuppression's
// boxes, a TopK whose k is computed) cut where they first do, so that everything before the
// cut runs on the fast path and only what follows it waits for the data:
//   head: the nodes that read no value computed at or after the cut: every shape static;
//   cut:  the nodes whose inputs all come from the head, the model's inputs or constants and
//         one of whose outputs has a shape that depends on data (they run once their inputs
//         are known; their outputs then have concrete shapes);
//   tail: every node that reads a value of the cut or of the tail: planned again for the
//         shapes the cut produced (cpu::Executor gives it an executor of its own, which cuts it
//         again if it holds further data-dependent shapes).
// The three graphs name their values as `g` does: a part's inputs are found by name among
// the model's inputs and the outputs of the parts before it.
#include <memory>
#include <optional>
#include <string>

#include "ir/graph.hpp"

namespace kiln::transforms {

// kiln_disable_passes name: disabled, a graph with data-dependent shapes runs on the reference executor
inline constexpr const char* kSplitAtDataDependentShapes = "SplitAtDataDependentShapes";

struct DataSplit {
  // inputs: g's, in order; outputs: the values the cut, the tail and g's outputs read from it
  std::shared_ptr<ir::Graph> head;
  // inputs: the non-constant values its nodes read; outputs: those the tail or g's outputs read
  std::shared_ptr<ir::Graph> cut;
  // null when nothing follows the cut; inputs: the non-constant values its nodes read from the
  // model, the head and the cut; outputs: g's outputs it computes
  std::shared_ptr<ir::Graph> tail;
  std::string first_dynamic;  // a cut output whose shape depends on data
  std::string cut_node;       // the first cut node, described (ir::Node::describe)
  size_t cut_nodes = 0, tail_nodes = 0;
};

// nullopt when no node has static inputs and an output of unknown shape (the shapes of `g`
// are unknown for another reason, or all static).
std::optional<DataSplit> split_at_data_dependent_shapes(const ir::Graph& g);

}  // namespace kiln::transforms
