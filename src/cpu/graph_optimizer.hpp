#pragma once
// The CPU graph optimizer: the fusions of spec/cpu_plugin_fusions.md as passes over a
// freshly built cpu::Graph (before primitives are created), listed in order in one
// place (graph_optimizer.cpp). Each pass is its own file under src/cpu/passes/.
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cpu/fusion_rules.hpp"
#include "cpu/graph.hpp"
#include "pattern/pattern_config.hpp"
#include "transforms/pass_log.hpp"

namespace kiln::cpu {

struct CpuPass {
  const char* name;
  size_t (*run)(Graph& g, transforms::PassLog* log);  // returns the number of fusions
};

// The passes in the order they run.
const std::vector<CpuPass>& cpu_passes();

// The ir::Graph passes that run before lowering, in order: the transformer patterns of
// src/pattern/ ("TransformerPatterns": LayerNorm, GELU), then QdqToFakeQuantize,
// RemoveIdentityOps, FoldPadIntoConvolution, MergeGroupConvolution, FoldBatchNormalization
// (src/transforms/).
// `user_patterns` (may be null) run after the library as the pass "UserPatterns". Last,
// SnippetsTokenization as `snippets` says (ignore_callback: MarkSkipped's set is ignored).
// QdqToQLinear will run (not disabled, exact int8 kernels): stage 1 then keeps the weights'
// DequantizeLinear nodes for it.
bool qdq_to_qlinear_runs(const std::set<std::string>& disabled);

void run_ir_passes(ir::Graph& g, const std::set<std::string>& disabled, transforms::PassLog* log,
                   const std::vector<pattern::PatternConfig>* user_patterns = nullptr,
                   SnippetsMode snippets = SnippetsMode::enable, const FusionTarget& target = {});
// The two halves of run_ir_passes: stage 2 (everything up to the tokenizer) and stage 3 (the
// tokenizer). A model whose shapes vary runs both once on its symbolic template
// (compile_pipeline.hpp), stage 3 per shape only where the template's tokenization differs.
void run_ir_fusions(ir::Graph& g, const std::set<std::string>& disabled, transforms::PassLog* log,
                    const std::vector<pattern::PatternConfig>* user_patterns = nullptr);
// `target` (MarkSkipped's): what the graph compiles for, fusion_target(options). `skip_from`
// (may be null): MarkSkipped asks this graph instead of `g` (the same model at static shapes,
// when `g` is the symbolic template: the fusion rules read static shapes) and its answers apply
// to the nodes of `g` of the same names.
void run_tokenization(ir::Graph& g, const std::set<std::string>& disabled, transforms::PassLog* log,
                      SnippetsMode snippets = SnippetsMode::enable, const FusionTarget& target = {},
                      const ir::Graph* skip_from = nullptr);
FusionTarget fusion_target(const GraphOptions& options);
// Stage 3 run once on a model's symbolic template (compile_pipeline.hpp, tokenize_ir_template):
// its log name (applied; skipped says why each shape runs stage 3), and the kiln_disable_passes
// name that makes every shape tokenize on its own.
inline constexpr const char* kTemplateTokenization = "TemplateTokenization";
// The log name of Graph::convolutions_in_f32_until_hot (kiln_convolutions_until_hot = f32).
inline constexpr const char* kConvolutionsInF32UntilHot = "ConvolutionsInF32UntilHot";

// Every pass name a user may disable: the ir::Graph passes run before lowering, these,
// and "all-fusions".
std::vector<std::string> known_pass_names();

// Runs every pass not disabled in `options` (a name, or "all-fusions").
void optimize_graph(Graph& g, const GraphOptions& options);

// The passes (one file each under src/cpu/passes/).
size_t fuse_convolution_and_simple_operation(Graph& g, transforms::PassLog* log);
size_t fuse_convolution_and_sum(Graph& g, transforms::PassLog* log);
size_t fuse_depthwise_block(Graph& g, transforms::PassLog* log);
// What FuseDepthwiseBlock would make of depthwise convolution `dw` as the graph stands: null
// where dw is not one it takes (not a depthwise Convolution, or shapes fixed); else the 1x1 (or
// window) convolution it would take before and the 1x1 one after (either null), and why kiln's
// kernels refuse the block ("" when they take it).
struct DepthwiseBlockMatch {
  Node* expand = nullptr;
  Node* project = nullptr;
  std::string refused;
};
std::optional<DepthwiseBlockMatch> match_depthwise_block(Graph& g, Node& dw);
size_t fuse_qlinear_conv_and_add(Graph& g, transforms::PassLog* log);
size_t fuse_qlinear_conv_and_clip(Graph& g, transforms::PassLog* log);
size_t fuse_convolution_and_dw_convolution(Graph& g, transforms::PassLog* log);
size_t fuse_fully_connected_and_simple_operation(Graph& g, transforms::PassLog* log);
size_t fuse_pooling_and_fake_quantize(Graph& g, transforms::PassLog* log);
size_t fuse_batch_norm_and_relu(Graph& g, transforms::PassLog* log);
size_t fuse_concat_and_batch_norm(Graph& g, transforms::PassLog* log);

}  // namespace kiln::cpu
