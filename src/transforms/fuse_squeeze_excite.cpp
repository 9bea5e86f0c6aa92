#include "transforms/fuse_squeeze_excite.hpp"

#include "core/strings.hpp"
#include "transforms/graph_edit.hpp"

namespace kiln::transforms {

namespace {

// The node of op `op` (default domain) that produces `v`, read only by `reader`, else null.
ir::Node* sole_producer(const ir::Graph& g, const ir::Value* v, const char* op, const ir::Node* reader) {
  ir::Node* p = v ? v->producer() : nullptr;
  if (!p || p->op_type() != op || !p->is_onnx_domain() || p->num_outputs() != 1 || g.is_output(v)) return nullptr;
  if (v->uses().size() != 1 || v->uses()[0].node != reader) return nullptr;
  return p;
}

// Empty when `conv` is a 1x1 convolution over `in` channels with constant f32 weights [*out, in,
// 1, 1] (and bias), group 1, unpadded; else why not.
std::string why_not_pointwise(const ir::Node& conv, int64_t in, int64_t* out) {
  if (conv.num_inputs() < 2) return cat(conv.name(), " has no weights");
  const ir::Value* w = conv.input(1);
  if (!w->is_constant() || w->type.dtype != DType::f32) return cat(conv.name(), "'s weights are not an f32 constant");
  const Shape ws = w->constant().shape();
  if (ws.size() != 4 || ws[1] != in || ws[2] != 1 || ws[3] != 1)
    return cat(conv.name(), "'s weights ", shape_to_string(ws), " are not 1x1 over ", in, " channels");
  if (conv.attr_i("group", 1) != 1) return cat(conv.name(), " is grouped");
  for (int64_t pad : conv.attr_ints("pads", {}))
    if (pad != 0) return cat(conv.name(), " is padded");
  const std::string auto_pad = conv.attr_s("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID") return cat(conv.name(), " has auto_pad ", auto_pad);
  const ir::Value* b = conv.num_inputs() > 2 ? conv.input(2) : nullptr;
  if (b && (!b->is_constant() || b->type.dtype != DType::f32 || b->constant().size() != ws[0]))
    return cat(conv.name(), "'s bias is not an f32 constant of ", ws[0], " values");
  *out = ws[0];
  return "";
}

// The weights of such a convolution as [out, in] and its bias (zeros where it has none): views of
// its constants.
std::pair<ir::Value*, ir::Value*> flattened(ir::Graph& g, const ir::Node& conv) {
  const Tensor& w = conv.input(1)->constant();
  const int64_t out = w.shape()[0], in = w.shape()[1];
  ir::Value* w2 = g.add_constant(g.unique_name(conv.name() + "_w2d"), w.reshaped({out, in}));
  const ir::Value* b = conv.num_inputs() > 2 ? conv.input(2) : nullptr;
  ir::Value* b1 = b ? g.add_constant(g.unique_name(conv.name() + "_b1d"), b->constant().reshaped({out}))
                    : add_f32_constant(g, conv.name() + "_b1d", std::vector<double>(static_cast<size_t>(out), 0.0), {out});
  return {w2, b1};
}

}  // namespace

size_t fuse_squeeze_excite(ir::Graph& g, PassLog* log) {
  GraphEditor ed(g);
  size_t count = 0;
  for (ir::Node* mul : g.topo_order()) {
    if (ed.erased(mul) || mul->op_type() != "Mul" || !mul->is_onnx_domain() || mul->num_inputs() != 2 ||
        mul->num_outputs() != 1)
      continue;
    for (int side = 0; side < 2; ++side) {
      ir::Value* x = mul->input(static_cast<size_t>(1 - side));
      ir::Value* s = mul->input(static_cast<size_t>(side));
      // the gate, the second convolution, the activation, the first convolution, the pool
      ir::Node* gate = sole_producer(g, s, "Sigmoid", mul);
      if (!gate) gate = sole_producer(g, s, "HardSigmoid", mul);
      if (!gate) continue;
      ir::Node* conv2 = sole_producer(g, gate->input(0), "Conv", gate);
      if (!conv2) continue;
      ir::Value* a = conv2->input(0);
      ir::Node* conv1 = nullptr;
      std::string activation;
      if (ir::Node* relu = sole_producer(g, a, "Relu", conv2)) {
        conv1 = sole_producer(g, relu->input(0), "Conv", relu);
        activation = "Relu";
      } else if (ir::Node* m = sole_producer(g, a, "Mul", conv2); m && m->num_inputs() == 2) {
        for (int k = 0; k < 2 && !conv1; ++k) {  // Mul(v, Sigmoid(v)), v the first convolution's output
          ir::Value* v = m->input(static_cast<size_t>(k));
          ir::Node* c = v->producer();
          if (written_out_swish(g, v) != m || g.is_output(v) || !c || c->op_type() != "Conv" || !c->is_onnx_domain() ||
              c->num_outputs() != 1)
            continue;
          conv1 = c;
          activation = "Swish";
        }
      }
      if (!conv1) continue;
      ir::Node* pool = sole_producer(g, conv1->input(0), "GlobalAveragePool", conv1);
      if (!pool || pool->input(0) != x) continue;
      // the pattern is there: from here on, a reason when it is not fused
      const std::string where = mul->name();
      const ir::PartialShape& xs = x->type.shape;
      std::string why;
      int64_t channels = 0, reduced = 0, back = 0;
      if (x->type.dtype != DType::f32 || !xs.rank_known || xs.rank() != 4 || !xs.dims[1].is_static()) {
        why = cat("the input ", xs.to_string(), " is not f32 [N, C, H, W] with known channels");
      } else {
        channels = xs.dims[1].value;
        why = why_not_pointwise(*conv1, channels, &reduced);
        if (why.empty()) why = why_not_pointwise(*conv2, reduced, &back);
        if (why.empty() && back != channels) why = cat(conv2->name(), " gives ", back, " channels, not ", channels);
        if (why.empty() && mul->output(0)->type.shape != xs) why = "the Mul broadcasts past the input's shape";
      }
      if (!why.empty()) {
        if (log) log->skipped(kFuseSqueezeExcite, where, why);
        break;
      }
      if (!g.opset_imports.count("kiln")) g.opset_imports["kiln"] = 1;
      const auto [w1, b1] = flattened(g, *conv1);
      const auto [w2, b2] = flattened(g, *conv2);
      ir::Node* se = g.add_node("SqueezeExcite", {x, w1, b1, w2, b2}, 1, g.unique_name(where + "/SqueezeExcite"),
                                "kiln");
      se->attrs["activation"] = activation;
      se->attrs["gate"] = std::string(gate->op_type());
      if (gate->op_type() == "HardSigmoid") {
        se->attrs["gate_alpha"] = gate->attr_f("alpha", 0.2f);
        se->attrs["gate_beta"] = gate->attr_f("beta", 0.5f);
      }
      se->output(0)->type = mul->output(0)->type;
      ed.replace_and_erase(mul, mul->output(0), se->output(0));
      ++count;
      if (log)
        log->applied(kFuseSqueezeExcite, where,
                     cat(pool->name(), ", ", conv1->name(), ", ", activation, ", ", conv2->name(), ", ", gate->op_type(),
                         " and ", where, " -> SqueezeExcite (", channels, " -> ", reduced, " -> ", channels, " channels)"));
      break;
    }
  }
  return count;
}

}  // namespace kiln::transforms
