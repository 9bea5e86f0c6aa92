#include "transforms/split_at_data_dependent.hpp"

#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kiln::transforms {

namespace {

enum class Part { head, cut, tail };

// One part under construction: nodes copied from the source graph keep their names and their
// values' names; a value a copied node reads that the part does not produce becomes an input of
// the part (or, for a constant, a constant sharing the source's storage).
class PartBuilder {
 public:
  PartBuilder(const ir::Graph& src, const std::string& suffix) : g_(std::make_shared<ir::Graph>()) {
    g_->name = (src.name.empty() ? std::string("graph") : src.name) + suffix;
    g_->opset_imports = src.opset_imports;
  }

  void add_input(const ir::Value& v) { g_->add_input(v.name(), v.type); }

  void copy(const ir::Node& n) {
    std::vector<ir::Value*> ins;
    ins.reserve(n.num_inputs());
    for (const ir::Value* v : n.inputs()) ins.push_back(v ? read(*v) : nullptr);
    std::vector<std::string> outs;
    outs.reserve(n.num_outputs());
    for (const ir::Value* o : n.outputs()) outs.push_back(o->name());
    ir::Node* c = g_->add_node(n.op_type(), ins, outs, n.name(), n.domain());
    c->attrs = n.attrs;
    c->set_opset(n.opset());
    for (size_t i = 0; i < n.num_outputs(); ++i) c->output(i)->type = n.output(i)->type;
  }

  // `v` (a value this part produces) is read after it
  void add_output(const ir::Value& v) {
    ir::Value* mine = g_->find_value(v.name());
    if (mine && !g_->is_output(mine)) g_->add_output(mine);
  }

  bool produces(const ir::Value& v) const {
    const ir::Value* mine = g_->find_value(v.name());
    return mine && mine->producer();
  }

  std::shared_ptr<ir::Graph> take() { return std::move(g_); }

 private:
  ir::Value* read(const ir::Value& v) {
    if (ir::Value* have = g_->find_value(v.name())) return have;
    if (v.is_constant()) {
      ir::Value* c = g_->add_constant(v.name(), v.constant());
      c->type = v.type;
      return c;
    }
    return g_->add_input(v.name(), v.type);
  }

  std::shared_ptr<ir::Graph> g_;
};

bool shape_known(const ir::Value* v) { return !v || v->type.shape.is_static(); }

}  // namespace

std::optional<DataSplit> split_at_data_dependent_shapes(const ir::Graph& g) {
  const std::vector<ir::Node*> order = g.topo_order();
  std::unordered_map<const ir::Node*, Part> part;
  std::unordered_set<const ir::Value*> late;  // produced by the cut or the tail
  DataSplit s;
  for (const ir::Node* n : order) {
    Part p = Part::head;
    for (const ir::Value* v : n->inputs())
      if (v && late.count(v)) p = Part::tail;
    if (p == Part::head)
      for (const ir::Value* o : n->outputs())
        if (!shape_known(o)) {
          p = Part::cut;
          if (s.first_dynamic.empty()) {
            s.first_dynamic = o->name();
            s.cut_node = n->describe();
          }
        }
    part[n] = p;
    if (p != Part::head) late.insert(n->outputs().begin(), n->outputs().end());
    if (p == Part::cut) ++s.cut_nodes;
    if (p == Part::tail) ++s.tail_nodes;
  }
  if (s.cut_nodes == 0) return std::nullopt;

  PartBuilder head(g, ""), cut(g, "/cut"), tail(g, "/after_cut");
  for (const ir::Value* in : g.inputs()) head.add_input(*in);
  for (const ir::Node* n : order) {
    switch (part[n]) {
      case Part::head: head.copy(*n); break;
      case Part::cut: cut.copy(*n); break;
      case Part::tail: tail.copy(*n); break;
    }
  }
  // what each part hands on: the values later parts read, and the model's outputs
  for (const ir::Node* n : order) {
    if (part[n] == Part::head) continue;
    for (const ir::Value* v : n->inputs()) {
      if (!v || v->is_constant() || v->is_graph_input()) continue;
      if (head.produces(*v)) head.add_output(*v);
      if (part[n] == Part::tail && cut.produces(*v)) cut.add_output(*v);
    }
  }
  for (const ir::Value* v : g.outputs()) {
    if (!v || v->is_constant() || v->is_graph_input()) continue;
    if (head.produces(*v)) head.add_output(*v);
    if (cut.produces(*v)) cut.add_output(*v);
    if (tail.produces(*v)) tail.add_output(*v);
  }
  s.head = head.take();
  s.cut = cut.take();
  if (s.tail_nodes > 0) s.tail = tail.take();
  return s;
}

}  // namespace kiln::transforms
