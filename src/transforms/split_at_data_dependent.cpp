#include "transforms/split_at_data_dependent.hpp"

#include "core/strings.hpp"

#include <functional>
#include <string_view>
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

  // the part's inputs get unknown dims (their rank kept): it takes any shape
  void any_input_shape() {
    for (ir::Value* in : g_->inputs())
      for (ir::Dim& d : in->type.shape.dims) d = ir::Dim::unknown();
  }

  const ir::Graph& graph() const { return *g_; }

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

// Where each input of `tail` comes from in `g`: a model input, a constant `g` folded (fed to
// the tail), or a value the head or the cut produces, which it then hands on. False, with
// nothing changed, when some input is none of these.
bool wire_tail_inputs(const PartBuilder& tail, const ir::Graph& g, PartBuilder& head, PartBuilder& cut,
                      DataSplit& s) {
  std::vector<const ir::Value*> from_head, from_cut;
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (const ir::Value* in : tail.graph().inputs()) {
    const ir::Value* gv = g.find_value(in->name());
    if (!gv) return false;
    if (gv->is_constant()) feeds.emplace_back(gv->name(), gv->constant());
    else if (gv->is_graph_input()) continue;
    else if (head.produces(*gv)) from_head.push_back(gv);
    else if (cut.produces(*gv)) from_cut.push_back(gv);
    else return false;
  }
  for (const ir::Value* v : from_head) head.add_output(*v);
  for (const ir::Value* v : from_cut) cut.add_output(*v);
  s.feeds.insert(s.feeds.end(), feeds.begin(), feeds.end());
  return true;
}

// The tail as `model` has it: its nodes downstream of the cut's (found by name). False, with
// nothing of `s` changed but `head` / `cut` outputs that do no harm, where the model's nodes do
// not match the specialised graph's.
bool tail_from_model(const ir::Graph& g, const ir::Graph& model, const std::vector<const ir::Node*>& cut_nodes,
                     const std::unordered_set<std::string>& g_tail_outputs, PartBuilder& head, PartBuilder& cut,
                     DataSplit& s) {
  std::unordered_set<const ir::Node*> mcut;
  for (const ir::Node* n : cut_nodes) {
    const ir::Node* m = model.find_node(n->name());
    if (!m || m->op_type() != n->op_type() || m->num_outputs() != n->num_outputs()) return false;
    for (size_t i = 0; i < m->num_outputs(); ++i)
      if (m->output(i)->name() != n->output(i)->name()) return false;
    mcut.insert(m);
  }
  std::unordered_set<const ir::Value*> late;
  std::vector<const ir::Node*> tail_nodes;
  for (const ir::Node* m : model.topo_order()) {
    bool after = false;
    for (const ir::Value* v : m->inputs())
      if (v && late.count(v)) after = true;
    if (mcut.count(m)) {
      if (after) return false;  // a cut node after another: not the specialised graph's cut
      late.insert(m->outputs().begin(), m->outputs().end());
    } else if (after) {
      tail_nodes.push_back(m);
      late.insert(m->outputs().begin(), m->outputs().end());
    }
  }
  if (tail_nodes.empty()) {
    if (!g_tail_outputs.empty()) return false;
    s.tail_from_model = true;
    return true;
  }
  PartBuilder tail(model, "/after_cut");
  for (const ir::Node* m : tail_nodes) tail.copy(*m);
  // every model output the specialised tail computes, this one must
  std::unordered_set<std::string> outputs;
  for (const ir::Value* v : model.outputs())
    if (v && tail.produces(*v)) outputs.insert(v->name());
  for (const std::string& name : g_tail_outputs)
    if (!outputs.count(name)) return false;
  if (!wire_tail_inputs(tail, g, head, cut, s)) return false;
  for (const ir::Value* v : model.outputs())
    if (v && tail.produces(*v)) tail.add_output(*v);
  tail.any_input_shape();
  s.tail = tail.take();
  s.tail_nodes = tail_nodes.size();
  s.tail_from_model = true;
  return true;
}

}  // namespace

std::string tail_key(const ir::Graph& tail) {
  constexpr size_t kHashedBytes = 64 << 10;  // constants up to this size are keyed by their bytes
  std::string k;
  for (const ir::Value* in : tail.inputs())
    k += cat("in ", in->name(), " ", static_cast<int>(in->type.dtype), " ", static_cast<int>(in->type.kind), " ",
             in->type.shape.rank_known ? static_cast<int64_t>(in->type.shape.rank()) : -1, "\n");
  std::unordered_set<const ir::Value*> seen;
  for (const ir::Node* n : tail.topo_order()) {
    k += cat(n->domain(), ":", n->op_type(), "/", n->opset(), " ", n->name(), " (");
    for (const ir::Value* v : n->inputs()) {
      if (!v) {
        k += ", ";
        continue;
      }
      k += v->name();
      if (v->is_constant() && seen.insert(v).second) {
        const Tensor& t = v->constant();
        k += cat("=", static_cast<int>(t.dtype()), shape_to_string(t.shape()));
        if (t.byte_size() <= kHashedBytes && t.dtype() != DType::string)
          k += cat("#", std::hash<std::string_view>()(std::string_view(static_cast<const char*>(t.raw()), t.byte_size())));
        else
          k += cat("@", reinterpret_cast<uintptr_t>(t.raw()));
      }
      k += ", ";
    }
    k += ") ->";
    for (const ir::Value* o : n->outputs()) k += " " + o->name();
    for (const auto& [name, a] : n->attrs) {
      k += " " + name + "=";
      if (a.type() == ir::AttrType::graph)
        k += cat("@", reinterpret_cast<uintptr_t>(std::get<std::shared_ptr<ir::Graph>>(a.value).get()));
      else if (a.type() == ir::AttrType::tensor)
        k += cat("@", reinterpret_cast<uintptr_t>(std::get<Tensor>(a.value).raw()));
      else
        k += a.to_string();
    }
    k += "\n";
  }
  for (const ir::Value* o : tail.outputs()) k += "out " + o->name() + "\n";
  return k;
}

std::optional<DataSplit> split_at_data_dependent_shapes(const ir::Graph& g, const ir::Graph* model) {
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
  std::vector<const ir::Node*> cut_nodes;
  for (const ir::Value* in : g.inputs()) head.add_input(*in);
  for (const ir::Node* n : order) {
    switch (part[n]) {
      case Part::head: head.copy(*n); break;
      case Part::cut:
        cut.copy(*n);
        cut_nodes.push_back(n);
        s.cut_key += n->name() + ";";
        break;
      case Part::tail: tail.copy(*n); break;
    }
  }
  // what the head and the cut hand on to each other and to the model's outputs
  for (const ir::Node* n : order)
    if (part[n] == Part::cut)
      for (const ir::Value* v : n->inputs())
        if (v && !v->is_constant() && !v->is_graph_input() && head.produces(*v)) head.add_output(*v);
  std::unordered_set<std::string> g_tail_outputs;
  for (const ir::Value* v : g.outputs()) {
    if (!v || v->is_graph_input()) continue;
    if (v->is_constant()) s.feeds.emplace_back(v->name(), v->constant());
    if (head.produces(*v)) head.add_output(*v);
    if (cut.produces(*v)) cut.add_output(*v);
    if (tail.produces(*v)) g_tail_outputs.insert(v->name());
  }
  if (!model || !tail_from_model(g, *model, cut_nodes, g_tail_outputs, head, cut, s)) {
    // the tail as the specialised graph has it (its inputs are all the head's, the cut's or the
    // model's: it reads no folded constant as an input)
    wire_tail_inputs(tail, g, head, cut, s);
    for (const ir::Value* v : g.outputs())
      if (v && tail.produces(*v)) tail.add_output(*v);
    tail.any_input_shape();
    if (s.tail_nodes > 0) s.tail = tail.take();
  }
  s.head = head.take();
  s.cut = cut.take();
  return s;
}

}  // namespace kiln::transforms
