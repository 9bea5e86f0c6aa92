#include <kiln/error.hpp>

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <variant>

#include "commands.hpp"
#include "core/strings.hpp"
#include "frontend/onnx/onnx_frontend.hpp"
#include "frontend/onnx/tensor_proto.hpp"
#include "ir/graph.hpp"
#include "ir/onnx_versions.hpp"
#include "ir/op_registry.hpp"
#include "ir/printer.hpp"

namespace kiln::cli {

namespace {

std::string op_key(const ir::Node& n) { return n.domain().empty() ? n.op_type() : n.domain() + "." + n.op_type(); }

std::string with_commas(int64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > (v < 0 ? 1 : 0); i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

struct Census {
  std::map<std::string, int64_t> ops;          // op key -> count (subgraphs included)
  std::map<std::string, int64_t> unsupported;  // op key -> count
  std::set<const ir::Value*> constants;
  int64_t constant_node_params = 0;
  int64_t nodes = 0;
  int64_t subgraphs = 0;

  void visit(const ir::Graph& g) {
    for (const ir::Value* v : g.outputs())
      if (v && v->is_constant()) constants.insert(v);
    for (const ir::Node* n : g.nodes()) {
      ++nodes;
      ++ops[op_key(*n)];
      if (!ir::OpRegistry::instance().find(n->domain(), n->op_type())) ++unsupported[op_key(*n)];
      for (const ir::Value* v : n->inputs())
        if (v && v->is_constant()) constants.insert(v);
      for (const auto& [name, a] : n->attrs) {
        if (const auto* sub = std::get_if<std::shared_ptr<ir::Graph>>(&a.value)) {
          if (*sub) {
            ++subgraphs;
            visit(**sub);
          }
        } else if (n->op_type() == "Constant" && n->domain().empty()) {
          if (const auto* t = std::get_if<Tensor>(&a.value)) constant_node_params += t->size();
        }
      }
    }
  }
  int64_t params() const {
    int64_t p = constant_node_params;
    for (const ir::Value* v : constants) p += v->constant().size();
    return p;
  }
};

std::string type_string(const ir::ValueType& t) {
  return std::string(t.dtype == DType::undefined ? "?" : dtype_name(t.dtype)) + "  " + t.shape.to_string();
}

void print_port(const ir::Value& v) { std::cout << "  " << v.name() << "  " << type_string(v.type) << "\n"; }

// The graph outputs' declared types, read from the ModelProto ("" where none is declared;
// empty map if the file cannot be parsed here). The frontend keeps inferred types only.
std::map<std::string, std::string> declared_outputs(const std::string& path) {
  std::map<std::string, std::string> out;
  onnx::ModelProto m;
  std::ifstream f(path, std::ios::binary);
  if (!f || !m.ParseFromIstream(&f)) return out;
  for (const auto& vi : m.graph().output()) {
    std::string s;
    if (vi.type().has_tensor_type()) {
      const auto& tt = vi.type().tensor_type();
      std::string dt = "?";
      try {
        dt = dtype_name(frontend::dtype_from_onnx(tt.elem_type(), vi.name()));
      } catch (const Error&) {
      }
      std::string shape = "[...]";
      if (tt.has_shape()) {
        std::vector<std::string> dims;
        for (const auto& d : tt.shape().dim())
          dims.push_back(d.has_dim_value() ? std::to_string(d.dim_value()) : d.has_dim_param() ? d.dim_param() : "?");
        shape = "[" + join(dims) + "]";
      }
      s = dt + "  " + shape;
    }
    out[vi.name()] = s;
  }
  return out;
}

}  // namespace

// kiln info --ops: per domain, each operator kiln implements with its versions (the
// default domain: the ONNX revisions, up to opset 23), then the ONNX operators it does not.
int print_ops() {
  std::map<std::string, std::vector<const ir::OpSchema*>> by_domain;
  for (const ir::OpSchema* s : ir::OpRegistry::instance().all()) by_domain[s->domain].push_back(s);
  std::cout << "operators kiln implements (ai.onnx: the opset versions that introduced or changed each; a model\n"
               "importing opset N uses the newest version <= N, up to opset "
            << ir::kMaxOnnxOpset << "):\n";
  std::set<std::string> have;
  for (const auto& [domain, schemas] : by_domain) {
    std::cout << (domain.empty() ? "ai.onnx" : domain) << "\n";
    for (const ir::OpSchema* s : schemas) {
      std::string line = cat("since ", s->since_version);
      if (domain.empty()) {
        have.insert(s->name);
        const std::vector<int> v = ir::implemented_versions(*s);
        std::vector<int> refused;
        const auto it = ir::onnx_op_versions().find(s->name);
        if (it != ir::onnx_op_versions().end())
          for (int x : it->second)
            if (v.empty() || x > v.back()) refused.push_back(x);
        if (!v.empty()) line = join(v, ", ");
        if (!refused.empty()) line += cat("  (refused: ", join(refused, ", "), ")");
      }
      std::cout << "  " << s->name << "  " << line << "\n";
    }
    if (domain.empty()) {  // Constant nodes become constants when the model is read
      std::cout << "  Constant  " << join(ir::onnx_op_versions().at("Constant"), ", ") << "  (folded when read)\n";
      have.insert("Constant");
    }
  }
  std::vector<std::string> missing;
  for (const auto& [op, versions] : ir::onnx_op_versions())
    if (!have.count(op)) missing.push_back(cat(op, " (", join(versions, ", "), ")"));
  std::cout << "ONNX operators kiln does not implement (a model using one is refused when read):\n";
  for (const std::string& m : missing) std::cout << "  " << m << "\n";
  if (missing.empty()) std::cout << "  none\n";
  return 0;
}

int cmd_info(const InfoOptions& o) {
  if (o.ops && o.model.empty()) return print_ops();
  KILN_CHECK(!o.model.empty(), "kiln info: give a model file (or --ops)");
  if (o.ops) print_ops();
  std::error_code ec;
  KILN_CHECK(std::filesystem::exists(o.model, ec), cat("model file '", o.model, "' does not exist"));
  KILN_CHECK(!std::filesystem::is_directory(o.model, ec), cat("'", o.model, "' is a directory, not a model file"));
  auto graph = frontend::load_onnx_file(o.model);

  // Shape inference may fail (unsupported ops, bad model): report, don't fail.
  std::string infer_error;
  try {
    ir::infer_shapes(*graph);
  } catch (const Error& e) {
    infer_error = e.what();
  }

  std::cout << "model: " << o.model << " (" << with_commas(static_cast<int64_t>(std::filesystem::file_size(o.model, ec)))
            << " bytes)\n";
  if (!graph->name.empty()) std::cout << "graph: " << graph->name << "\n";
  std::cout << "opset imports:";
  if (graph->opset_imports.empty()) std::cout << " (none)";
  for (const auto& [domain, version] : graph->opset_imports)
    std::cout << " " << (domain.empty() ? "ai.onnx" : domain) << "=" << version;
  std::cout << "\n";

  std::cout << "inputs (" << graph->inputs().size() << "):\n";
  for (const ir::Value* v : graph->inputs()) print_port(*v);
  std::cout << "outputs (" << graph->outputs().size() << "):\n";
  auto declared = declared_outputs(o.model);
  for (const ir::Value* v : graph->outputs()) {
    auto it = declared.find(v->name());
    if (it == declared.end() || it->second.empty()) {
      print_port(*v);
      continue;
    }
    std::cout << "  " << v->name() << "  " << it->second;
    if (v->type.dtype != DType::undefined && type_string(v->type) != it->second)
      std::cout << "  (inferred: " << type_string(v->type) << ")";
    std::cout << "\n";
  }

  Census c;
  c.visit(*graph);
  std::cout << "parameters: " << with_commas(c.params()) << " elements in " << c.constants.size()
            << " constant tensors\n";

  std::vector<std::pair<std::string, int64_t>> hist(c.ops.begin(), c.ops.end());
  std::stable_sort(hist.begin(), hist.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::cout << "ops: " << c.nodes << " nodes, " << hist.size() << " op types";
  if (c.subgraphs) std::cout << " (including " << c.subgraphs << " subgraphs)";
  std::cout << "\n";
  for (const auto& [op, n] : hist) {
    std::string count = std::to_string(n);
    std::cout << "  " << std::string(count.size() < 6 ? 6 - count.size() : 0, ' ') << count << "  " << op
              << (c.unsupported.count(op) ? "  (unsupported)" : "") << "\n";
  }
  if (c.unsupported.empty()) {
    std::cout << "unsupported ops: none\n";
  } else {
    std::vector<std::string> names;
    for (const auto& [op, n] : c.unsupported) names.push_back(cat(op, " (", n, ")"));
    std::cout << "unsupported ops: " << join(names, ", ") << "\n";
  }
  std::cout << "shape inference: " << (infer_error.empty() ? "ok" : "failed: " + infer_error) << "\n";
  std::cout << "cpu: " << Core().get_property("kiln_cpu_isa") << ", precisions "
            << Core().get_property("OPTIMIZATION_CAPABILITIES") << "\n";
  if (o.graph) {
    std::cout << "\n";
    ir::print_graph(*graph, std::cout);
  }
  return 0;
}

}  // namespace kiln::cli
