#include "ir/graph.hpp"

#include <kiln/error.hpp>

#include <algorithm>

#include "core/pointer_map.hpp"
#include "core/strings.hpp"

namespace kiln::ir {

const AttrMap::Map& AttrMap::none() {
  static const Map none;
  return none;
}

const std::string& SharedName::empty() {
  static const std::string none;
  return none;
}

// ---------------- Value ----------------

void Value::set_constant(Tensor t) {
  type.dtype = t.dtype();
  type.shape = PartialShape(t.shape());
  constant_ = std::move(t);
}

// ---------------- Node attributes ----------------

std::string Node::describe() const {
  std::string s = cat("node '", name(), "' (", op_type_);
  if (!domain_.empty()) s += cat(", domain ", domain_);
  return s + ")";
}

// The attribute `n` if the node has it (one lookup: the fusion rules and shape inference read
// attributes with defaults for every node of every new input shape), else null.
template <typename T>
const T* Node::get_if_present(std::string_view n) const {
  auto it = attrs.find(n);
  if (it == attrs.end()) return nullptr;
  const T* v = std::get_if<T>(&it->second.value);
  if (!v)
    throw Error(cat(describe(), ": attribute '", n, "' has type ", attr_type_name(it->second.type()),
                    ", expected another type"));
  return v;
}

template <typename T>
const T& Node::get(std::string_view n) const {
  const T* v = get_if_present<T>(n);
  if (!v) throw Error(cat(describe(), ": missing required attribute '", n, "'"));
  return *v;
}

int64_t Node::attr_i(std::string_view n) const { return get<int64_t>(n); }
int64_t Node::attr_i(std::string_view n, int64_t def) const {
  const int64_t* v = get_if_present<int64_t>(n);
  return v ? *v : def;
}
float Node::attr_f(std::string_view n) const { return get<float>(n); }
float Node::attr_f(std::string_view n, float def) const {
  const float* v = get_if_present<float>(n);
  return v ? *v : def;
}
std::string Node::attr_s(std::string_view n) const { return get<std::string>(n); }
std::string Node::attr_s(std::string_view n, const std::string& def) const {
  const std::string* v = get_if_present<std::string>(n);
  return v ? *v : def;
}
std::vector<int64_t> Node::attr_ints(std::string_view n) const { return get<std::vector<int64_t>>(n); }
std::vector<int64_t> Node::attr_ints(std::string_view n, const std::vector<int64_t>& def) const {
  const std::vector<int64_t>* v = get_if_present<std::vector<int64_t>>(n);
  return v ? *v : def;
}
std::vector<float> Node::attr_floats(std::string_view n) const { return get<std::vector<float>>(n); }
std::vector<float> Node::attr_floats(std::string_view n, const std::vector<float>& def) const {
  const std::vector<float>* v = get_if_present<std::vector<float>>(n);
  return v ? *v : def;
}
std::vector<std::string> Node::attr_strings(std::string_view n) const {
  return get<std::vector<std::string>>(n);
}
const std::vector<int64_t>* Node::find_ints(std::string_view n) const {
  return get_if_present<std::vector<int64_t>>(n);
}
const std::string* Node::find_string(std::string_view n) const { return get_if_present<std::string>(n); }
const Tensor& Node::attr_tensor(std::string_view n) const { return get<Tensor>(n); }
std::shared_ptr<Graph> Node::attr_graph(std::string_view n) const { return get<std::shared_ptr<Graph>>(n); }

// ---------------- Graph construction ----------------

Value* Graph::new_value(const std::string& name) {
  std::string n = name.empty() ? unique_name("v") : name;
  names_changed();
  // a copy that has no indexes yet knows a name is new when its name sets lack it
  const bool new_to_sets = !indexed_.load(std::memory_order_relaxed) && inherited_names_ && !name_taken_in_sets(n);
  if (!new_to_sets) {
    index();
    KILN_CHECK(!value_by_name_.count(n), cat("graph '", this->name, "': value name '", n, "' defined twice"));
  }
  Value* p = &values_.emplace_back();
  p->name_ = std::move(n);
  p->pos_ = std::prev(values_.end());
  if (new_to_sets) added_names_.insert(p->name());
  else value_by_name_[p->name()] = p;
  return p;
}

std::string Graph::unique_name(const std::string& prefix) {
  const bool by_sets = !indexed_.load(std::memory_order_relaxed) && inherited_names_;  // a copy without indexes
  if (!by_sets) index();
  std::string n;
  do {
    n = cat(prefix, "_", name_counter_++);
  } while (by_sets ? name_taken_in_sets(n) : value_by_name_.count(n) || node_names_.count(n));
  return n;
}

std::shared_ptr<const Graph::NameSet> Graph::name_set() const {
  std::lock_guard<std::mutex> lock(index_mutex_);
  if (!name_set_) {
    auto names = std::make_shared<NameSet>();
    names->reserve(values_.size() + nodes_.size());
    for (const Value& v : values_) names->insert(v.name());
    for (const Node& n : nodes_) names->insert(n.name());
    name_set_ = std::move(names);
  }
  return name_set_;
}

Value* Graph::add_input(const std::string& name, ValueType type) {
  Value* v = new_value(name);
  v->type = std::move(type);
  v->is_input_ = true;
  inputs_.push_back(v);
  return v;
}

Value* Graph::add_constant(const std::string& name, Tensor t) {
  Value* v = new_value(name);
  v->set_constant(std::move(t));
  return v;
}

Node* Graph::add_node(const std::string& op_type, const std::vector<Value*>& inputs,
                      const std::vector<std::string>& output_names, const std::string& name,
                      const std::string& domain) {
  std::string node_name = name.empty() ? unique_name(op_type) : name;
  Node* p = &nodes_.emplace_back();
  p->op_type_ = op_type;
  p->domain_ = domain;
  p->name_ = std::move(node_name);
  p->opset_ = opset_for(domain);
  p->ordinal_ = next_ordinal_++;
  p->pos_ = std::prev(nodes_.end());
  names_changed();
  if (indexed_.load(std::memory_order_relaxed)) ++node_names_[p->name()];  // else index() counts it
  else if (inherited_names_) added_names_.insert(p->name());
  for (Value* v : inputs) append_node_input(p, v);
  for (size_t i = 0; i < output_names.size(); ++i) {
    Value* v = new_value(output_names[i]);
    v->producer_ = p;
    v->producer_output_ = i;
    p->outputs_.push_back(v);
  }
  return p;
}

Node* Graph::add_node(const std::string& op_type, const std::vector<Value*>& inputs, size_t num_outputs,
                      const std::string& name, const std::string& domain) {
  return add_node(op_type, inputs, std::vector<std::string>(num_outputs), name, domain);
}

void Graph::add_output(Value* v) { outputs_.push_back(v); }
void Graph::set_output(size_t i, Value* v) { outputs_.at(i) = v; }

int Graph::opset_for(const std::string& domain) const {
  auto it = opset_imports.find(domain);
  if (it == opset_imports.end() && domain == "ai.onnx") it = opset_imports.find("");
  return it == opset_imports.end() ? 0 : it->second;
}

// ---------------- queries ----------------

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  out.reserve(nodes_.size());
  for (Node& n : nodes_) out.push_back(&n);
  return out;
}

std::vector<Node*> Graph::topo_order() const {
  // Kahn's algorithm, stable with respect to insertion order. Counts by ordinal, not in a map
  // by address: every new input shape's plan sorts its graph several times.
  std::vector<uint32_t> pending(next_ordinal_, 0);
  std::vector<Node*> ready, order, next;
  order.reserve(nodes_.size());
  for (Node& n : nodes_) {
    uint32_t deps = 0;
    for (Value* v : n.inputs_)
      if (v && v->producer_) ++deps;
    pending[n.ordinal_] = deps;
    if (deps == 0) ready.push_back(&n);
  }
  std::reverse(ready.begin(), ready.end());
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    order.push_back(n);
    next.clear();
    for (Value* out : n->outputs_)
      for (const Use& u : out->uses_)
        if (--pending[u.node->ordinal_] == 0) next.push_back(u.node);
    for (auto it = next.rbegin(); it != next.rend(); ++it) ready.push_back(*it);
  }
  if (order.size() != nodes_.size()) {
    for (const Node& n : nodes_)
      if (pending[n.ordinal_] != 0)
        throw Error(cat("graph '", name, "' has a cycle (or an input produced by a missing node) through ",
                        n.describe()));
  }
  return order;
}

Value* Graph::find_value(const std::string& n) const {
  index();
  auto it = value_by_name_.find(n);
  return it == value_by_name_.end() ? nullptr : it->second;
}

Node* Graph::find_node(const std::string& n) const {
  index();
  if (!node_names_.count(n)) return nullptr;  // O(1) for a name no node has (the frontend's check)
  for (Node& node : nodes_)
    if (node.name() == n) return &node;
  return nullptr;
}

bool Graph::is_output(const Value* v) const {
  return std::find(outputs_.begin(), outputs_.end(), v) != outputs_.end();
}

// ---------------- mutation ----------------

void Graph::remove_use(Value* v, Node* node, size_t i) {
  auto& u = v->uses_;
  u.erase(std::remove(u.begin(), u.end(), Use{node, i}), u.end());
}

void Graph::set_node_input(Node* node, size_t i, Value* v) {
  if (i >= node->inputs_.size()) node->inputs_.resize(i + 1, nullptr);
  if (Value* old = node->inputs_[i]) remove_use(old, node, i);
  node->inputs_[i] = v;
  if (v) v->uses_.push_back(Use{node, i});
}

void Graph::append_node_input(Node* node, Value* v) { set_node_input(node, node->inputs_.size(), v); }

void Graph::replace_all_uses(Value* from, Value* to) {
  if (from == to) return;
  auto uses = from->uses_;
  for (const Use& u : uses) set_node_input(u.node, u.input_index, to);
  for (auto& o : outputs_)
    if (o == from) o = to;
}

void Graph::erase_node(Node* node) {
  for (Value* out : node->outputs_) {
    KILN_CHECK(out->uses_.empty() && !is_output(out),
               cat("cannot erase ", node->describe(), ": its output '", out->name(), "' is still used"));
  }
  for (size_t i = 0; i < node->inputs_.size(); ++i)
    if (node->inputs_[i]) remove_use(node->inputs_[i], node, i);
  names_changed();
  const bool indexed = indexed_.load(std::memory_order_relaxed);  // else index() starts afresh
  for (Value* out : node->outputs_) {
    if (indexed) value_by_name_.erase(out->name());
    values_.erase(out->pos_);
  }
  if (indexed)
    if (auto named = node_names_.find(node->name()); named != node_names_.end() && --named->second == 0)
      node_names_.erase(named);
  nodes_.erase(node->pos_);  // node is freed here
}

Node* Graph::replace_node(Node* old, const std::string& op_type, const std::vector<Value*>& inputs,
                          const std::string& domain) {
  Node* n = add_node(op_type, inputs, old->num_outputs(), old->name() + "/" + op_type, domain);
  for (size_t i = 0; i < old->num_outputs(); ++i) {
    n->outputs_[i]->type = old->outputs_[i]->type;
    replace_all_uses(old->outputs_[i], n->outputs_[i]);
  }
  std::string name = old->name();
  erase_node(old);
  if (indexed_.load(std::memory_order_relaxed) && --node_names_[n->name()] == 0) node_names_.erase(n->name());
  n->name_ = name;
  if (indexed_.load(std::memory_order_relaxed)) ++node_names_[name];
  return n;
}

void Graph::remove_dead() {
  std::vector<char> live(next_ordinal_, 0);  // by Node::ordinal_ (a plan's graph runs this too)
  std::vector<const Value*> stack(outputs_.begin(), outputs_.end());
  while (!stack.empty()) {
    const Value* v = stack.back();
    stack.pop_back();
    if (v && v->producer_ && !live[v->producer_->ordinal_]) {
      live[v->producer_->ordinal_] = 1;
      for (Value* in : v->producer_->inputs_) stack.push_back(in);
    }
  }
  auto order = topo_order();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* n = *it;
    if (live[n->ordinal_]) continue;
    for (size_t i = 0; i < n->inputs_.size(); ++i)
      if (n->inputs_[i]) remove_use(n->inputs_[i], n, i);
    n->inputs_.clear();
    for (Value* out : n->outputs_) out->uses_.clear();
    // outputs of dead nodes may only be used by other dead nodes, already detached
    erase_node(n);
  }
  names_changed();
  const bool indexed = indexed_.load(std::memory_order_relaxed);
  values_.remove_if([&](const Value& v) {
    bool dead = v.is_constant() && v.uses_.empty() && !is_output(&v) && !v.producer_;
    if (dead && indexed) value_by_name_.erase(v.name());
    return dead;
  });
}

}  // namespace kiln::ir

namespace kiln::ir {

std::vector<std::string> capture_names(const Node& n) {
  return n.has_attr("kiln_captures") ? n.attr_strings("kiln_captures") : std::vector<std::string>{};
}

size_t capture_input(const Node& n, const std::string& name) {
  const std::vector<std::string> names = capture_names(n);
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end() || names.size() > n.num_inputs()) return std::string::npos;
  return n.num_inputs() - names.size() + static_cast<size_t>(it - names.begin());
}

void Graph::name_unknown_dims(PartialShape& s) {
  for (Dim& d : s.dims)
    if (d.is_unknown()) d = Dim::sym("?" + std::to_string(++dim_counter_));
}

void Graph::index() const {
  if (indexed_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(index_mutex_);
  if (indexed_.load(std::memory_order_relaxed)) return;
  value_by_name_.clear();
  node_names_.clear();
  value_by_name_.reserve(values_.size());
  node_names_.reserve(nodes_.size());
  for (Value& v : values_) value_by_name_.emplace(v.name(), &v);
  for (const Node& n : nodes_) ++node_names_[n.name()];
  inherited_names_.reset();  // the indexes know every name from now on
  added_names_.clear();
  indexed_.store(true, std::memory_order_release);
}

std::shared_ptr<Graph> Graph::clone(Shapes shapes) const {
  // Built directly rather than through add_input / add_node: the names are this graph's, unique
  // already, and every new input shape of a model whose shapes vary clones its template.
  auto g = std::make_shared<Graph>();
  g->name = name;
  g->opset_imports = opset_imports;
  g->name_counter_ = name_counter_;
  PointerMap<Value, Value*> twins(values_.size());  // each value's copy, by the original
  auto twin = [&](const Value* v) {
    Value** t = twins.find(v);
    KILN_CHECK(t, cat("graph '", name, "': clone found a node input that no node or input defines"));
    return *t;
  };
  g->indexed_ = false;  // the name indexes: built if the copy is ever asked (index())
  g->inherited_names_ = name_set();  // what unique_name and new_value check meanwhile
  auto copy = [&](const Value& v) {
    Value* p = &g->values_.emplace_back();
    p->name_ = v.name_;
    if (shapes == Shapes::all || !v.producer_) {
      p->type = v.type;
    } else {
      p->type.dtype = v.type.dtype;
      p->type.kind = v.type.kind;
      p->type.elem_kind = v.type.elem_kind;  // the shape stays unknown until inferred
    }
    p->constant_ = v.constant_;
    p->uses_.reserve(v.uses_.size());  // filled as the readers are copied: one allocation
    p->pos_ = std::prev(g->values_.end());
    twins.set(&v, p);
    return p;
  };
  for (Value* in : inputs_) {
    Value* c = copy(*in);
    c->is_input_ = true;
    g->inputs_.push_back(c);
  }
  for (const Value& v : values_)
    if (v.is_constant() && !v.producer_ && !v.is_input_) copy(v);
  for (Node* n : topo_order()) {
    Node* p = &g->nodes_.emplace_back();
    p->name_ = n->name_;
    p->op_type_ = n->op_type_;
    p->domain_ = n->domain_;
    p->opset_ = n->opset_;
    p->attrs = n->attrs;
    p->ordinal_ = g->next_ordinal_++;
    p->pos_ = std::prev(g->nodes_.end());
    p->inputs_.reserve(n->inputs_.size());
    for (size_t i = 0; i < n->inputs_.size(); ++i) {
      Value* in = n->inputs_[i] ? twin(n->inputs_[i]) : nullptr;
      p->inputs_.push_back(in);
      if (in) in->uses_.push_back(Use{p, i});
    }
    p->outputs_.reserve(n->outputs_.size());
    for (size_t i = 0; i < n->outputs_.size(); ++i) {
      Value* o = copy(*n->outputs_[i]);
      o->producer_ = p;
      o->producer_output_ = i;
      p->outputs_.push_back(o);
    }
  }
  for (Value* o : outputs_) g->add_output(twin(o));
  return g;
}

}  // namespace kiln::ir
