// `kiln inspect`: what kiln made of a model for given input shapes — the runtime graph
// after the optimizer (types, primitives, fused nodes, layouts), why fusions did not
// apply, and a drawing of the original and the optimised graph.
#include <kiln/core.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "commands.hpp"
#include "core/strings.hpp"
#include "tools/common/exec_graph.hpp"
#include "tools/common/run_util.hpp"

namespace kiln::cli {

namespace {

void write_file(const std::string& path, const std::string& text, const char* what) {
  std::ofstream f(path);
  KILN_CHECK(f.good(), cat(what, ": cannot write '", path, "'"));
  f << text;
  f.close();
  KILN_CHECK(!f.fail(), cat(what, ": cannot write '", path, "'"));
}

}  // namespace

int cmd_inspect(const InspectOptions& o) {
  std::error_code ec;
  KILN_CHECK(std::filesystem::exists(o.model, ec), cat("model file '", o.model, "' does not exist"));
  Core core;
  auto model = core.read_model(o.model);
  tools::PreparedInputs in = tools::prepare_inputs(model->inputs(), {}, o.shapes, /*random_missing=*/true, 0);
  // the compile properties, checked by compile_model (--disable-pass: kiln_disable_passes)
  AnyMap properties = parse_property_specs(o.properties);
  if (!o.disabled_passes.empty())
    add_property(properties, "kiln_disable_passes", join(o.disabled_passes, ","), "--disable-pass");
  const CompiledModel compiled = core.compile_model(model, properties);
  std::vector<Shape> shapes;
  for (const Tensor& t : in.tensors) shapes.push_back(t.shape());
  RuntimeModel g;
  try {
    g = compiled.get_runtime_model(shapes);
  } catch (const Error& e) {
    throw Error(in.explain(e));  // naming the defaulted dims, the likely cause
  }
  if (!in.defaulted_dims_hint.empty()) std::cout << "note          " << in.defaulted_dims_hint << "\n";
  if (!g.reference_reason.empty()) {
    std::cout << "runtime graph: none (" << g.reference_reason << "); the model runs on the reference executor\n";
    return 0;
  }
  std::map<std::string, int> by_type;
  size_t fused = 0;
  for (const RuntimeNode& n : g.nodes) {
    ++by_type[n.type];
    fused += n.fused.size();
  }
  std::cout << "model         " << o.model << "\n";
  for (size_t i = 0; i < shapes.size(); ++i)
    std::cout << "input         " << model->inputs()[i].name << "  " << shape_to_string(shapes[i]) << "\n";
  std::cout << "onnx nodes    " << model->graph()->num_nodes() << "\n";
  std::cout << "runtime nodes " << g.nodes.size() << "  (" << fused << " ONNX nodes fused into others)\n";
  if (!g.data_dependent.empty()) std::cout << "data shapes   " << g.data_dependent << "\n";
  std::vector<std::string> parts;
  for (auto& [t, c] : by_type) parts.push_back(cat(t, " ", c));
  std::cout << "node types    " << join(parts, ", ") << "\n";
  std::cout << "arena         " << g.arena_bytes << " bytes, " << g.in_place_nodes
            << " nodes in place (one arena per stream)\n";
  std::cout << "streams       " << compiled.get_property("kiln_stream_layout") << "\n";
  std::cout << "precision     " << describe_precision(compiled.get_property("inference_precision"), properties) << "\n";
  std::map<std::string, std::pair<size_t, size_t>> per_pass;  // applied, skipped
  for (const FusionDecision& e : g.fusions) (e.applied ? per_pass[e.pass].first : per_pass[e.pass].second)++;
  for (auto& [p, c] : per_pass) std::cout << "pass          " << p << ": " << c.first << " applied, " << c.second << " not\n";
  if (!o.disabled_passes.empty()) std::cout << "disabled      " << join(o.disabled_passes, ", ") << "\n";

  if (o.explain_fusions) {
    std::cout << "\nfusions:\n" << tools::explain_fusions(g.fusions, true);
  }
  if (!o.exec_graph_path.empty()) {
    write_file(o.exec_graph_path, tools::exec_graph_json(g).dump(2) + "\n", "--exec-graph");
    std::cout << "wrote         " << o.exec_graph_path << "\n";
  }
  if (!o.dot_path.empty() || !o.svg_path.empty()) {
    const std::string dot = tools::exec_graph_dot(*model->graph(), g);
    if (!o.dot_path.empty()) {
      write_file(o.dot_path, dot, "--dot");
      std::cout << "wrote         " << o.dot_path << "\n";
    }
    if (!o.svg_path.empty()) {
      const std::string tmp = o.svg_path + ".dot.tmp";
      write_file(tmp, dot, "--svg");
      const std::string cmd = cat("dot -Tsvg '", tmp, "' -o '", o.svg_path, "' 2>/dev/null");
      const int rc = std::system(cmd.c_str());
      std::filesystem::remove(tmp, ec);
      KILN_CHECK(rc == 0, cat("--svg: Graphviz 'dot' failed or is not installed (apt install graphviz); use --dot FILE "
                              "for the Graphviz source"));
      std::cout << "wrote         " << o.svg_path << "\n";
    }
  }
  return 0;
}

}  // namespace kiln::cli
