#include "frontend/onnx/onnx_frontend.hpp"

#include <kiln/error.hpp>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <algorithm>
#include <fstream>
#include <map>
#include <unordered_map>

#include "core/strings.hpp"
#include "frontend/onnx/opset_normalize.hpp"
#include "ir/onnx_versions.hpp"
#include "frontend/onnx/tensor_proto.hpp"

namespace kiln::frontend {

namespace {

constexpr int kMinOpset = 1;
constexpr int kMaxOpset = ir::kMaxOnnxOpset;  // ONNX 1.18

ir::ValueType value_type_from_proto(const onnx::ValueInfoProto& vi) {
  ir::ValueType ty;
  const onnx::TypeProto* tpp = &vi.type();
  if (tpp->value_case() == onnx::TypeProto::VALUE_NOT_SET) return ty;  // untyped (allowed in subgraphs)
  // optional(tensor | sequence(tensor)), sequence(tensor): the kinds, then the tensor type
  if (tpp->has_optional_type()) {
    ty.kind = ValueKind::optional;
    tpp = &tpp->optional_type().elem_type();
    if (tpp->has_sequence_type()) ty.elem_kind = ValueKind::sequence;
  }
  if (tpp->has_sequence_type()) {
    if (ty.kind == ValueKind::tensor) ty.kind = ValueKind::sequence;
    tpp = &tpp->sequence_type().elem_type();
  }
  KILN_CHECK(tpp->value_case() == onnx::TypeProto::VALUE_NOT_SET || tpp->has_tensor_type(),
             cat("graph input/output '", vi.name(), "' has a type kiln does not support (maps, sparse tensors, ",
                 "sequences of sequences)"));
  if (!tpp->has_tensor_type()) return ty;
  const auto& tt = tpp->tensor_type();
  if (tt.elem_type() == onnx::TensorProto::UNDEFINED) return ty;
  ty.dtype = dtype_from_onnx(tt.elem_type(), cat("graph input/output '", vi.name(), "'"));
  if (!tt.has_shape()) return ty;  // unknown rank
  ty.shape = ir::PartialShape(std::vector<ir::Dim>{});
  for (const auto& d : tt.shape().dim()) {
    if (d.has_dim_value()) {
      KILN_CHECK(d.dim_value() >= 0, cat("graph input/output '", vi.name(), "' has a negative dim ", d.dim_value()));
      ty.shape.dims.emplace_back(d.dim_value());
    } else if (d.has_dim_param() && !d.dim_param().empty()) {
      ty.shape.dims.push_back(ir::Dim::sym(d.dim_param()));
    } else {
      ty.shape.dims.push_back(ir::Dim::unknown());
    }
  }
  return ty;
}

struct Scope;
std::shared_ptr<ir::Graph> build_graph(const onnx::GraphProto& gp, const std::map<std::string, int>& opsets,
                                       const std::string& base_dir, Scope* outer, std::vector<std::string>* captures);

// Name resolution across nested graphs. A body graph that reads a value of an
// enclosing graph gets a "capture" input of that name (appended after its declared
// inputs); the node owning the body receives the value as an extra input and lists
// the names in its `kiln_captures` attribute (see ops/control_flow.cpp).
struct Scope {
  ir::Graph* graph;
  Scope* parent;
  std::vector<std::string>* captures;  // names this graph captures from outside (null at top level)

  ir::Value* resolve(const std::string& name) {
    if (ir::Value* v = graph->find_value(name)) return v;
    if (!parent || !parent->resolve(name)) return nullptr;
    ir::Value* c = graph->add_input(name, ir::ValueType{});
    captures->push_back(name);
    return c;
  }
};

ir::Attribute attribute_from_proto(const onnx::AttributeProto& a, const std::string& where, const std::string& base_dir,
                                   const std::map<std::string, int>& opsets, Scope* scope,
                                   std::vector<std::string>* node_captures) {
  using AP = onnx::AttributeProto;
  switch (a.type()) {
    case AP::INT: return ir::Attribute(static_cast<int64_t>(a.i()));
    case AP::FLOAT: return ir::Attribute(a.f());
    case AP::STRING: return ir::Attribute(a.s());
    case AP::INTS: return ir::Attribute(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    case AP::FLOATS: return ir::Attribute(std::vector<float>(a.floats().begin(), a.floats().end()));
    case AP::STRINGS: return ir::Attribute(std::vector<std::string>(a.strings().begin(), a.strings().end()));
    case AP::TENSOR: return ir::Attribute(tensor_from_proto(a.t(), base_dir));
    case AP::TYPE_PROTO: {  // Optional's `type`: "tensor <elem code>" or "sequence <elem code>"
      const onnx::TypeProto* t = &a.tp();
      std::string kind = "tensor";
      if (t->has_sequence_type()) {
        kind = "sequence";
        t = &t->sequence_type().elem_type();
      }
      KILN_CHECK(t->has_tensor_type(), cat(where, ": attribute '", a.name(), "' is a type kiln does not support"));
      return ir::Attribute(cat(kind, " ", t->tensor_type().elem_type()));
    }
    case AP::GRAPH: {
      std::vector<std::string> caps;
      auto body = build_graph(a.g(), opsets, base_dir, scope, &caps);
      for (auto& c : caps)
        if (std::find(node_captures->begin(), node_captures->end(), c) == node_captures->end())
          node_captures->push_back(c);
      return ir::Attribute(body);
    }
    default: break;
  }
  throw Error(cat(where, ": attribute '", a.name(), "' has type ", AP::AttributeType_Name(a.type()), ", which is not supported"));
}

// Value of a Constant node (opset 1..17 forms).
Tensor constant_value(const onnx::NodeProto& n, const std::string& where, const std::string& base_dir) {
  KILN_CHECK(n.attribute_size() == 1, cat(where, ": Constant needs exactly one value attribute"));
  const auto& a = n.attribute(0);
  const std::string& k = a.name();
  if (k == "value") return tensor_from_proto(a.t(), base_dir);
  if (k == "value_float") return Tensor::scalar<float>(a.f());
  if (k == "value_int") return Tensor::scalar<int64_t>(a.i());
  if (k == "value_floats")
    return Tensor::from_vector<float>({a.floats().begin(), a.floats().end()}, Shape{a.floats_size()});
  if (k == "value_ints")
    return Tensor::from_vector<int64_t>({a.ints().begin(), a.ints().end()}, Shape{a.ints_size()});
  throw Error(cat(where, ": Constant attribute '", k, "' is not supported (string and sparse constants)"));
}

std::shared_ptr<ir::Graph> build_graph(const onnx::GraphProto& gp, const std::map<std::string, int>& opsets,
                                       const std::string& base_dir, Scope* outer, std::vector<std::string>* captures) {
  auto g = std::make_shared<ir::Graph>();
  g->name = gp.name();
  g->opset_imports = opsets;
  Scope scope{g.get(), outer, captures};
  // initializers, then graph inputs that are not initializers
  for (const auto& init : gp.initializer()) {
    KILN_CHECK(!init.name().empty(), "an initializer has no name");
    // the frontend owns the ModelProto: weights move out of it instead of being copied
    g->add_constant(init.name(), take_tensor_from_proto(const_cast<onnx::TensorProto&>(init), base_dir));
  }
  KILN_CHECK(gp.sparse_initializer_size() == 0, "sparse initializers are not supported");
  for (const auto& in : gp.input()) {
    if (ir::Value* v = g->find_value(in.name())) {
      KILN_CHECK(v->is_constant(), cat("graph input '", in.name(), "' is declared twice"));
      continue;  // an input with a default value: kiln treats it as the constant
    }
    g->add_input(in.name(), value_type_from_proto(in));
  }

  // nodes: create all nodes with their outputs first, then connect inputs, so that a
  // node order that is not topological still loads (the cycle check comes later).
  std::vector<std::pair<ir::Node*, const onnx::NodeProto*>> created;
  int index = 0;
  for (const auto& np : gp.node()) {
    std::string name = np.name().empty() ? cat(np.op_type(), "_", index) : np.name();
    ++index;
    std::string domain = np.domain() == "ai.onnx" ? "" : np.domain();
    std::string where = cat("node '", name, "' (", np.op_type(), ")");
    if (np.op_type() == "Constant" && domain.empty()) {
      KILN_CHECK(np.output_size() == 1, cat(where, ": Constant must have one output"));
      g->add_constant(np.output(0), constant_value(np, where, base_dir));
      continue;
    }
    KILN_CHECK(domain.empty() || g->opset_imports.count(domain),
               cat(where, ": domain '", domain, "' is not imported by the model"));
    std::vector<std::string> outs;
    for (const auto& o : np.output()) outs.push_back(o.empty() ? g->unique_name(name + "_unused") : o);
    KILN_CHECK(!g->find_node(name), cat("two nodes are named '", name, "'"));
    ir::Node* n = g->add_node(np.op_type(), {}, outs, name, domain);
    created.emplace_back(n, &np);
  }
  // attributes after every node's outputs exist, so bodies can resolve outer names
  std::vector<std::vector<std::string>> node_captures(created.size());
  for (size_t k = 0; k < created.size(); ++k) {
    auto& [n, np] = created[k];
    for (const auto& a : np->attribute()) {
      KILN_CHECK(!a.name().empty(), cat(n->describe(), ": attribute without a name"));
      n->attrs[a.name()] = attribute_from_proto(a, n->describe(), base_dir, opsets, &scope, &node_captures[k]);
    }
    if (!node_captures[k].empty()) n->attrs["kiln_captures"] = ir::Attribute(node_captures[k]);
  }
  for (size_t k = 0; k < created.size(); ++k) {
    auto& [n, np] = created[k];
    for (int i = 0; i < np->input_size(); ++i) {
      const std::string& in = np->input(i);
      if (in.empty()) {
        g->append_node_input(n, nullptr);
        continue;
      }
      ir::Value* v = scope.resolve(in);
      KILN_CHECK(v, cat(n->describe(), ": input '", in, "' is not produced by any node, initializer or graph input"));
      g->append_node_input(n, v);
    }
    for (const std::string& c : node_captures[k]) {
      ir::Value* v = scope.resolve(c);
      KILN_CHECK(v, cat(n->describe(), ": its subgraph reads '", c, "', which no enclosing graph defines"));
      g->append_node_input(n, v);
    }
  }
  for (const auto& out : gp.output()) {
    ir::Value* v = scope.resolve(out.name());
    KILN_CHECK(v, cat("graph output '", out.name(), "' is not produced by any node, initializer or input"));
    if (v->producer()) v->type = value_type_from_proto(out);  // declared; inference refines it
    g->add_output(v);
  }
  g->topo_order();  // throws on a cycle
  normalize_opset(*g);
  return g;
}

std::shared_ptr<ir::Graph> load_model(onnx::ModelProto& model, const std::string& base_dir) {
  KILN_CHECK(model.has_graph() && model.ir_version() > 0 && model.opset_import_size() > 0,
             "not an ONNX model: no graph, IR version or opset import");
  std::map<std::string, int> opsets;
  for (const auto& op : model.opset_import()) {
    std::string d = op.domain() == "ai.onnx" ? "" : op.domain();
    // checked before narrowing: 2^32 + 13 must not read as 13
    KILN_CHECK(op.version() >= 1 && op.version() <= 1000,
               cat("the model imports opset version ", op.version(), " of domain '",
                   d.empty() ? "ai.onnx" : d, "'; opset versions are small positive integers"));
    KILN_CHECK(!opsets.count(d), cat("the model imports domain '", d.empty() ? "ai.onnx" : d, "' twice"));
    opsets[d] = static_cast<int>(op.version());
  }
  if (opsets.count("")) {
    int opset = opsets[""];
    KILN_CHECK(opset >= kMinOpset && opset <= kMaxOpset,
               cat("the model imports ONNX opset ", opset, "; kiln supports opsets ", kMinOpset, " to ", kMaxOpset));
  }
  return build_graph(model.graph(), opsets, base_dir, nullptr, nullptr);
}

// protobuf refuses messages nested more than 100 deep: ModelProto, GraphProto, then three
// levels (NodeProto, AttributeProto, GraphProto) per If / Loop / Scan body inside a body.
constexpr const char* kNotParsable =
    "not an ONNX model: the protobuf cannot be parsed (a corrupt or truncated file, or If / Loop / Scan bodies "
    "nested more than 32 deep)";

}  // namespace

std::shared_ptr<ir::Graph> load_onnx_bytes(const std::string& bytes, const std::string& base_dir) {
  onnx::ModelProto model;
  KILN_CHECK(!bytes.empty(), "not an ONNX model: the file is empty");
  KILN_CHECK(model.ParseFromString(bytes), kNotParsable);
  return load_model(model, base_dir);
}

std::shared_ptr<ir::Graph> load_onnx_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  KILN_CHECK(fs::is_regular_file(path, ec), cat("cannot open model '", path, "': no such file"));
  std::ifstream f(path, std::ios::binary);
  KILN_CHECK(f, cat("cannot open model '", path, "'"));
  std::string dir = fs::path(path).parent_path().string();
  try {
    // parsed straight from the file: the model's bytes are not held in memory twice
    KILN_CHECK(fs::file_size(path, ec) > 0, "not an ONNX model: the file is empty");
    onnx::ModelProto model;
    KILN_CHECK(model.ParseFromIstream(&f), kNotParsable);
    return load_model(model, dir.empty() ? "." : dir);
  } catch (const Error& e) {
    throw Error(cat(path, ": ", e.what()));
  }
}

}  // namespace kiln::frontend
