#include "tools/common/exec_graph.hpp"

#include <map>
#include <set>
#include <sstream>

#include "core/strings.hpp"

namespace kiln::tools {

nlohmann::json exec_graph_json(const RuntimeModel& m) {
  nlohmann::json nodes = nlohmann::json::array();
  int order = 0;
  for (const RuntimeNode& n : m.nodes) {
    nlohmann::json j;
    j["name"] = n.name;
    j["type"] = n.type;
    j["primitive"] = n.exec_type;
    j["exec_order"] = order++;
    j["original"] = n.original.empty() ? nlohmann::json(nullptr) : nlohmann::json(n.original);
    j["fused"] = n.fused;
    j["inputs"] = n.inputs;
    nlohmann::json outs = nlohmann::json::array();
    for (const RuntimeNode::Output& o : n.outputs)
      outs.push_back({{"name", o.name}, {"shape", o.shape}, {"layout", o.layout}, {"precision", dtype_name(o.precision)}});
    j["outputs"] = outs;
    nodes.push_back(std::move(j));
  }
  return {{"arena_bytes", m.arena_bytes}, {"in_place_nodes", m.in_place_nodes}, {"nodes", std::move(nodes)}};
}

std::string explain_fusions(const std::vector<FusionDecision>& fusions, bool include_applied) {
  std::ostringstream os;
  for (const FusionDecision& e : fusions) {
    if (e.applied && !include_applied) continue;
    os << (e.applied ? "applied  " : "skipped  ") << e.pass << "  " << e.where;
    if (!e.message.empty()) os << ": " << e.message;
    os << "\n";
  }
  return os.str();
}

namespace {

std::string quoted(const std::string& s) { return "\"" + escape_quotes(s) + "\""; }

}  // namespace

std::string exec_graph_dot(const ir::Graph& original, const RuntimeModel& g) {
  std::set<std::string> fused_away;
  for (const RuntimeNode& n : g.nodes)
    for (const auto& f : n.fused) fused_away.insert(f);
  std::ostringstream os;
  os << "digraph kiln {\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fillcolor=white, fontsize=10];\n";
  // original graph
  os << "  subgraph cluster_original {\n    label=\"original (ONNX)\";\n";
  std::map<const ir::Node*, std::string> id;
  int k = 0;
  auto order = original.topo_order();
  for (const ir::Node* n : order) id[n] = cat("o", k++);
  for (const ir::Node* n : order) {
    bool gone = fused_away.count(n->name()) > 0;
    os << "    " << id[n] << " [label=" << quoted(cat(n->op_type(), "\n", n->name()))
       << (gone ? ", fillcolor=\"#dddddd\", fontcolor=\"#555555\"" : "") << "];\n";
  }
  for (const ir::Node* n : order)
    for (const ir::Value* in : n->inputs())
      if (in && in->producer() && id.count(in->producer()))
        os << "    " << id[in->producer()] << " -> " << id[n] << ";\n";
  os << "  }\n";
  // runtime graph
  os << "  subgraph cluster_runtime {\n    label=\"runtime (kiln)\";\n";
  std::map<std::string, std::string> producer;  // tensor -> the runtime node writing it
  k = 0;
  for (const RuntimeNode& n : g.nodes) {
    std::string nid = cat("r", k++);
    std::string label = cat(n.type, "\n", n.name, "\n[", n.exec_type, "]");
    if (!n.fused.empty()) label += cat("\n+ ", join(n.fused, "\n+ "));
    os << "    " << nid << " [label=" << quoted(label) << (n.fused.empty() ? "" : ", fillcolor=\"#ffe17a\"") << "];\n";
    for (const std::string& in : n.inputs)
      if (producer.count(in)) os << "    " << producer[in] << " -> " << nid << ";\n";
    for (const RuntimeNode::Output& out : n.outputs) producer[out.name] = nid;
  }
  os << "  }\n}\n";
  return os.str();
}

}  // namespace kiln::tools
