#include <kiln/error.hpp>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <variant>

#include "commands.hpp"
#include "core/strings.hpp"
#include "frontend/onnx/onnx_frontend.hpp"
#include "ir/graph.hpp"
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

void print_port(const ir::Value& v) {
  std::cout << "  " << v.name() << "  " << dtype_name(v.type.dtype) << "  " << v.type.shape.to_string() << "\n";
}

}  // namespace

int cmd_info(const InfoOptions& o) {
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
  for (const ir::Value* v : graph->outputs()) print_port(*v);

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
  if (o.graph) {
    std::cout << "\n";
    ir::print_graph(*graph, std::cout);
  }
  return 0;
}

}  // namespace kiln::cli
