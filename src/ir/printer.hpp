#pragma once
#include <ostream>
#include <string>

#include "ir/graph.hpp"

namespace kiln::ir {
// Readable text form: inputs, constants (summarised), one line per node in
// topological order with attribute values and typed outputs, then outputs.
void print_graph(const Graph& g, std::ostream& os);
std::string graph_to_string(const Graph& g);
}  // namespace kiln::ir
