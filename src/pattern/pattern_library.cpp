#include "pattern/pattern_library.hpp"

#include <kiln/error.hpp>

#include <set>

#include "core/strings.hpp"
#include "ir/op_registry.hpp"
#include "pattern/library/fusions.hpp"
#include "pattern/library_data.hpp"
#include "pattern/pattern_mapping.hpp"

namespace kiln::pattern {

const std::vector<PatternConfig>& library_patterns() {
  static const std::vector<PatternConfig> all = [] {
    std::vector<PatternConfig> out;
    for (const EmbeddedFile& f : embedded_pattern_files()) {
      for (PatternConfig& c : parse_pattern_configs_string(f.text, cat("library file ", f.name))) {
        if (c.name.empty()) throw Error(cat("pattern library file ", f.name, ": every config needs a \"name\""));
        out.push_back(std::move(c));
      }
    }
    return out;
  }();
  return all;
}

const PatternConfig& library_pattern(const std::string& name) {
  for (const PatternConfig& c : library_patterns())
    if (c.name == name) return c;
  std::vector<std::string> names;
  for (const PatternConfig& c : library_patterns()) names.push_back(c.name);
  throw Error(cat("no pattern named '", name, "' in the library (have: ", join(names, ", "), ")"));
}

namespace {

struct Fusion {
  const char* pattern;
  size_t FusionStats::*counter;
  MatchFilter filter;
  RewriteHook fixup;
};

// The fusions in the order they run (the order decides overlaps, so changing it changes
// results). Longer variants of a pattern come before shorter ones (layer_norm before
// layer_norm_scale_only before layer_norm_no_affine; hard-swish before the hard-sigmoid core
// it contains), and skip_layer_norm after the LayerNorm patterns it builds on. The checks and
// fix-ups live beside their JSON in library/<family>.cpp.
const std::vector<Fusion>& fusions() {
  using namespace library;
  static const std::vector<Fusion> all = {
      {"layer_norm", &FusionStats::layer_norm, layer_norm_ok, layer_norm_fixup},
      {"layer_norm_scale_only", &FusionStats::layer_norm, layer_norm_ok, layer_norm_fixup},
      {"layer_norm_no_affine", &FusionStats::layer_norm, layer_norm_ok, layer_norm_fixup},
      {"gelu_erf_x_then_half", &FusionStats::gelu, gelu_erf_ok, {}},
      {"gelu_erf_half_then_x", &FusionStats::gelu, gelu_erf_ok, {}},
      {"gelu_erf_half_x", &FusionStats::gelu, gelu_erf_ok, {}},
      {"fast_gelu_half_x", &FusionStats::fast_gelu, fast_gelu_ok, {}},
      {"fast_gelu_x_then_half", &FusionStats::fast_gelu, fast_gelu_ok, {}},
      {"skip_layer_norm", &FusionStats::skip_layer_norm, skip_layer_norm_ok, skip_layer_norm_fixup},
      {"rms_norm_div", &FusionStats::rms_norm, rms_norm_ok, rms_norm_fixup},
      {"rms_norm_reciprocal", &FusionStats::rms_norm, rms_norm_ok, rms_norm_fixup},
      {"hard_swish_mul_then_div", &FusionStats::hard_swish, relu6_over_6_ok, {}},
      {"hard_swish_div_then_mul", &FusionStats::hard_swish, relu6_over_6_ok, {}},
      {"hard_sigmoid_chain", &FusionStats::hard_sigmoid, relu6_over_6_ok, hard_sigmoid_fixup},
      {"attention", &FusionStats::attention, attention_ok, attention_fixup},
      {"attention_no_mask", &FusionStats::attention, attention_ok, attention_fixup},
      {"attention_qdq_probs", &FusionStats::attention, attention_qdq_ok, attention_qdq_fixup},
      {"attention_no_mask_qdq_probs", &FusionStats::attention, attention_qdq_ok, attention_qdq_fixup},
      {"fast_gelu_half_then_x", &FusionStats::fast_gelu, fast_gelu_ok, {}},
  };
  return all;
}

// "domain:op", the default domain written "" however it is named.
std::string op_key(const std::string& domain, const std::string& op) {
  return cat(domain == "ai.onnx" ? "" : domain, ":", op);
}

// The op_key of every node of g, to skip patterns that cannot match.
std::set<std::string> op_types(const ir::Graph& g) {
  std::set<std::string> out;
  for (const ir::Node* n : g.nodes()) out.insert(op_key(n->domain(), n->op_type()));
  return out;
}

// Some node of the graph can stand for every node of the pattern (by op type).
bool may_match(const PatternConfig& c, const std::set<std::string>& ops) {
  for (const PatternNode& p : c.in_nodes) {
    bool any = false;
    for (const std::string& alt : p.ops) {
      auto [domain, op] = split_op(alt);
      any = any || ops.count(op_key(domain, op));
    }
    if (!any) return false;
  }
  return true;
}

}  // namespace

FusionStats apply_transformer_fusions(ir::Graph& graph) {
  FusionStats stats;
  ir::infer_shapes(graph);  // the checks read dtypes, ranks and the normalised size
  std::set<std::string> ops = op_types(graph);
  for (const Fusion& f : fusions()) {
    const PatternConfig& config = library_pattern(f.pattern);
    if (config.search_mode == SearchMode::op_type && !may_match(config, ops)) continue;  // a whole graph walk saved
    PatternResult res = pattern_mapping(graph, config, {f.filter, f.fixup});
    if (res.count()) ops = op_types(graph);
    stats.*(f.counter) += res.count();
    if (res.count()) stats.by_pattern[f.pattern] = res.count();
  }
  if (stats.total()) ir::infer_shapes(graph);
  return stats;
}

}  // namespace kiln::pattern
