#pragma once
// The C++ half of the shipped fusions, one file per family beside its JSON
// (library/<family>.{json,cpp}): the check that decides whether a match may be rewritten
// (constants, axes, shapes the JSON cannot say; false leaves the match alone) and the fix-up
// that sets the new node's attributes from the returned old nodes. The configs of a family
// label their nodes alike, so one check serves every variant; a node that only some variants
// have is asked for with Match::has. pattern_library.cpp runs them in order.
#include "ir/graph.hpp"
#include "pattern/matcher.hpp"
#include "pattern/pattern_mapping.hpp"

namespace kiln::pattern::library {

// layer_norm.json: layer_norm, layer_norm_scale_only, layer_norm_no_affine -> LayerNormalization.
bool layer_norm_ok(const Match& m);
void layer_norm_fixup(Rewrite& r, ir::Graph& g);

// gelu.json: gelu_erf_* -> com.microsoft Gelu, fast_gelu_* -> com.microsoft FastGelu.
bool gelu_erf_ok(const Match& m);
bool fast_gelu_ok(const Match& m);

// skip_layer_norm.json: residual Add + LayerNormalization -> com.microsoft SkipLayerNormalization.
bool skip_layer_norm_ok(const Match& m);
void skip_layer_norm_fixup(Rewrite& r, ir::Graph& g);

// rms_norm.json: rms_norm_div, rms_norm_reciprocal -> kiln RMSNormalization.
bool rms_norm_ok(const Match& m);
void rms_norm_fixup(Rewrite& r, ir::Graph& g);

// hard_swish.json: hard_swish_* -> HardSwish, hard_sigmoid_chain -> HardSigmoid.
bool relu6_over_6_ok(const Match& m);
void hard_sigmoid_fixup(Rewrite& r, ir::Graph& g);

// attention.json: attention, attention_no_mask -> kiln MultiHeadAttention.
bool attention_ok(const Match& m);
void attention_fixup(Rewrite& r, ir::Graph& g);
// attention_qdq_probs, attention_no_mask_qdq_probs: the probabilities' QuantizeLinear ->
// DequantizeLinear become MultiHeadAttention's probs_* attributes.
bool attention_qdq_ok(const Match& m);
void attention_qdq_fixup(Rewrite& r, ir::Graph& g);

}  // namespace kiln::pattern::library
