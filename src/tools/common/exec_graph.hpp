#pragma once
// The runtime graph as users see it in `kiln inspect`: a JSON document (every runtime
// node with its type, primitive, fused ONNX nodes, output layouts and precision, in
// execution order), the fusion log as text, and a Graphviz drawing of the original and
// the optimised graph side by side.
#include <kiln/core.hpp>
#include <nlohmann/json.hpp>

#include <string>

#include "cpu/graph.hpp"
#include "ir/graph.hpp"
#include "transforms/pass_log.hpp"

namespace kiln::tools {

// The runtime graph (CompiledModel::get_runtime_model) as the JSON document -exec_graph_path writes.
nlohmann::json exec_graph_json(const RuntimeModel& m);

// One line per log entry: "applied  PASS  where: message" / "skipped  PASS  where: reason".
std::string explain_fusions(const transforms::PassLog& log, bool include_applied = true);

// digraph with two clusters: the original ir graph (nodes that were fused away filled
// grey) and the runtime graph (fused nodes labelled with what they absorbed).
std::string exec_graph_dot(const ir::Graph& original, const cpu::Graph& g);

}  // namespace kiln::tools
