#pragma once
// The shipped pattern library (src/pattern/library/*.json, embedded at build time) and the
// pass that runs its transformer fusions with the C++ checks and attribute fix-ups the JSON
// cannot express (library/<family>.cpp beside each JSON, nodes asked for by label):
//   layer_norm*       decomposed LayerNorm -> LayerNormalization (axis -1, epsilon from the
//                     Add constant); ReduceMean axes must be the last axis (keepdims 1) and
//                     the Pow exponent 2, else the match is left alone
//   gelu_erf*         x * 0.5 * (1 + erf(x / sqrt(2))) orderings -> com.microsoft Gelu
//   fast_gelu*        0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))) orderings
//                     -> com.microsoft FastGelu
// Constants are compared with a relative tolerance of 1e-3 and must be single-element
// tensors that do not broadcast x to a higher rank. RMSNorm is not fused: kiln's registry
// has no RMS normalisation op yet.
#include <map>
#include <string>
#include <vector>

#include "ir/graph.hpp"
#include "pattern/pattern_config.hpp"

namespace kiln::pattern {

// Every config of the library, parsed once, in file-name then file order (throws kiln::Error
// if a shipped file is invalid).
const std::vector<PatternConfig>& library_patterns();
// One config by its "name" (throws kiln::Error if there is none).
const PatternConfig& library_pattern(const std::string& name);

struct FusionStats {
  size_t layer_norm = 0;  // LayerNormalization nodes created
  size_t gelu = 0;        // com.microsoft Gelu
  size_t fast_gelu = 0;   // com.microsoft FastGelu
  size_t attention = 0;   // kiln MultiHeadAttention
  size_t rms_norm = 0;    // kiln RMSNormalization
  size_t skip_layer_norm = 0;  // com.microsoft SkipLayerNormalization (residual Add + LayerNorm)
  size_t hard_swish = 0;  // HardSwish from x * clip(x + 3, 0, 6) / 6
  size_t hard_sigmoid = 0;  // HardSigmoid from clip(x + 3, 0, 6) / 6
  std::map<std::string, size_t> by_pattern;  // config name -> rewrites
  size_t total() const { return layer_norm + gelu + fast_gelu + attention + rms_norm + skip_layer_norm + hard_swish + hard_sigmoid; }
};

// Runs the library's LayerNorm, GELU and attention patterns on `graph` in place. ir::infer_shapes runs
// first (the checks read dtypes and ranks) and again when anything changed (validates the
// new nodes and types their tensors), so an unsupported op throws kiln::Error.
FusionStats apply_transformer_fusions(ir::Graph& graph);

}  // namespace kiln::pattern
