// Fuzz target: a user's pattern-mapping configs (property kiln_pattern_files, JSON as in
// docs/pattern_mapping.md): JSON parsing and the config's validation (labels, edges,
// attribute constraints, the replacement), then each config applied to a real graph (the
// built-in 2-layer BERT: MatMul, Add, LayerNorm and GELU chains, Softmax, Reshape /
// Transpose) and the rewritten graph's shapes inferred again.
#include <cstdint>
#include <memory>
#include <string>

#include <kiln/core.hpp>

#include "fuzz_util.hpp"
#include "ir/graph.hpp"
#include "ir/op_registry.hpp"
#include "pattern/pattern_config.hpp"
#include "pattern/pattern_mapping.hpp"
#include "tools/common/zoo.hpp"

namespace {

const kiln::ir::Graph& bert_graph() {
  static const std::shared_ptr<kiln::Model> model =
      kiln::Core().read_model_from_memory(kiln::tools::zoo_model_bytes("bert_tiny"));
  return *model->graph();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<kiln::pattern::PatternConfig> configs;
  if (!kiln::fuzz::expect_kiln_error([&] { configs = kiln::pattern::parse_pattern_configs_string(text, "fuzz input"); }))
    return 0;
  if (configs.empty()) return 0;
  std::shared_ptr<kiln::ir::Graph> g = bert_graph().clone();
  kiln::fuzz::expect_kiln_error([&] {
    for (const auto& c : configs) (void)kiln::pattern::pattern_mapping(*g, c);
    kiln::ir::infer_shapes(*g);
  });
  return 0;
}
