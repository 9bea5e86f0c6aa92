#pragma once
// The runtime graph as users see it in `kiln inspect`: a JSON document (every runtime
// node with its type, primitive, fused ONNX nodes, output layouts and precision, in
// execution order), the fusion log as text, and a Graphviz drawing of the original and
// the optimised graph side by side.
#include <kiln/core.hpp>
#include <nlohmann/json.hpp>

#include <string>

#include "ir/graph.hpp"

namespace kiln::tools {

// The runtime graph (CompiledModel::get_runtime_model) as the JSON document -exec_graph_path writes.
nlohmann::json exec_graph_json(const RuntimeModel& m);

// One line per log entry: "applied  PASS  where: message" / "skipped  PASS  where: reason".
std::string explain_fusions(const std::vector<FusionDecision>& fusions, bool include_applied = true);

// digraph with two clusters: the original ir graph (nodes that were fused away filled
// grey) and the runtime graph (fused nodes labelled with what they absorbed).
std::string exec_graph_dot(const ir::Graph& original, const RuntimeModel& g);

}  // namespace kiln::tools
