#pragma once
// ir::Graph: the model-level graph. Values (edges) and Nodes (ops) are owned by the
// graph; constants own their data. Passes mutate it through the API below.
#include <kiln/tensor.hpp>

#include <atomic>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/attribute.hpp"
#include "ir/types.hpp"

namespace kiln::ir {

class Node;
class Graph;

struct Use {
  Node* node;
  size_t input_index;
  bool operator==(const Use& o) const { return node == o.node && input_index == o.input_index; }
};

// A value's or node's name, shared by a graph and its copies: clone() copies a pointer instead
// of the characters (a new input shape's graph is a copy of the template, hundreds of names
// most longer than a short string holds in place). Set whole, never edited in place.
class SharedName {
 public:
  SharedName& operator=(std::string s) {
    p_ = std::make_shared<const std::string>(std::move(s));
    return *this;
  }
  const std::string& str() const { return p_ ? *p_ : empty(); }

 private:
  static const std::string& empty();
  std::shared_ptr<const std::string> p_;
};

class Value {
 public:
  const std::string& name() const { return name_.str(); }
  ValueType type;

  Node* producer() const { return producer_; }
  size_t producer_output() const { return producer_output_; }
  const std::vector<Use>& uses() const { return uses_; }
  bool is_constant() const { return constant_.defined(); }
  const Tensor& constant() const { return constant_; }
  // Makes this value a constant (e.g. after folding); its dtype/shape follow the tensor.
  void set_constant(Tensor t);
  bool is_graph_input() const { return is_input_; }

 private:
  friend class Graph;
  SharedName name_;
  Node* producer_ = nullptr;
  size_t producer_output_ = 0;
  std::vector<Use> uses_;
  Tensor constant_;
  bool is_input_ = false;
  std::list<Value>::iterator pos_;  // where it sits in its graph's list (O(1) erase)
};

// A node's attributes: a std::map shared by a graph and its copies until one of them writes.
// clone() (a new input shape's graph is a copy of the template) copies a pointer; anything
// that may write (operator[], a non-const iterator, erase, emplace, insert, assignment) takes
// a private copy first when the map is shared. Read through a const Node it is never copied.
class AttrMap {
 public:
  using Map = std::map<std::string, Attribute, std::less<>>;  // found by string_view too
  using iterator = Map::iterator;
  using const_iterator = Map::const_iterator;

  AttrMap() = default;
  AttrMap(Map m) : p_(std::make_shared<Map>(std::move(m))) {}  // NOLINT: implicit, as the map
  AttrMap(std::initializer_list<Map::value_type> l) : p_(std::make_shared<Map>(l)) {}
  AttrMap& operator=(Map m) {
    p_ = std::make_shared<Map>(std::move(m));
    return *this;
  }
  using PlainMap = std::map<std::string, Attribute>;  // as code elsewhere spells an attribute map
  AttrMap(const PlainMap& m) : p_(std::make_shared<Map>(m.begin(), m.end())) {}  // NOLINT
  AttrMap& operator=(const PlainMap& m) {
    p_ = std::make_shared<Map>(m.begin(), m.end());
    return *this;
  }
  explicit operator PlainMap() const { return PlainMap(begin(), end()); }
  operator const Map&() const { return get(); }  // NOLINT: read as the map it is
  const Map& get() const { return p_ ? *p_ : none(); }

  // reads
  const_iterator begin() const { return get().begin(); }
  const_iterator end() const { return get().end(); }
  const_iterator find(std::string_view k) const { return get().find(k); }
  size_t count(std::string_view k) const { return get().count(k); }
  const Attribute& at(const std::string& k) const { return get().at(k); }
  size_t size() const { return get().size(); }
  bool empty() const { return get().empty(); }

  // writes (a private copy first when shared)
  iterator begin() { return own().begin(); }
  iterator end() { return own().end(); }
  iterator find(const std::string& k) { return own().find(k); }
  Attribute& at(const std::string& k) { return own().at(k); }
  Attribute& operator[](const std::string& k) { return own()[k]; }
  size_t erase(const std::string& k) { return own().erase(k); }
  // by the iterator's key: when the map was shared, own() copies it and `it` points into the
  // other owner's (still alive: it is shared), not this one's
  iterator erase(const_iterator it) {
    const std::string key = it->first;
    Map& m = own();
    return m.erase(m.find(key));
  }
  template <class... Args>
  std::pair<iterator, bool> emplace(Args&&... args) {
    return own().emplace(std::forward<Args>(args)...);
  }
  std::pair<iterator, bool> insert(Map::value_type v) { return own().insert(std::move(v)); }
  void clear() { p_.reset(); }

 private:
  static const Map& none();
  Map& own() {
    if (!p_) p_ = std::make_shared<Map>();
    else if (p_.use_count() > 1) p_ = std::make_shared<Map>(*p_);
    return *p_;
  }
  std::shared_ptr<Map> p_;
};

class Node {
 public:
  const std::string& name() const { return name_.str(); }
  const std::string& op_type() const { return op_type_; }
  const std::string& domain() const { return domain_; }
  // The default ONNX domain, however the model names it ("" or "ai.onnx").
  bool is_onnx_domain() const { return domain_.empty() || domain_ == "ai.onnx"; }
  // Version of the op's domain that the model imports (ONNX opset); kernels may
  // read it where semantics changed across versions.
  int opset() const { return opset_; }
  void set_opset(int v) { opset_ = v; }

  size_t num_inputs() const { return inputs_.size(); }
  size_t num_outputs() const { return outputs_.size(); }
  // nullptr for an omitted optional input.
  Value* input(size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
  bool has_input(size_t i) const { return input(i) != nullptr; }
  Value* output(size_t i) const { return outputs_.at(i); }
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }

  AttrMap attrs;
  bool has_attr(std::string_view n) const { return attrs.count(n) != 0; }
  // Typed getters: throw kiln::Error naming the node if the attribute is missing
  // (no default given) or has another type.
  int64_t attr_i(std::string_view n) const;
  int64_t attr_i(std::string_view n, int64_t def) const;
  float attr_f(std::string_view n) const;
  float attr_f(std::string_view n, float def) const;
  std::string attr_s(std::string_view n) const;
  std::string attr_s(std::string_view n, const std::string& def) const;
  std::vector<int64_t> attr_ints(std::string_view n) const;
  std::vector<int64_t> attr_ints(std::string_view n, const std::vector<int64_t>& def) const;
  std::vector<float> attr_floats(std::string_view n) const;
  std::vector<float> attr_floats(std::string_view n, const std::vector<float>& def) const;
  std::vector<std::string> attr_strings(std::string_view n) const;
  // The attribute's value in place, or null when absent (throws on another type): for code
  // that reads the same attributes of every node for every new input shape, without a copy
  const std::vector<int64_t>* find_ints(std::string_view n) const;
  const std::string* find_string(std::string_view n) const;
  const Tensor& attr_tensor(std::string_view n) const;
  std::shared_ptr<Graph> attr_graph(std::string_view n) const;

  // "node 'conv_1' (Conv)" — used as the prefix of every error message about it.
  std::string describe() const;

 private:
  friend class Graph;
  template <typename T>
  const T& get(std::string_view n) const;
  template <typename T>
  const T* get_if_present(std::string_view n) const;
  SharedName name_;
  std::string op_type_, domain_;
  int opset_ = 0;
  uint32_t ordinal_ = 0;  // its graph's count of nodes added before it (topo_order's index)
  std::list<Node>::iterator pos_;  // where it sits in its graph's list (O(1) erase)
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  std::string name;
  // Domain -> version the model imports ("" is the default ONNX domain).
  std::map<std::string, int> opset_imports;

  // --- construction ---
  Value* add_input(const std::string& name, ValueType type);
  Value* add_constant(const std::string& name, Tensor t);
  // Creates a node; output values are named `output_names` (generated when empty).
  Node* add_node(const std::string& op_type, const std::vector<Value*>& inputs,
                 const std::vector<std::string>& output_names, const std::string& name = "",
                 const std::string& domain = "");
  Node* add_node(const std::string& op_type, const std::vector<Value*>& inputs, size_t num_outputs,
                 const std::string& name = "", const std::string& domain = "");
  void add_output(Value* v);
  void set_output(size_t i, Value* v);

  // Deep copy of the structure (nodes, values, types, attributes). Constant tensors and
  // subgraph bodies are shared with the original (both are treated as immutable).
  // Shapes::inputs_and_constants leaves the shapes of computed values unknown (rank too):
  // for a copy whose shapes inference computes again right away (a new input shape's copy of
  // the template), where copying the symbolic ones would be thrown away.
  enum class Shapes { all, inputs_and_constants };
  std::shared_ptr<Graph> clone(Shapes shapes = Shapes::all) const;

  // --- queries ---
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  size_t num_nodes() const { return nodes_.size(); }
  std::vector<Node*> nodes() const;  // insertion order
  std::vector<Node*> topo_order() const;  // throws kiln::Error on a cycle
  Value* find_value(const std::string& name) const;  // nullptr if absent
  Node* find_node(const std::string& name) const;
  bool is_output(const Value* v) const;
  std::string unique_name(const std::string& prefix);
  int opset_for(const std::string& domain) const;

  // Set on a graph whose dims stay symbolic while the passes run (transforms::specialize_symbolic):
  // a dim inference cannot compute then gets a symbol of its own ("?1", "?2", ...) instead of
  // staying unknown, so two dims compare equal only when they are equal for every shape. Not
  // copied by clone() (a copy specialised to static shapes has no such dims).
  bool names_unknown_dims = false;
  void name_unknown_dims(PartialShape& s);  // gives each unknown dim of `s` a fresh symbol

  // --- mutation (what passes use) ---
  // Rewire one consumer: node's input i now reads `v` (nullptr = omit).
  void set_node_input(Node* node, size_t i, Value* v);
  void append_node_input(Node* node, Value* v);
  // Every consumer of `from` (and graph outputs) now reads `to`.
  void replace_all_uses(Value* from, Value* to);
  // Removes a node whose outputs have no uses and are not graph outputs.
  void erase_node(Node* node);
  // Replaces `old` by a new node of `op_type` over `inputs`; old outputs' uses move to
  // the new node's outputs (same count). Returns the new node.
  Node* replace_node(Node* old, const std::string& op_type, const std::vector<Value*>& inputs,
                     const std::string& domain = "");
  // Removes nodes and constants that no graph output depends on.
  void remove_dead();

 private:
  Value* new_value(const std::string& name);
  static void remove_use(Value* v, Node* node, size_t i);
  // Nodes and values live in the lists' own elements (one allocation each, not a list element
  // and an object: a new input shape's graph is a copy of the template, hundreds of each).
  // Const queries hand out mutable pointers, as the graph's API always has: mutable.
  mutable std::list<Node> nodes_;
  uint32_t next_ordinal_ = 0;  // Node::ordinal_ of the next node added
  mutable std::list<Value> values_;
  // The name indexes below, built on first use in a copy made by clone() (a new input shape's
  // graph is specialised and lowered without ever looking a name up). index() builds them;
  // everything that reads or updates them calls it first (const readers may race: the lock).
  void index() const;
  mutable std::atomic<bool> indexed_{true};
  mutable std::mutex index_mutex_;
  // how many nodes carry each name (names need not be unique), for unique_name
  mutable std::unordered_map<std::string, size_t> node_names_;
  // keyed by views of the values' own names (a value keeps its name for life; its entry goes
  // before it does): no second copy of every name
  mutable std::unordered_map<std::string_view, Value*> value_by_name_;
  // A copy's names without the indexes above: the names it was made with (its original's
  // name_set(), shared by every copy of it) and those given since. unique_name and new_value
  // check a new name against these two sets (a superset of the copy's names: a removed name
  // stays taken), and build the indexes only for a name found there, so a new input shape's
  // copy of the template that folds a few shape computations into constants builds no index
  // of its hundreds of names (11% of a BERT-6 plan's instructions did). Null: indexes only.
  using NameSet = std::unordered_set<std::string>;
  mutable std::shared_ptr<const NameSet> inherited_names_;  // (index() drops both)
  mutable NameSet added_names_;
  bool name_taken_in_sets(const std::string& n) const { return inherited_names_->count(n) || added_names_.count(n); }
  // Every value's and node's name, built once and kept until a name is added or removed (a
  // template, copied for every new input shape, never changes).
  std::shared_ptr<const NameSet> name_set() const;
  void names_changed() { name_set_.reset(); }
  mutable std::shared_ptr<const NameSet> name_set_;  // under index_mutex_
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  size_t name_counter_ = 0;
  size_t dim_counter_ = 0;  // name_unknown_dims
};

// Captures: the body of a control-flow node (If, Loop, Scan, SequenceMap) reads values of the
// enclosing graph by name. The frontend appends those values to the node's inputs and lists
// their names in its `kiln_captures` attribute; the body has an input of each name after its
// declared ones.
std::vector<std::string> capture_names(const Node& n);
// The index of the node input that feeds the body input named `name`, or npos when that is
// not a capture.
size_t capture_input(const Node& n, const std::string& name);

}  // namespace kiln::ir
