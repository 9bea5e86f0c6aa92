#pragma once
// The public RuntimeModel (<kiln/core.hpp>) of a runtime graph: what
// CompiledModel::get_runtime_model returns, and what `kiln inspect` prints.
#include <kiln/core.hpp>

#include "cpu/graph.hpp"

namespace kiln::api {

RuntimeModel describe_runtime_graph(const cpu::Graph& g);

}  // namespace kiln::api
