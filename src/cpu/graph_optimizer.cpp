#include "cpu/graph_optimizer.hpp"

#include "core/strings.hpp"
#include "cpu/gemm_f32.hpp"
#include "cpu/isa.hpp"
#include "cpu/mark_skipped.hpp"
#include "cpu/nodes/int8_util.hpp"
#include "cpu/nodes/quantized_convolution.hpp"
#include "ir/op_registry.hpp"
#include "pattern/pattern_library.hpp"
#include "pattern/pattern_mapping.hpp"
#include "transforms/specialize_symbolic.hpp"
#include "cpu/emitters/x64/target_machine.hpp"
#include "snippets/tokenizer.hpp"
#include "transforms/compute_fp16_in_f32.hpp"
#include "transforms/ir_fusion_passes.hpp"
#include "transforms/hoist_qdq.hpp"
#include "transforms/qdq_to_qlinear.hpp"
#include "transforms/specialize_shapes.hpp"
#include "transforms/split_at_data_dependent.hpp"

namespace kiln::cpu {

const std::vector<CpuPass>& cpu_passes() {
  static const std::vector<CpuPass> passes = {
      // conv -> activations / per-channel scale-shift / PReLU (as post-ops)
      {"FuseConvolutionAndSimpleOperation", fuse_convolution_and_simple_operation},
      // 1x1 conv (+ layers) -> 3x3 depthwise conv (+ layers): oneDNN's depthwise post-op
      {"FuseConvolutionAndDWConvolution", fuse_convolution_and_dw_convolution},
      // conv (+ its post-ops) -> Add(other) -> activations: one conv accumulating into `other`
      {"FuseConvolutionAndSum", fuse_convolution_and_sum},
      // [1x1 conv ->] depthwise conv [-> 1x1 conv (+ sum)], shapes varying: one node on kiln's kernels
      {"FuseDepthwiseBlock", fuse_depthwise_block},
      // int8 conv -> QLinearAdd(other): one int8 conv accumulating into `other` (requantized)
      {"FuseQLinearConvAndAdd", fuse_qlinear_conv_and_add},
      // int8 conv [+ sum] -> Clip on the 8-bit result (a Relu under a symmetric range): a clip post-op
      {"FuseQLinearConvAndClip", fuse_qlinear_conv_and_clip},
      // Gemm / MatMul with constant weights -> bias Add -> activations
      {"FuseFullyConnectedAndSimpleOperation", fuse_fully_connected_and_simple_operation},
      // BatchNormalization (not folded into a Conv) -> ReLU
      {"FuseBatchNormAndRelu", fuse_batch_norm_and_relu},
      // Concat -> BatchNormalization (+ its ReLU): computed while the Concat copies
      {"FuseConcatAndBatchNorm", fuse_concat_and_batch_norm},
      // max / average Pooling -> FakeQuantize (constant per-tensor / per-channel ranges)
      {"FusePoolingAndFakeQuantize", fuse_pooling_and_fake_quantize},
  };
  return passes;
}

namespace {
constexpr const char* kPatterns = "TransformerPatterns";

bool has_quantize_linear(const ir::Graph& g) {
  for (const ir::Node* n : g.nodes())
    if (n->op_type() == "QuantizeLinear") return true;
  return false;
}
constexpr const char* kUserPatterns = "UserPatterns";
}  // namespace

bool qdq_to_qlinear_runs(const std::set<std::string>& disabled) {
  return !disabled.count("all-fusions") && !disabled.count(transforms::kQdqToQLinear) &&
         int8_network_kernels();
}

void run_ir_passes(ir::Graph& g, const std::set<std::string>& disabled, transforms::PassLog* log,
                   const std::vector<pattern::PatternConfig>* user_patterns, SnippetsMode snippets,
                   const FusionTarget& target) {
  run_ir_fusions(g, disabled, log, user_patterns);
  run_tokenization(g, disabled, log, snippets, target);
}

void run_ir_fusions(ir::Graph& g, const std::set<std::string>& disabled, transforms::PassLog* log,
                    const std::vector<pattern::PatternConfig>* user_patterns) {
  if (disabled.count("all-fusions")) return;
  if (qdq_to_qlinear_runs(disabled)) {  // first: the weights' DequantizeLinear are still nodes
    transforms::QdqToQLinearOptions qo;
    if (!exact_int8_kernels())  // kiln's kernels (quantized_convolution.hpp)
      qo.conv_kept = [](const ir::Node& conv) -> std::string {
        const ir::Value* w = conv.input(1);
        if (!w || !w->type.shape.is_static()) return "its weights' shape is not known";
        const std::string why = s16_convolution_unsupported(conv.attr_i("group", 1), w->type.shape.to_shape());
        return why.empty() ? why : cat(why, ", for which ", isa_description(), " has no exact int8 kernel (no VNNI)");
      };
    if (transforms::fuse_qdq_to_qlinear(g, log, qo)) ir::infer_shapes(g);
    transforms::fold_weight_dequantize(g);  // the rest compute in float
  } else if (log && !disabled.count(transforms::kQdqToQLinear) && has_quantize_linear(g)) {
    log->skipped(transforms::kQdqToQLinear, g.name.empty() ? "graph" : g.name,
                 cat("QDQ operators compute in f32 (FakeQuantize): oneDNN's int8 kernels on ", isa_description(),
                     " saturate without VNNI, and kiln's exact ones need AVX2"));
  }
  // QDQ pairs on the MatMul inputs of attention (after the head-split Transposes) move up to
  // the projections, so the attention pattern sees its Reshape / Transpose / MatMul chain
  if (!disabled.count(transforms::kHoistQdqAboveLayout) && has_quantize_linear(g) &&
      transforms::hoist_qdq_above_layout(g, log))
    ir::infer_shapes(g);
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
}

FusionTarget fusion_target(const GraphOptions& options) {
  FusionTarget t;
  t.bf16 = options.bf16;
  t.snippets_isa = options.snippets_isa == snippets::Isa::Auto ? x64::best_isa() : options.snippets_isa;
  t.kiln_convolutions = (options.shapes_vary || options.shape_agnostic) && !options.bf16 && gemm_f32::available();
  return t;
}

void run_tokenization(ir::Graph& g, const std::set<std::string>& disabled, transforms::PassLog* log,
                      SnippetsMode snippets, const FusionTarget& target, const ir::Graph* skip_from) {
  // last on the ir::Graph: what the CPU optimizer will not fuse and snippets can compile
  if (disabled.count("all-fusions")) return;
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
  } else if (!skip_from) {
    snippets::tokenize(g, mark_skipped(g, log, target), max_ptrs, log);  // what the CPU passes will fuse stays out
  } else {
    snippets::SkippedNodes skipped;
    for (const ir::Node* n : mark_skipped(*skip_from, log, target))
      if (const ir::Node* same = g.find_node(n->name())) skipped.insert(same);
    snippets::tokenize(g, skipped, max_ptrs, log);
  }
}

std::vector<std::string> known_pass_names() {
  std::vector<std::string> names = {"all-fusions", transforms::kComputeFp16InF32, transforms::kSymbolicShapes, kTemplateTokenization,
                                    transforms::kSplitAtDataDependentShapes, kPatterns,
                                    transforms::kQdqToQLinear, transforms::kHoistQdqAboveLayout, kUserPatterns,
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
