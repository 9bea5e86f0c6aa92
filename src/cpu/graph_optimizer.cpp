#include "cpu/graph_optimizer.hpp"

#include "core/strings.hpp"
#include "cpu/isa.hpp"
#include "cpu/mark_skipped.hpp"
#include "ir/op_registry.hpp"
#include "pattern/pattern_library.hpp"
#include "pattern/pattern_mapping.hpp"
#include "cpu/emitters/x64/target_machine.hpp"
#include "snippets/tokenizer.hpp"
#include "transforms/compute_fp16_in_f32.hpp"
#include "transforms/ir_fusion_passes.hpp"

namespace kiln::cpu {

const std::vector<CpuPass>& cpu_passes() {
  static const std::vector<CpuPass> passes = {
      // conv -> activations / per-channel scale-shift / PReLU (as post-ops)
      {"FuseConvolutionAndSimpleOperation", fuse_convolution_and_simple_operation},
      // 1x1 conv (+ layers) -> 3x3 depthwise conv (+ layers): oneDNN's depthwise post-op
      {"FuseConvolutionAndDWConvolution", fuse_convolution_and_dw_convolution},
      // conv (+ its post-ops) -> Add(other) -> activations: one conv accumulating into `other`
      {"FuseConvolutionAndSum", fuse_convolution_and_sum},
      // Gemm / MatMul with constant weights -> bias Add -> activations
      {"FuseFullyConnectedAndSimpleOperation", fuse_fully_connected_and_simple_operation},
      // max / average Pooling -> FakeQuantize (constant per-tensor / per-channel ranges)
      {"FusePoolingAndFakeQuantize", fuse_pooling_and_fake_quantize},
  };
  return passes;
}

namespace {
constexpr const char* kPatterns = "TransformerPatterns";
constexpr const char* kUserPatterns = "UserPatterns";
}  // namespace

void run_ir_passes(ir::Graph& g, const std::set<std::string>& disabled, transforms::PassLog* log,
                   const std::vector<pattern::PatternConfig>* user_patterns, SnippetsMode snippets) {
  if (disabled.count("all-fusions")) return;
  if (!disabled.count(kPatterns)) {
    pattern::FusionStats st = pattern::apply_transformer_fusions(g);
    if (log && st.total() > 0) {
      std::vector<std::string> parts;
      for (const auto& [name, count] : st.by_pattern) parts.push_back(cat(name, " x", count));
      log->applied(kPatterns, g.name.empty() ? "graph" : g.name, join(parts, ", "));
    }
  }
  if (user_patterns && !user_patterns->empty() && !disabled.count(kUserPatterns)) {
    ir::infer_shapes(g);
    size_t total = 0;
    for (const pattern::PatternConfig& c : *user_patterns) {
      const size_t n = pattern::pattern_mapping(g, c).count();
      total += n;
      if (log && n) log->applied(kUserPatterns, c.name.empty() ? "(unnamed pattern)" : c.name, cat(n, " rewrites"));
    }
    if (total) ir::infer_shapes(g);
  }
  transforms::run_ir_fusion_passes(g, disabled, log);
  // last on the ir::Graph: what the CPU optimizer will not fuse and snippets can compile
  if (disabled.count(snippets::kTokenizationPass) || snippets == SnippetsMode::disable) return;
  if (!x64::best_isa()) {  // an SSE4.1 CPU (or capped there): the ops keep their own nodes
    if (log) log->skipped(snippets::kTokenizationPass, g.name.empty() ? "graph" : g.name,
                          cat("no snippets target for the instruction set in use (", isa_description(),
                              "; needs AVX2 and FMA)"));
    return;
  }
  // the code generator's registers for data pointers bound a Subgraph's inputs + outputs
  const size_t max_ptrs = static_cast<size_t>(x64::shared_target_machine()->max_data_pointers());
  if (snippets == SnippetsMode::ignore_callback) {
    snippets::tokenize(g, snippets::SkippedNodes{}, max_ptrs, log);
  } else {
    snippets::tokenize(g, mark_skipped(g, log), max_ptrs, log);  // what the CPU passes will fuse stays out
  }
}

std::vector<std::string> known_pass_names() {
  std::vector<std::string> names = {"all-fusions", transforms::kComputeFp16InF32, kPatterns, kUserPatterns,
                                    snippets::kTokenizationPass};
  for (const std::string& p : transforms::ir_fusion_pass_names()) names.push_back(p);
  for (const CpuPass& p : cpu_passes()) names.push_back(p.name);
  return names;
}

void optimize_graph(Graph& g, const GraphOptions& options) {
  if (options.disabled_passes.count("all-fusions")) return;
  for (const CpuPass& p : cpu_passes())
    if (!options.disabled_passes.count(p.name)) p.run(g, options.log);
}

}  // namespace kiln::cpu
