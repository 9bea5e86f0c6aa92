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
// Given the model `g` was specialised from, the tail is taken from the model instead: its
// nodes downstream of the cut's, as the model has them (nothing folded for one set of shapes),
// its inputs of any shape. It is then the same graph whatever shapes made `g`, so one executor
// serves every plan that cuts there and keeps its plans (a detector's boxes, counted anew for
// every image, find the tail's plan for that count already made). A value it reads that `g`
// folded into a constant is fed to it (`feeds`). Where the model's nodes do not match `g`'s
// (an If inlined, say), the tail is `g`'s own.
// The three graphs name their values as `g` does: a part's inputs are found by name among
// the model's inputs and the outputs of the parts before it.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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
  bool tail_from_model = false;  // the tail is the model's (above), its inputs of any shape
  // values of `g` that are constants there and that the tail reads or the model outputs
  std::vector<std::pair<std::string, Tensor>> feeds;
  std::string cut_key;        // the cut's node names: equal keys, the same tail from the model
  // (the tail's inputs take any shape in either case: its executor plans each it is given)
  std::string first_dynamic;  // a cut output whose shape depends on data
  std::string cut_node;       // the first cut node, described (ir::Node::describe)
  size_t cut_nodes = 0, tail_nodes = 0;
};

// A key equal for two tails that compute the same thing from inputs of the same names, types
// and ranks: the nodes in order with their attributes and inputs' names, small constants by
// their bytes, large ones and nested graphs by their storage. Two tails cut from plans of
// different shapes share an executor when their keys are equal (a constant folded for one
// shape makes them differ).
std::string tail_key(const ir::Graph& tail);

// nullopt when no node has static inputs and an output of unknown shape (the shapes of `g`
// are unknown for another reason, or all static).
std::optional<DataSplit> split_at_data_dependent_shapes(const ir::Graph& g, const ir::Graph* model = nullptr);

}  // namespace kiln::transforms
