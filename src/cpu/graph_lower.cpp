// Compile stage 4 (cpu/compile_pipeline.hpp): one runtime node per ir node, an Edge per value.
#include "core/pointer_map.hpp"
#include "core/strings.hpp"
#include "cpu/graph.hpp"
#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

void Graph::lower(const GraphOptions& options) {
  PointerMap<ir::Value, Edge*> edge_of(2 * ir_->num_nodes() + ir_->inputs().size());
  auto edge_for = [&](const ir::Value* v) -> Edge* {
    if (Edge** e = edge_of.find(v)) return *e;
    KILN_CHECK(v->is_constant(), cat("cpu::Graph: value '", v->name(), "' is used before it is produced"));
    Edge* e = new_edge(v->name(), v->constant().dtype(), v->constant().shape());
    e->kind = Edge::Kind::constant;
    e->constant = v->constant();
    e->data = e->constant.raw();
    edge_of.set(v, e);
    return e;
  };
  for (const ir::Value* in : ir_->inputs()) {
    KILN_CHECK(in->type.shape.is_static(), cat("cpu::Graph: input '", in->name(), "' has no static shape"));
    Edge* e = new_edge(in->name(), in->type.dtype, in->type.shape.to_shape());
    e->kind = Edge::Kind::input;
    edge_of.set(in, e);
    input_edges_.push_back(e);
  }
  for (const ir::Node* n : ir_->topo_order()) {
    auto node = make_node(*n);
    node->bf16 = options.bf16;
    node->snippets_isa = options.snippets_isa;
    node->shapes_vary = options.shapes_vary;
    node->shape_agnostic = options.shape_agnostic;
    node->fusion_decisions = options.fusion_decisions;
    node->take_options(options);
    node->inputs.reserve(n->num_inputs());
    node->outputs.reserve(n->num_outputs());
    for (const ir::Value* in : n->inputs()) node->inputs.push_back(in ? edge_for(in) : nullptr);
    for (const ir::Value* out : n->outputs()) {
      KILN_CHECK(out->type.shape.is_static(),
                 cat(n->describe(), ": output '", out->name(), "' has no static shape ", out->type.shape.to_string()));
      Edge* e = new_edge(out->name(), out->type.dtype, out->type.shape.to_shape());
      edge_of.set(out, e);
      node->outputs.push_back(e);
    }
    nodes_.push_back(std::move(node));
  }
  for (const ir::Value* out : ir_->outputs()) output_edges_.push_back(edge_for(out));
}

}  // namespace kiln::cpu
