#include "api/runtime_model.hpp"

namespace kiln::api {

RuntimeModel describe_runtime_graph(const cpu::Graph& g) {
  RuntimeModel m;
  m.arena_bytes = g.arena_bytes();
  m.in_place_nodes = g.in_place_nodes();
  for (const auto& n : g.nodes()) {
    RuntimeNode r;
    r.name = n->name;
    r.type = n->type();
    r.exec_type = n->impl;
    r.original = n->source ? n->source->name() : std::string();
    r.fused = n->fused;
    for (const cpu::Edge* e : n->inputs)
      if (e && e->kind != cpu::Edge::Kind::constant) r.inputs.push_back(e->name);
    for (const cpu::Edge* e : n->outputs) r.outputs.push_back({e->name, e->shape, e->layout_name(), e->dtype});
    m.nodes.push_back(std::move(r));
  }
  return m;
}

}  // namespace kiln::api
