#include "ir/serialize.hpp"

#include <cstring>
#include <unordered_set>

#include "core/strings.hpp"

namespace kiln::ir {

// ---------------- ByteReader ----------------

void ByteReader::fail(const std::string& why) const { throw Error(cat(what_, ": ", why, " (at byte ", at_, ")")); }

void ByteReader::need(size_t n) const {
  if (n > in_.size() - at_) fail(cat("ends early: ", n, " more bytes needed, ", in_.size() - at_, " left"));
}

std::string ByteReader::str() {
  const uint64_t n = u64();
  need(n);
  std::string s(in_.data() + at_, n);
  at_ += n;
  return s;
}

uint64_t ByteReader::count(size_t min_item_bytes) {
  const uint64_t n = u64();
  if (n > (in_.size() - at_) / std::max<size_t>(min_item_bytes, 1)) fail(cat("a count of ", n, " cannot fit"));
  return n;
}

namespace {

// Format tags: a reader meeting anything else stops with an error.
enum class Tag : uint8_t { value_none = 0, value_ref = 1 };

std::shared_ptr<Graph> read_graph_at(ByteReader& r, const GetTensor& get, int depth);

// ---------------- writing ----------------

void write_dtype(ByteWriter& w, DType d) { w.u8(static_cast<uint8_t>(d)); }

void write_type(ByteWriter& w, const ValueType& t) {
  write_dtype(w, t.dtype);
  w.u8(static_cast<uint8_t>(t.kind));
  w.u8(static_cast<uint8_t>(t.elem_kind));
  w.u8(t.shape.rank_known ? 1 : 0);
  w.u64(t.shape.dims.size());
  for (const Dim& d : t.shape.dims) {
    w.i64(d.value);
    w.str(d.symbol);
  }
}

void write_tensor(ByteWriter& w, const Tensor& t, const std::string& what, const PutTensor& put) {
  if (!t.is_tensor() || t.dtype() == DType::string || t.dtype() == DType::undefined)
    throw Error(cat(what, ": a ", t.is_tensor() ? dtype_name(t.dtype()) : "sequence or optional",
                    " constant, which the model cache does not store"));
  write_dtype(w, t.dtype());
  w.u64(t.shape().size());
  for (int64_t d : t.shape()) w.i64(d);
  w.u64(put(t));
}

void write_attribute(ByteWriter& w, const Attribute& a, const std::string& what, const PutTensor& put) {
  w.u8(static_cast<uint8_t>(a.type()));
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) w.i64(v);
        else if constexpr (std::is_same_v<T, float>) w.f32(v);
        else if constexpr (std::is_same_v<T, std::string>) w.str(v);
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          w.u64(v.size());
          for (int64_t x : v) w.i64(x);
        } else if constexpr (std::is_same_v<T, std::vector<float>>) {
          w.u64(v.size());
          for (float x : v) w.f32(x);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          w.u64(v.size());
          for (const std::string& x : v) w.str(x);
        } else if constexpr (std::is_same_v<T, Tensor>) {
          write_tensor(w, v, what, put);
        } else {
          static_assert(std::is_same_v<T, std::shared_ptr<Graph>>);
          if (!v) throw Error(cat(what, ": an empty graph attribute"));
          write_graph(*v, w, put);
        }
      },
      a.value);
}

void write_value_ref(ByteWriter& w, const Value* v) {
  if (!v) {
    w.u8(static_cast<uint8_t>(Tag::value_none));
    return;
  }
  w.u8(static_cast<uint8_t>(Tag::value_ref));
  w.str(v->name());
}

// ---------------- reading ----------------

DType read_dtype(ByteReader& r) {
  const uint8_t d = r.u8();
  if (d > static_cast<uint8_t>(kLastDType)) r.fail(cat("unknown element type ", int(d)));
  return static_cast<DType>(d);
}

ValueKind read_kind(ByteReader& r) {
  const uint8_t k = r.u8();
  if (k > static_cast<uint8_t>(ValueKind::optional)) r.fail(cat("unknown value kind ", int(k)));
  return static_cast<ValueKind>(k);
}

ValueType read_type(ByteReader& r) {
  ValueType t;
  t.dtype = read_dtype(r);
  t.kind = read_kind(r);
  t.elem_kind = read_kind(r);
  t.shape.rank_known = r.u8() != 0;
  const uint64_t rank = r.count(16);
  for (uint64_t i = 0; i < rank; ++i) {
    Dim d;
    d.value = r.i64();
    d.symbol = r.str();
    t.shape.dims.push_back(std::move(d));
  }
  return t;
}

Tensor read_tensor(ByteReader& r, const GetTensor& get) {
  const DType dt = read_dtype(r);
  if (dt == DType::string || dt == DType::undefined) r.fail("a string or untyped tensor");
  const uint64_t rank = r.count(8);
  Shape shape;
  uint64_t elements = 1;
  for (uint64_t i = 0; i < rank; ++i) {
    const int64_t d = r.i64();
    if (d < 0 || (d > 0 && elements > (uint64_t(1) << 62) / static_cast<uint64_t>(d))) r.fail("a bad tensor dim");
    elements *= static_cast<uint64_t>(d);
    shape.push_back(d);
  }
  const uint64_t id = r.u64();
  return get(id, dt, shape, static_cast<size_t>(elements) * dtype_size(dt));
}

Attribute read_attribute(ByteReader& r, const GetTensor& get, int depth) {
  const uint8_t type = r.u8();
  switch (static_cast<AttrType>(type)) {
    case AttrType::i:
      return Attribute(r.i64());
    case AttrType::f:
      return Attribute(r.f32());
    case AttrType::s:
      return Attribute(r.str());
    case AttrType::ints: {
      std::vector<int64_t> v(r.count(8));
      for (int64_t& x : v) x = r.i64();
      return Attribute(std::move(v));
    }
    case AttrType::floats: {
      std::vector<float> v(r.count(4));
      for (float& x : v) x = r.f32();
      return Attribute(std::move(v));
    }
    case AttrType::strings: {
      std::vector<std::string> v(r.count(8));
      for (std::string& x : v) x = r.str();
      return Attribute(std::move(v));
    }
    case AttrType::tensor:
      return Attribute(read_tensor(r, get));
    case AttrType::graph: {
      if (depth > 64) r.fail("subgraphs nested too deep");
      return Attribute(read_graph_at(r, get, depth + 1));
    }
  }
  r.fail(cat("unknown attribute type ", int(type)));
}

}  // namespace

void write_graph(const Graph& g, ByteWriter& w, const PutTensor& put) {
  w.str(g.name);
  w.u64(g.opset_imports.size());
  for (const auto& [domain, version] : g.opset_imports) {
    w.str(domain);
    w.i64(version);
  }
  w.u64(g.inputs().size());
  for (const Value* in : g.inputs()) {
    w.str(in->name());
    write_type(w, in->type);
  }
  // constants no node produces, in the order the nodes first read them
  std::vector<const Value*> constants;
  std::unordered_set<const Value*> seen;
  const std::vector<Node*> order = g.topo_order();
  auto note = [&](const Value* v) {
    if (v && v->is_constant() && !v->producer() && seen.insert(v).second) constants.push_back(v);
  };
  for (const Node* n : order)
    for (const Value* v : n->inputs()) note(v);
  for (const Value* v : g.outputs()) note(v);
  w.u64(constants.size());
  for (const Value* c : constants) {
    w.str(c->name());
    write_tensor(w, c->constant(), cat("constant '", c->name(), "'"), put);
  }
  // every value a node reads is the graph's own (a subgraph reading its outer graph's values
  // directly could not be read back alone)
  std::unordered_set<const Value*> defined(g.inputs().begin(), g.inputs().end());
  defined.insert(constants.begin(), constants.end());
  w.u64(order.size());
  for (const Node* n : order) {
    for (const Value* v : n->inputs())
      if (v && !defined.count(v))
        throw Error(cat(n->describe(), ": reads '", v->name(), "' from outside its graph, which the model cache does not store"));
    defined.insert(n->outputs().begin(), n->outputs().end());
    w.str(n->op_type());
    w.str(n->domain());
    w.str(n->name());
    w.i64(n->opset());
    w.u64(n->inputs().size());
    for (const Value* v : n->inputs()) write_value_ref(w, v);
    w.u64(n->outputs().size());
    for (const Value* o : n->outputs()) {
      w.str(o->name());
      write_type(w, o->type);
      w.u8(o->is_constant() ? 1 : 0);
      if (o->is_constant()) write_tensor(w, o->constant(), cat(n->describe(), ": output '", o->name(), "'"), put);
    }
    w.u64(n->attrs.size());
    for (const auto& [name, a] : n->attrs) {
      w.str(name);
      write_attribute(w, a, cat(n->describe(), ": attribute '", name, "'"), put);
    }
  }
  w.u64(g.outputs().size());
  for (const Value* o : g.outputs()) write_value_ref(w, o);
}

namespace {

std::shared_ptr<Graph> read_graph_at(ByteReader& r, const GetTensor& get, int depth) {
  auto g = std::make_shared<Graph>();
  g->name = r.str();
  for (uint64_t i = 0, n = r.count(16); i < n; ++i) {
    std::string domain = r.str();
    const int64_t version = r.i64();
    if (version < 0 || version > 1000) r.fail(cat("a bad opset version ", version));
    g->opset_imports[domain] = static_cast<int>(version);
  }
  auto fresh = [&](const std::string& name) {
    if (name.empty() || g->find_value(name)) r.fail(cat("value '", name, "' is empty or defined twice"));
  };
  for (uint64_t i = 0, n = r.count(12); i < n; ++i) {
    std::string name = r.str();
    fresh(name);
    g->add_input(name, read_type(r));
  }
  for (uint64_t i = 0, n = r.count(17); i < n; ++i) {
    std::string name = r.str();
    fresh(name);
    g->add_constant(name, read_tensor(r, get));
  }
  auto ref = [&](const std::string& where) -> Value* {
    const uint8_t tag = r.u8();
    if (tag == static_cast<uint8_t>(Tag::value_none)) return nullptr;
    if (tag != static_cast<uint8_t>(Tag::value_ref)) r.fail(cat(where, ": a bad value tag"));
    const std::string name = r.str();
    Value* v = g->find_value(name);
    if (!v) r.fail(cat(where, ": value '", name, "' is read before it is defined"));
    return v;
  };
  for (uint64_t i = 0, n = r.count(40); i < n; ++i) {
    std::string op = r.str(), domain = r.str(), name = r.str();
    const int64_t opset = r.i64();
    std::vector<Value*> inputs(r.count(1));
    for (Value*& v : inputs) v = ref(cat("node '", name, "'"));
    std::vector<std::string> outs(r.count(12));
    std::vector<ValueType> types(outs.size());
    std::vector<Tensor> constants(outs.size());
    for (size_t k = 0; k < outs.size(); ++k) {
      outs[k] = r.str();
      fresh(outs[k]);
      types[k] = read_type(r);
      if (r.u8()) constants[k] = read_tensor(r, get);
    }
    if (name.empty() || g->find_node(name)) r.fail(cat("node '", name, "' is unnamed or defined twice"));
    Node* node = g->add_node(op, {}, outs, name, domain);
    node->set_opset(static_cast<int>(opset));
    for (Value* v : inputs) g->append_node_input(node, v);
    for (size_t k = 0; k < outs.size(); ++k) {
      if (constants[k].defined()) node->output(k)->set_constant(std::move(constants[k]));
      node->output(k)->type = std::move(types[k]);
    }
    for (uint64_t a = 0, na = r.count(9); a < na; ++a) {
      std::string key = r.str();
      node->attrs[key] = read_attribute(r, get, depth);
    }
  }
  for (uint64_t i = 0, n = r.count(1); i < n; ++i) {
    Value* v = ref("graph outputs");
    if (!v) r.fail("an empty graph output");
    g->add_output(v);
  }
  return g;
}

}  // namespace

std::shared_ptr<Graph> read_graph(ByteReader& r, const GetTensor& get) { return read_graph_at(r, get, 0); }

}  // namespace kiln::ir
