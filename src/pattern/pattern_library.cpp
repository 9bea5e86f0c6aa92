#include "pattern/pattern_library.hpp"

#include <kiln/error.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <set>

#include "core/dispatch.hpp"
#include "core/strings.hpp"
#include "ir/op_registry.hpp"
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

constexpr double kSqrt2 = 1.41421356237309504880;
constexpr double kSqrt2OverPi = 0.79788456080286535588;

bool close(double v, double want) { return std::abs(v - want) <= 1e-3 * std::abs(want) + 1e-7; }

int rank_of(const ir::Value* v) {
  return v && v->type.shape.rank_known ? static_cast<int>(v->type.shape.rank()) : -1;
}

// A one-element constant that does not raise the rank of `x` when broadcast with it.
const Tensor* scalar_constant(const ir::Value* c, const ir::Value* x) {
  if (!c || !c->is_constant() || c->constant().size() != 1) return nullptr;
  const int xr = rank_of(x);
  const int cr = static_cast<int>(c->constant().rank());
  if (cr > 0 && (xr < 0 || cr > xr)) return nullptr;
  return &c->constant();
}

bool scalar_near(const ir::Value* c, const ir::Value* x, double want) {
  const Tensor* t = scalar_constant(c, x);
  return t && close(t->to_f64()[0], want);
}

// The other input of a two-input node one of whose inputs is `x`.
const ir::Value* other_input(const ir::Node* n, const ir::Value* x) {
  if (n->num_inputs() != 2) return nullptr;
  if (n->input(0) == x) return n->input(1);
  if (n->input(1) == x) return n->input(0);
  return nullptr;
}

// The one input of a two-input node that comes from outside the match.
const ir::Value* outside_operand(const Match& m, int idx) {
  const ir::Node* n = m.node(idx);
  if (n->num_inputs() != 2) return nullptr;
  const bool in0 = m.produced_inside(n->input(0)), in1 = m.produced_inside(n->input(1));
  if (in0 == in1) return nullptr;
  return in0 ? n->input(1) : n->input(0);
}

// The constant operand of node `idx` (the input next to `x`, or else the one from outside) is ~want.
bool operand_near(const Match& m, int idx, const ir::Value* x, double want) {
  const ir::Value* c = other_input(m.node(idx), x);
  if (!c) c = outside_operand(m, idx);
  return scalar_near(c, x, want);
}

// ---------------- LayerNorm ----------------

// ReduceMean over exactly the last axis of `in`, keeping dims.
bool reduces_last_axis(const ir::Node* n, const ir::Value* in) {
  if (n->attr_i("keepdims", 1) != 1) return false;
  std::vector<int64_t> axes;
  if (n->num_inputs() >= 2 && n->has_input(1)) {  // opset-18 form: axes as an input
    if (!n->input(1)->is_constant()) return false;
    axes = n->input(1)->constant().to_i64();
  } else {
    axes = n->attr_ints("axes", {});
  }
  if (axes.size() != 1) return false;
  if (axes[0] == -1) return true;
  const int r = rank_of(in);
  return r > 0 && axes[0] == r - 1;
}

// gamma / beta must broadcast like a LayerNormalization parameter over the last axis: rank <= 1,
// or a constant whose leading dims are all 1 (the rewrite hook reshapes it to 1-D).
bool layer_norm_param_ok(const ir::Value* p, const ir::Value* x) {
  if (!p) return false;
  const int pr = rank_of(p);
  if (pr < 0) return false;
  if (pr <= 1) return true;
  if (!p->is_constant() || rank_of(x) < pr) return false;
  const Shape& s = p->constant().shape();
  for (size_t i = 0; i + 1 < s.size(); ++i)
    if (s[i] != 1) return false;
  return true;
}

bool layer_norm_ok(const Match& m, int num_params) {
  const ir::Node* mean = m.node(0);
  const ir::Node* pow = m.node(2);
  const ir::Value* x = mean->input(0);
  if (!x || !is_floating(x->type.dtype)) return false;
  if (!reduces_last_axis(mean, x) || !reduces_last_axis(m.node(3), pow->output(0))) return false;
  if (!scalar_near(pow->input(1), x, 2.0)) return false;
  const Tensor* eps = scalar_constant(outside_operand(m, 4), x);
  if (!eps || !(eps->to_f64()[0] >= 0)) return false;
  if (num_params >= 1 && !layer_norm_param_ok(m.input(7, {0, 1}), x)) return false;
  if (num_params >= 2 && !layer_norm_param_ok(m.input(8, {0, 1}), x)) return false;
  if (num_params == 0) {  // the hook makes a scale of ones: needs the normalised size
    const int r = rank_of(x);
    if (r < 1 || !x->type.shape.dims.back().is_static()) return false;
  }
  return true;
}

Tensor ones(DType dt, int64_t n) {
  Tensor t(dt, Shape{n});
  dispatch_float(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = T(1.0f);
  }, "LayerNorm fusion");
  return t;
}

void layer_norm_fixup(Rewrite& r, ir::Graph& g, int num_params) {
  ir::Node* ln = r.new_nodes.at(0);
  const OldNode& add = r.returned(4);
  const Tensor* eps = nullptr;
  for (size_t i = 0; i < add.inputs.size() && !eps; ++i)
    if (!add.inputs[i].from_pattern) eps = add.constant_input(i);
  KILN_CHECK(eps, cat(ln->describe(), ": LayerNorm fusion lost its epsilon constant"));
  ln->attrs["axis"] = ir::Attribute(int64_t{-1});
  ln->attrs["epsilon"] = ir::Attribute(static_cast<float>(eps->to_f64()[0]));
  const ir::Value* x = ln->input(0);
  if (num_params == 0) {
    const int64_t c = x->type.shape.dims.back().value;
    g.append_node_input(ln, g.add_constant(g.unique_name(cat(ln->name(), "_scale")), ones(x->type.dtype, c)));
  }
  for (size_t i = 1; i < ln->num_inputs(); ++i) {
    ir::Value* p = ln->input(i);
    if (p->type.shape.rank_known && p->type.shape.rank() > 1) {
      const Tensor& t = p->constant();
      ir::Value* flat = g.add_constant(g.unique_name(cat(p->name(), "_1d")), t.reshaped({t.shape().back()}));
      g.set_node_input(ln, i, flat);
    }
  }
}

// ---------------- GELU ----------------

// x: the tensor of same_tensors group 0.
const ir::Value* gelu_input(const Match& m) { return m.resolve(m.config().same_tensors.at(0).at(0)); }

// x / sqrt(2) as Div(x, sqrt 2) or Mul(x, 1/sqrt 2) (either order).
bool erf_scale_ok(const Match& m, int idx, const ir::Value* x) {
  const ir::Node* n = m.node(idx);
  if (n->op_type() == "Div") return n->input(0) == x && scalar_near(n->input(1), x, kSqrt2);
  return scalar_near(other_input(n, x), x, 1.0 / kSqrt2);
}

struct ConstCheck {
  int node;
  double value;
};

bool gelu_ok(const Match& m, bool erf_head, const std::vector<ConstCheck>& checks) {
  const ir::Value* x = gelu_input(m);
  if (!x || !is_floating(x->type.dtype)) return false;
  if (erf_head && !erf_scale_ok(m, 0, x)) return false;
  for (const ConstCheck& c : checks)
    if (!operand_near(m, c.node, x, c.value)) return false;
  return true;
}

// ---------------- attention ----------------

// Indices of the old pattern's nodes, for the config with (mask) or without the mask Add.
struct AttentionIdx {
  int reshape_q, transpose_q, matmul_qk, scale, add_mask, softmax, matmul_pv, transpose_o, reshape_o;
  int reshape_k, transpose_k, reshape_v, transpose_v;
};
constexpr AttentionIdx kWithMask = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
constexpr AttentionIdx kNoMask = {0, 1, 2, 3, -1, 4, 5, 6, 7, 8, 9, 10, 11};

bool perm_is(const ir::Node* t, const std::vector<int64_t>& want) { return t->attr_ints("perm", {}) == want; }

// Reshape of a rank-3 [B, S, H*D] tensor to [B, S, H, D] by a constant shape; H, or -1.
int64_t heads_of_split(const ir::Node* r) {
  const ir::Value* x = r->input(0);
  if (rank_of(x) != 3 || !r->input(1) || !r->input(1)->is_constant()) return -1;
  const ir::PartialShape& out = r->output(0)->type.shape;
  if (!out.rank_known || out.rank() != 4 || !out.dims[2].is_static() || !out.dims[3].is_static()) return -1;
  const ir::PartialShape& in = x->type.shape;
  if (!in.dims[2].is_static() || in.dims[2].value != out.dims[2].value * out.dims[3].value) return -1;
  if (!(in.dims[0] == out.dims[0]) || !(in.dims[1] == out.dims[1])) return -1;
  return out.dims[2].value;
}

bool attention_ok(const Match& m, const AttentionIdx& ix) {
  const int64_t h = heads_of_split(m.node(ix.reshape_q));
  if (h < 1 || heads_of_split(m.node(ix.reshape_k)) != h || heads_of_split(m.node(ix.reshape_v)) != h) return false;
  const ir::Value* q = m.node(ix.reshape_q)->input(0);
  if (q->type.dtype != DType::f32) return false;
  if (!perm_is(m.node(ix.transpose_q), {0, 2, 1, 3}) || !perm_is(m.node(ix.transpose_k), {0, 2, 3, 1}) ||
      !perm_is(m.node(ix.transpose_v), {0, 2, 1, 3}) || !perm_is(m.node(ix.transpose_o), {0, 2, 1, 3}))
    return false;
  // the scale: MatMul output / c or * c, c a scalar constant
  const ir::Node* sc = m.node(ix.scale);
  const ir::Value* s = sc->input(0) == m.node(ix.matmul_qk)->output(0) ? sc->input(1) : nullptr;
  if (!s && sc->op_type() == "Mul" && sc->input(1) == m.node(ix.matmul_qk)->output(0)) s = sc->input(0);
  const Tensor* c = scalar_constant(s, sc->output(0));
  if (!c || c->to_f64()[0] == 0 || !std::isfinite(c->to_f64()[0])) return false;
  const ir::Node* sm = m.node(ix.softmax);
  const int64_t axis = sm->attr_i("axis", sm->opset() >= 13 ? -1 : 1);
  if (axis != -1 && axis != 3) return false;
  if (ix.add_mask >= 0) {  // an additive f32 mask of rank <= 4
    const ir::Value* mask = outside_operand(m, ix.add_mask);
    if (!mask || mask->type.dtype != DType::f32 || rank_of(mask) < 0 || rank_of(mask) > 4) return false;
  }
  // the merge back: [B, H, S, Dv] -> [B, S, H, Dv] -> [B, S, H*Dv]
  const ir::PartialShape& out = m.node(ix.reshape_o)->output(0)->type.shape;
  return out.rank_known && out.rank() == 3;
}

void attention_fixup(Rewrite& r) {
  ir::Node* mha = r.new_nodes.at(0);
  const OldNode& split = r.returned(0);
  const Tensor* shape = split.constant_input(1);
  KILN_CHECK(shape && shape->size() == 4, cat(mha->describe(), ": attention fusion lost the head split"));
  const OldNode& sc = r.returned(3);
  const Tensor* c = nullptr;
  for (size_t i = 0; i < sc.inputs.size() && !c; ++i)
    if (!sc.inputs[i].from_pattern) c = sc.constant_input(i);
  KILN_CHECK(c, cat(mha->describe(), ": attention fusion lost its scale"));
  const double v = c->to_f64()[0];
  mha->attrs["num_heads"] = ir::Attribute(shape->to_i64()[2]);
  mha->attrs["scale"] = ir::Attribute(static_cast<float>(sc.op_type == "Div" ? 1.0 / v : v));
}

// ---------------- RMSNorm ----------------

// gamma_node: the Mul by gamma (its outside operand must be a 1-D constant of X's last dim).
bool rms_norm_ok(const Match& m, int gamma_node) {
  const ir::Node* pow = m.node(0);
  const ir::Value* x = pow->input(0);
  if (!x || !is_floating(x->type.dtype) || rank_of(x) < 1) return false;
  if (!scalar_near(pow->input(1), x, 2.0)) return false;
  if (!reduces_last_axis(m.node(1), pow->output(0))) return false;
  const Tensor* eps = scalar_constant(outside_operand(m, 2), x);
  if (!eps || !(eps->to_f64()[0] >= 0)) return false;
  const ir::Value* gamma = outside_operand(m, gamma_node);
  const ir::Dim& c = x->type.shape.dims.back();
  return gamma && gamma->is_constant() && gamma->constant().rank() == 1 && c.is_static() &&
         gamma->constant().shape()[0] == c.value;
}

void rms_norm_fixup(Rewrite& r) {
  ir::Node* n = r.new_nodes.at(0);
  const OldNode& add = r.returned(2);
  const Tensor* eps = nullptr;
  for (size_t i = 0; i < add.inputs.size() && !eps; ++i)
    if (!add.inputs[i].from_pattern) eps = add.constant_input(i);
  KILN_CHECK(eps, cat(n->describe(), ": RMSNorm fusion lost its epsilon constant"));
  n->attrs["epsilon"] = ir::Attribute(static_cast<float>(eps->to_f64()[0]));
}

// ---------------- SkipLayerNorm ----------------

bool skip_layer_norm_ok(const Match& m) {
  const ir::Node* add = m.node(0);
  const ir::Node* ln = m.node(1);
  const ir::Value *a = add->input(0), *b = add->input(1);
  if (!a || !b || a->type.dtype != DType::f32 || b->type.dtype != DType::f32) return false;
  if (!a->type.shape.is_static() || !b->type.shape.is_static() || a->type.shape.to_shape() != b->type.shape.to_shape())
    return false;
  const Shape s = a->type.shape.to_shape();
  if (s.empty() || ln->num_inputs() != 3 || ln->num_outputs() != 1) return false;
  const int64_t axis = ln->attr_i("axis", -1);
  if (axis != -1 && axis != static_cast<int64_t>(s.size()) - 1) return false;
  for (size_t i = 1; i < 3; ++i) {
    const ir::Value* p = ln->input(i);
    if (!p || !p->is_constant() || p->constant().rank() != 1 || p->constant().shape()[0] != s.back()) return false;
  }
  return true;
}

void skip_layer_norm_fixup(Rewrite& r) {
  r.new_nodes.at(0)->attrs["epsilon"] = ir::Attribute(r.returned(1).attr_f("epsilon", 1e-5f));
}

// ---------------- hard-swish / hard-sigmoid ----------------

// Clip's bounds from its constant inputs (opset >= 11) or attributes; nullopt if not constant.
std::optional<std::pair<double, double>> clip_bounds(const ir::Node* c) {
  double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
  auto bound = [&](size_t i, const char* attr, double& v) {
    if (c->num_inputs() > i && c->has_input(i)) {
      const ir::Value* b = c->input(i);
      if (!b->is_constant() || b->constant().size() != 1) return false;
      v = b->constant().to_f64()[0];
    } else if (c->has_attr(attr)) {
      v = c->attr_f(attr);
    }
    return true;
  };
  if (!bound(1, "min", lo) || !bound(2, "max", hi)) return std::nullopt;
  return std::make_pair(lo, hi);
}

// Add(x, 3) -> Clip(0, 6) -> Div 6 / Mul 1/6 at nodes add, clip, div; x the Add's outside input.
bool relu6_over_6_ok(const Match& m, int add, int clip, int div) {
  const ir::Value* x = outside_operand(m, add);
  if (!x) x = m.node(add)->input(0);
  if (!x || !is_floating(x->type.dtype)) return false;
  if (!operand_near(m, add, x, 3.0)) return false;
  auto b = clip_bounds(m.node(clip));
  if (!b || !close(b->first, 0.0) || !close(b->second, 6.0)) return false;
  const ir::Node* d = m.node(div);
  const ir::Value* prev = m.node(div - 1)->output(0);  // the chain element before the scale
  if (d->op_type() == "Div") return d->input(0) == prev && scalar_near(d->input(1), x, 6.0);
  return scalar_near(other_input(d, prev), x, 1.0 / 6.0);
}

void hard_sigmoid_fixup(Rewrite& r) {
  ir::Node* n = r.new_nodes.at(0);
  n->attrs["alpha"] = ir::Attribute(static_cast<float>(1.0 / 6.0));
  n->attrs["beta"] = ir::Attribute(0.5f);
}

struct Fusion {
  const char* pattern;
  size_t FusionStats::*counter;
  MatchFilter filter;
  RewriteHook fixup;
};

const std::vector<Fusion>& fusions() {
  static const std::vector<Fusion> all = {
      {"layer_norm", &FusionStats::layer_norm, [](const Match& m) { return layer_norm_ok(m, 2); },
       [](Rewrite& r, ir::Graph& g) { layer_norm_fixup(r, g, 2); }},
      {"layer_norm_scale_only", &FusionStats::layer_norm, [](const Match& m) { return layer_norm_ok(m, 1); },
       [](Rewrite& r, ir::Graph& g) { layer_norm_fixup(r, g, 1); }},
      {"layer_norm_no_affine", &FusionStats::layer_norm, [](const Match& m) { return layer_norm_ok(m, 0); },
       [](Rewrite& r, ir::Graph& g) { layer_norm_fixup(r, g, 0); }},
      {"gelu_erf_x_then_half", &FusionStats::gelu, [](const Match& m) { return gelu_ok(m, true, {{2, 1.0}, {4, 0.5}}); },
       {}},
      {"gelu_erf_half_then_x", &FusionStats::gelu, [](const Match& m) { return gelu_ok(m, true, {{2, 1.0}, {3, 0.5}}); },
       {}},
      {"gelu_erf_half_x", &FusionStats::gelu, [](const Match& m) { return gelu_ok(m, true, {{2, 1.0}, {4, 0.5}}); }, {}},
      {"fast_gelu_half_x", &FusionStats::fast_gelu,
       [](const Match& m) { return gelu_ok(m, false, {{0, 3.0}, {1, 0.044715}, {3, kSqrt2OverPi}, {5, 1.0}, {7, 0.5}}); },
       {}},
      {"fast_gelu_x_then_half", &FusionStats::fast_gelu,
       [](const Match& m) { return gelu_ok(m, false, {{0, 3.0}, {1, 0.044715}, {3, kSqrt2OverPi}, {5, 1.0}, {7, 0.5}}); },
       {}},
      {"skip_layer_norm", &FusionStats::skip_layer_norm, [](const Match& m) { return skip_layer_norm_ok(m); },
       [](Rewrite& r, ir::Graph&) { skip_layer_norm_fixup(r); }},
      {"rms_norm_div", &FusionStats::rms_norm, [](const Match& m) { return rms_norm_ok(m, 5); },
       [](Rewrite& r, ir::Graph&) { rms_norm_fixup(r); }},
      {"rms_norm_reciprocal", &FusionStats::rms_norm, [](const Match& m) { return rms_norm_ok(m, 6); },
       [](Rewrite& r, ir::Graph&) { rms_norm_fixup(r); }},
      {"hard_swish_mul_then_div", &FusionStats::hard_swish, [](const Match& m) { return relu6_over_6_ok(m, 0, 1, 3); },
       {}},
      {"hard_swish_div_then_mul", &FusionStats::hard_swish, [](const Match& m) { return relu6_over_6_ok(m, 0, 1, 2); },
       {}},
      {"hard_sigmoid_chain", &FusionStats::hard_sigmoid, [](const Match& m) { return relu6_over_6_ok(m, 0, 1, 2); },
       [](Rewrite& r, ir::Graph&) { hard_sigmoid_fixup(r); }},
      {"attention", &FusionStats::attention, [](const Match& m) { return attention_ok(m, kWithMask); },
       [](Rewrite& r, ir::Graph&) { attention_fixup(r); }},
      {"attention_no_mask", &FusionStats::attention, [](const Match& m) { return attention_ok(m, kNoMask); },
       [](Rewrite& r, ir::Graph&) { attention_fixup(r); }},
      {"fast_gelu_half_then_x", &FusionStats::fast_gelu,
       [](const Match& m) { return gelu_ok(m, false, {{0, 3.0}, {1, 0.044715}, {3, kSqrt2OverPi}, {5, 1.0}, {6, 0.5}}); },
       {}},
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
