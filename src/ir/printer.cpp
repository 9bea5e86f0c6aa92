#include "ir/printer.hpp"

#include <sstream>

namespace kiln::ir {

static std::string value_ref(const Value* v) {
  if (!v) return "<none>";
  return "%" + v->name();
}

void print_graph(const Graph& g, std::ostream& os) {
  os << "graph " << (g.name.empty() ? "<unnamed>" : g.name) << " (";
  bool first = true;
  for (auto& [d, v] : g.opset_imports) {
    os << (first ? "" : ", ") << (d.empty() ? "ai.onnx" : d) << " v" << v;
    first = false;
  }
  os << ")\n";
  for (const Value* in : g.inputs()) os << "  input  " << value_ref(in) << ": " << in->type.to_string() << "\n";
  auto order = g.topo_order();
  for (const Node* n : order) {
    os << "  ";
    for (size_t i = 0; i < n->num_outputs(); ++i)
      os << (i ? ", " : "") << value_ref(n->output(i)) << ": " << n->output(i)->type.to_string();
    os << " = " << n->op_type() << "[" << n->name();
    for (auto& [k, a] : n->attrs) os << ", " << k << "=" << a.to_string();
    os << "](";
    for (size_t i = 0; i < n->num_inputs(); ++i) {
      const Value* v = n->input(i);
      os << (i ? ", " : "") << value_ref(v);
      if (v && v->is_constant()) os << "=const " << v->constant().to_string(4);
    }
    os << ")\n";
  }
  for (const Value* out : g.outputs()) os << "  output " << value_ref(out) << ": " << out->type.to_string() << "\n";
}

std::string graph_to_string(const Graph& g) {
  std::ostringstream os;
  print_graph(g, os);
  return os.str();
}

}  // namespace kiln::ir
