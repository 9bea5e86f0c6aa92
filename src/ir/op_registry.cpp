#include "ir/op_registry.hpp"

#include "ir/onnx_versions.hpp"

#include <algorithm>
#include <cstring>

#include <mutex>

namespace kiln::ir {

// ---------------- contexts ----------------

const ValueType& InferContext::input_type(size_t i) const {
  Value* v = node_.input(i);
  if (!v) throw error("input ", i, " is required here but absent");
  return v->type;
}

const Tensor* InferContext::input_constant(size_t i) const {
  Value* v = node_.input(i);
  return v && v->is_constant() ? &v->constant() : nullptr;
}

void InferContext::set_output(size_t i, DType dtype, PartialShape shape) {
  ValueType t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  set_output_type(i, std::move(t));
}

void InferContext::set_output_type(size_t i, ValueType type) {
  if (i >= node_.num_outputs() || !node_.output(i)) return;  // optional output not requested
  node_.output(i)->type = std::move(type);
}

const Tensor& RunContext::input(size_t i) const {
  if (!has_input(i)) throw error("input ", i, " is required here but absent");
  // the one door tensor kernels read through: a sequence / optional never reaches them
  if (!inputs_[i]->is_tensor())
    throw error("input ", i, " is a ", inputs_[i]->kind() == ValueKind::sequence ? "sequence" : "optional",
                ", this op takes tensors");
  return *inputs_[i];
}

const Tensor& RunContext::value(size_t i) const {
  if (!has_input(i)) throw error("input ", i, " is required here but absent");
  return *inputs_[i];
}

namespace {
thread_local uint64_t t_tensor_limit = 0;
}

TensorLimit::TensorLimit(uint64_t bytes) : previous_(t_tensor_limit) { t_tensor_limit = bytes; }
TensorLimit::~TensorLimit() { t_tensor_limit = previous_; }
uint64_t TensorLimit::current() { return t_tensor_limit; }

void RunContext::check_bytes(long double bytes, const std::string& what) const {
  const uint64_t limit = t_tensor_limit;
  if (limit && bytes > static_cast<long double>(limit))
    throw error(what, " would take ", static_cast<double>(bytes / (1u << 30)), " GiB at run time, more than kiln_max_tensor_bytes = ",
                limit, " (the machine's memory unless set)");
}

namespace {
// allocate_output's work; `zeroed` false leaves the bytes as they are.
Tensor& place_output(RunContext& ctx, std::vector<Tensor>& outputs, size_t i, DType dtype, Shape shape, bool zeroed) {
  if (i >= outputs.size()) throw ctx.error("kernel wrote output ", i, " but the node has ", outputs.size());
  if (t_tensor_limit && dtype != DType::string) {
    long double bytes = static_cast<long double>(dtype_size(dtype));
    for (int64_t d : shape) bytes *= static_cast<long double>(d);
    ctx.check_bytes(bytes, cat("output ", i, " ", shape_to_string(shape), " ", dtype_name(dtype)));
  }
  Tensor& out = outputs[i];
  if (out.defined() && out.is_tensor() && dtype != DType::string && out.dtype() == dtype && out.shape() == shape) {
    // A destination the caller placed (e.g. an arena buffer): zeroed like a new tensor.
    if (zeroed && out.byte_size()) std::memset(out.raw(), 0, out.byte_size());
    return out;
  }
  out = zeroed ? Tensor(dtype, std::move(shape)) : Tensor::uninitialized(dtype, std::move(shape));
  return out;
}
}  // namespace

Tensor& RunContext::allocate_output(size_t i, DType dtype, Shape shape) {
  return place_output(*this, outputs_, i, dtype, std::move(shape), true);
}

Tensor& RunContext::allocate_output_unzeroed(size_t i, DType dtype, Shape shape) {
  return place_output(*this, outputs_, i, dtype, std::move(shape), false);
}

void RunContext::set_output(size_t i, Tensor t) {
  if (i >= outputs_.size()) throw error("kernel wrote output ", i, " but the node has ", outputs_.size());
  outputs_[i] = std::move(t);
}

// ---------------- registry ----------------

namespace {

struct Providers {
  std::mutex mu;
  std::vector<OpRegistry::Provider> list;
  OpRegistry* registry = nullptr;  // once instance() has made it
};

Providers& providers() {
  static Providers p;
  return p;
}

}  // namespace

bool OpRegistry::add_provider(Provider p) {
  Providers& ps = providers();
  std::lock_guard<std::mutex> lock(ps.mu);
  if (ps.registry) p(*ps.registry);  // a provider that arrives late still lands
  else ps.list.push_back(p);
  return true;
}

OpRegistry& OpRegistry::instance() {
  static OpRegistry* reg = [] {
    auto* r = new OpRegistry();  // never destroyed: static destructors may still look ops up
    Providers& ps = providers();
    std::lock_guard<std::mutex> lock(ps.mu);
    for (Provider p : ps.list) p(*r);
    ps.registry = r;
    return r;
  }();
  return *reg;
}

void OpRegistry::add(OpSchema schema) {
  auto key = std::make_pair(schema.domain, schema.name);
  auto it = ops_.find(key);
  if (it != ops_.end()) {
    it->second = std::move(schema);  // the index's entry points at it already
    return;
  }
  it = ops_.emplace(std::move(key), std::move(schema)).first;
  by_name_[it->first.second].emplace_back(it->first.first, &it->second);
}

const OpSchema* OpRegistry::find(const std::string& domain, const std::string& name) const {
  const std::string_view d = domain == "ai.onnx" ? std::string_view() : std::string_view(domain);
  auto it = by_name_.find(std::string_view(name));
  if (it == by_name_.end()) return nullptr;
  for (const auto& [dom, schema] : it->second)
    if (dom == d) return schema;
  return nullptr;
}

OpSchema* OpRegistry::find_mutable(const std::string& domain, const std::string& name) {
  auto it = ops_.find({domain == "ai.onnx" ? "" : domain, name});
  return it == ops_.end() ? nullptr : &it->second;
}

std::vector<const OpSchema*> OpRegistry::all() const {
  std::vector<const OpSchema*> out;
  for (auto& [k, v] : ops_) out.push_back(&v);
  return out;
}

namespace {

// The ONNX revisions of a default-domain schema's op (null for other domains or an op ONNX does
// not list), and the newest of them kiln implements.
const std::vector<int>* onnx_revisions(const OpSchema& s) {
  if (!s.domain.empty()) return nullptr;
  const auto& table = onnx_op_versions();
  auto it = table.find(s.name);
  return it == table.end() ? nullptr : &it->second;
}
// unset max_version: the revisions up to opset 17, or the first one of an operator added later
int version_cap(const OpSchema& s) { return s.max_version != 0 ? s.max_version : std::max(17, s.since_version); }

// implemented_versions(s).back(), or 0 when it is empty, without building the list (asked for
// every node validated)
int newest_implemented(const OpSchema& s) {
  int found = 0;
  if (const std::vector<int>* revs = onnx_revisions(s))
    for (int v : *revs)
      if (v <= version_cap(s)) found = std::max(found, v);
  return found;
}

}  // namespace

std::vector<int> implemented_versions(const OpSchema& s) {
  std::vector<int> out;
  if (const std::vector<int>* revs = onnx_revisions(s))
    for (int v : *revs)
      if (v <= version_cap(s)) out.push_back(v);
  return out;
}

const OpSchema& validate_node(const Node& node) {
  const OpSchema* s = OpRegistry::instance().find(node.domain(), node.op_type());
  if (!s) {
    throw Error(cat("unsupported op '", node.op_type(), "' (domain '",
                    node.domain().empty() ? "ai.onnx" : node.domain(), "', opset ", node.opset(), ") at ",
                    node.describe()));
  }
  if (node.opset() != 0 && node.opset() < s->since_version)
    throw Error(cat(node.describe(), ": op ", node.op_type(), " needs opset >= ", s->since_version,
                    ", the model imports opset ", node.opset()));
  if (s->domain.empty() && node.opset() != 0) {
    const int asked = onnx_op_version(node.op_type(), node.opset());
    const int have = newest_implemented(*s);
    if (asked != 0 && have != 0 && asked > have)
      throw Error(cat(node.describe(), ": version ", asked, " of ", node.op_type(), " (the model imports opset ",
                      node.opset(), ") is not implemented; kiln implements ", node.op_type(), " versions ",
                      join(implemented_versions(*s), ", ")));
  }
  size_t nin = node.num_inputs();
  KILN_CHECK(nin >= s->min_inputs && nin <= s->max_inputs,
             cat(node.describe(), ": expected ", s->min_inputs,
                 s->max_inputs == s->min_inputs ? std::string() : cat("..", s->max_inputs), " inputs, got ", nin));
  for (size_t i = 0; i < s->min_inputs; ++i)
    KILN_CHECK(node.has_input(i) || std::count(s->optional_inputs.begin(), s->optional_inputs.end(), i),
               cat(node.describe(), ": required input ", i, " is missing"));
  size_t nout = node.num_outputs();
  KILN_CHECK(nout >= s->min_outputs && nout <= s->max_outputs,
             cat(node.describe(), ": expected ", s->min_outputs,
                 s->max_outputs == s->min_outputs ? std::string() : cat("..", s->max_outputs), " outputs, got ",
                 nout));
  for (auto& [name, attr] : node.attrs) {
    const AttrSpec* spec = nullptr;
    for (auto& a : s->attrs)
      if (a.name == name) spec = &a;
    KILN_CHECK(spec, cat(node.describe(), ": unknown attribute '", name, "'"));
    KILN_CHECK(spec->type == attr.type(), cat(node.describe(), ": attribute '", name, "' must be ",
                                              attr_type_name(spec->type), ", got ", attr_type_name(attr.type())));
  }
  for (auto& a : s->attrs)
    KILN_CHECK(!a.required || node.has_attr(a.name),
               cat(node.describe(), ": missing required attribute '", a.name, "'"));
  if (s->validate) s->validate(node);
  return *s;
}

// Where inference could not tell (unknown rank or dim), keep what the model declared.
static ValueType merge_declared(const ValueType& inferred, const ValueType& declared) {
  ValueType t = inferred;
  if (t.dtype == DType::undefined) t.dtype = declared.dtype;
  if (!t.shape.rank_known) {
    t.shape = declared.shape;
  } else if (declared.shape.rank_known && declared.shape.rank() == t.shape.rank()) {
    for (size_t i = 0; i < t.shape.rank(); ++i)
      if (t.shape.dims[i].is_unknown()) t.shape.dims[i] = declared.shape.dims[i];
  }
  return t;
}

// An 8- / 4-bit value given to an op that does not compute with those types: refused by name.
static void check_narrow_inputs(const Node& n, const OpSchema& s) {
  if (s.takes_narrow_types) return;
  for (size_t i = 0; i < n.num_inputs(); ++i) {
    const Value* v = n.input(i);
    if (!v || !is_narrow(v->type.dtype)) continue;
    throw Error(cat(n.describe(), ": input ", i, " '", v->name(), "' is ", dtype_name(v->type.dtype), "; ",
                    n.op_type(), " does not take the 8- and 4-bit types (kiln converts them in Cast, CastLike, ",
                    "QuantizeLinear and DequantizeLinear and moves them through Identity, Reshape, Transpose and ",
                    "the like): convert it with Cast or DequantizeLinear first"));
  }
}

void infer_shapes(Graph& graph) {
  std::vector<ValueType> declared;
  for (Value* v : graph.outputs()) declared.push_back(v->type);
  for (Node* n : graph.topo_order()) {
    const OpSchema& s = validate_node(*n);
    if (!s.infer) throw Error(cat(n->describe(), ": op has no shape inference"));
    check_narrow_inputs(*n, s);
    InferContext ctx(*n);
    s.infer(ctx);
    if (graph.names_unknown_dims)
      for (Value* o : n->outputs())
        if (o && o->type.kind == ValueKind::tensor) graph.name_unknown_dims(o->type.shape);
  }
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    Value* v = graph.outputs()[i];
    if (v->producer()) v->type = merge_declared(v->type, declared[i]);
  }
}

}  // namespace kiln::ir
