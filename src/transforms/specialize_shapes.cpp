#include "transforms/specialize_shapes.hpp"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "core/strings.hpp"
#include "ir/op_registry.hpp"
#include "transforms/fold_as_view.hpp"

namespace kiln::transforms {

namespace {

// Ops whose result is not a function of their inputs' values.
bool is_foldable_op(const ir::Node& n) {
  const std::string& op = n.op_type();
  if (op.rfind("Random", 0) == 0 || op == "Bernoulli" || op == "Multinomial") return false;
  if (op == "If" || op == "Loop" || op == "Scan") return false;
  return true;
}

bool all_static(const ir::Node& n) {
  for (const ir::Value* o : n.outputs())
    if (!o->type.shape.is_static()) return false;
  return true;
}

// Folding creates constants; keep it to what is cheap to hold (weights-sized is fine).
constexpr int64_t kMaxFoldElements = int64_t(64) << 20;

// Elements of a static shape, saturating instead of overflowing (dims may be anything a file
// declares).
int64_t shape_size_capped(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d == 0) return 0;
    n = n > std::numeric_limits<int64_t>::max() / d ? std::numeric_limits<int64_t>::max() : n * d;
  }
  return n;
}

// The node input that feeds the branch input `v` of an If (ir::capture_input), or null.
ir::Value* capture_of(const ir::Node& n, const ir::Value& v) {
  const size_t k = ir::capture_input(n, v.name());
  return k == std::string::npos ? nullptr : n.input(k);
}

// An If whose condition folded to a constant: the chosen branch's nodes take its place (its
// outputs' readers read the branch's results). Not when an output of the If is a graph output
// (its name must stay) or a branch input has no value here. Returns whether it was inlined.
bool inline_constant_if(ir::Graph& g, ir::Node* n) {
  const Tensor& cond = n->input(0)->constant();
  if (cond.size() != 1 || cond.kind() != ValueKind::tensor) return false;
  for (const ir::Value* o : n->outputs())
    if (g.is_output(o)) return false;
  const std::shared_ptr<ir::Graph> body = n->attr_graph(cond.to_f64()[0] != 0.0 ? "then_branch" : "else_branch");
  if (body->outputs().size() != n->num_outputs()) return false;
  std::unordered_map<const ir::Value*, ir::Value*> map;
  for (const ir::Value* in : body->inputs()) {
    ir::Value* outer = capture_of(*n, *in);
    if (!outer) return false;
    map[in] = outer;
  }
  auto mapped = [&](const ir::Value* v) -> ir::Value* {
    if (!v) return nullptr;
    if (auto it = map.find(v); it != map.end()) return it->second;
    KILN_CHECK(v->is_constant(), cat(n->describe(), ": branch value '", v->name(), "' has no producer"));
    return map[v] = g.add_constant(g.unique_name(n->name() + "/" + v->name()), v->constant());
  };
  for (const ir::Node* b : body->topo_order()) {
    std::vector<ir::Value*> ins;
    for (const ir::Value* v : b->inputs()) ins.push_back(mapped(v));
    std::vector<std::string> outs;
    for (const ir::Value* o : b->outputs()) outs.push_back(g.unique_name(n->name() + "/" + o->name()));
    ir::Node* copy = g.add_node(b->op_type(), ins, outs, g.unique_name(n->name() + "/" + b->name()), b->domain());
    copy->attrs = b->attrs;
    copy->set_opset(b->opset());
    for (size_t i = 0; i < b->num_outputs(); ++i) {
      copy->output(i)->type = b->output(i)->type;
      map[b->output(i)] = copy->output(i);
    }
  }
  for (size_t i = 0; i < n->num_outputs(); ++i) g.replace_all_uses(n->output(i), mapped(body->outputs()[i]));
  return true;
}

// An If with a run-time condition and static inputs: each branch is replaced (in this node
// only; bodies are shared between clones) by a copy specialised to those shapes, so the If's
// outputs get static shapes where both branches agree. A branch that cannot take these shapes
// (its shape inference fails: a model built for another input length in that branch) keeps its
// body and would fail if taken; the If's outputs then follow the other branch, which is marked
// kiln_fitting_branch (see the If schema).
void specialize_branches(ir::Node* n) {
  const char* attrs[2] = {"then_branch", "else_branch"};
  std::shared_ptr<ir::Graph> done[2];
  for (int b = 0; b < 2; ++b) {
    std::shared_ptr<ir::Graph> body = n->attr_graph(attrs[b])->clone();
    std::vector<Shape> shapes;
    std::vector<const ir::Value*> outer;  // the value feeding each branch input
    for (ir::Value* in : body->inputs()) {
      const ir::Value* v = capture_of(*n, *in);
      if (!v || !v->type.shape.is_static() || v->type.kind != ValueKind::tensor) return;
      in->type = v->type;
      shapes.push_back(v->type.shape.to_shape());
      outer.push_back(v);
    }
    // outer constants (weights the branch reads by name) become the branch's own, so its
    // Convolutions and MatMuls see constant weights; the input stays, unread
    const std::vector<ir::Value*> ins = body->inputs();
    for (size_t i = 0; i < ins.size(); ++i) {
      if (!outer[i]->is_constant()) continue;
      body->replace_all_uses(ins[i], body->add_constant(body->unique_name(ins[i]->name() + "_outer"), outer[i]->constant()));
    }
    try {
      specialize_shapes(*body, shapes);
      done[b] = body;
    } catch (const Error&) {
      // left as it was: an error at run time if this branch is taken
    }
  }
  for (int b = 0; b < 2; ++b)
    if (done[b]) n->attrs[attrs[b]] = ir::Attribute(done[b]);
  if (done[0] && !done[1]) n->attrs["kiln_fitting_branch"] = ir::Attribute(attrs[0]);
  if (done[1] && !done[0]) n->attrs["kiln_fitting_branch"] = ir::Attribute(attrs[1]);
}

}  // namespace

bool fold_node(ir::Graph& g, ir::Node* n, const ir::OpSchema& s) {
  // Folding runs the kernel: not where inference already says the outputs are too large to
  // keep (a crafted Expand of a constant to a huge shape is left to run time, where the
  // tensor limit stops it); data-dependent outputs are measured after the kernel, as before.
  {
    ir::InferContext ictx(*n);
    s.infer(ictx);
    if (all_static(*n)) {
      int64_t elements = 0;
      for (const ir::Value* o : n->outputs())
        elements += std::min<int64_t>(shape_size_capped(o->type.shape.to_shape()), kMaxFoldElements + 1);
      if (elements > kMaxFoldElements) return false;
    }
  }
  std::vector<Tensor> owned;  // placeholder for a shape query's one non-constant input
  owned.reserve(n->num_inputs());
  std::vector<const Tensor*> ins;
  for (const ir::Value* in : n->inputs()) {
    if (!in) {
      ins.push_back(nullptr);
    } else if (in->is_constant()) {
      ins.push_back(&in->constant());
    } else {
      // Shape/Size read only the shape: a view of the right shape over no real data
      static char no_data;
      owned.push_back(Tensor::wrap(in->type.dtype, in->type.shape.to_shape(), &no_data));
      ins.push_back(&owned.back());
    }
  }
  std::vector<Tensor> outs(n->num_outputs());
  if (std::optional<Tensor> view = fold_as_view(*n, ins)) {
    outs[0] = std::move(*view);
  } else {
    ir::RunContext ctx(*n, ins, outs);
    s.run(ctx);
  }
  int64_t total = 0;
  for (auto& t : outs) total += t.size();
  if (total > kMaxFoldElements) return false;
  for (size_t i = 0; i < outs.size(); ++i) {
    ir::Value* c = g.add_constant(g.unique_name(n->output(i)->name() + "_folded"), outs[i]);
    g.replace_all_uses(n->output(i), c);
  }
  return true;
}

bool fold_if_known(ir::Graph& g, ir::Node* n, const ir::OpSchema& s, const SpecializeOptions& options) {
  bool inputs_const = true;
  for (const ir::Value* in : n->inputs())
    if (in && !in->is_constant()) inputs_const = false;
  // Shape / Size only need the input's shape
  const bool shape_query = (n->op_type() == "Shape" || n->op_type() == "Size") && n->is_onnx_domain() &&
                           n->input(0) && n->input(0)->type.shape.is_static();
  return (inputs_const || shape_query) && is_foldable_op(*n) && s.run &&
         !(options.keep_weight_dequantize && is_weight_dequantize(*n)) && fold_node(g, n, s);
}

bool is_weight_dequantize(const ir::Node& n) {
  if (n.op_type() != "DequantizeLinear" || !n.is_onnx_domain()) return false;
  for (const ir::Value* in : n.inputs())
    if (in && !in->is_constant()) return false;
  const DType t = n.input(0) ? n.input(0)->constant().dtype() : DType::undefined;
  return t == DType::u8 || t == DType::i8 || t == DType::i32;
}

size_t fold_weight_dequantize(ir::Graph& g) {
  size_t folded = 0;
  for (ir::Node* n : g.topo_order())
    if (is_weight_dequantize(*n) && fold_node(g, n, ir::validate_node(*n))) ++folded;
  if (folded) g.remove_dead();
  return folded;
}

SpecializeResult specialize_shapes(ir::Graph& g, const std::vector<Shape>& input_shapes,
                                   const SpecializeOptions& options) {
  KILN_CHECK(input_shapes.size() == g.inputs().size(),
             cat("specialize_shapes: ", input_shapes.size(), " shapes for ", g.inputs().size(), " inputs"));
  for (size_t i = 0; i < input_shapes.size(); ++i) g.inputs()[i]->type.shape = ir::PartialShape(input_shapes[i]);

  SpecializeResult r;
  bool inlined = false;  // an If's branch took its place: its nodes need a pass of their own
  for (ir::Node* n : g.topo_order()) {
    const ir::OpSchema* known = options.nodes_validated ? ir::OpRegistry::instance().find(n->domain(), n->op_type()) : nullptr;
    const ir::OpSchema& s = known ? *known : ir::validate_node(*n);
    if (n->op_type() == "If" && n->is_onnx_domain() && n->input(0)) {
      if (n->input(0)->is_constant() && inline_constant_if(g, n)) {
        inlined = true;
        continue;
      }
      specialize_branches(n);
    }
    if (fold_if_known(g, n, s, options)) {
      ++r.folded_nodes;
      continue;
    }
    ir::InferContext ctx(*n);
    s.infer(ctx);
    if (!all_static(*n) && r.all_static) {
      r.all_static = false;
      for (const ir::Value* o : n->outputs())
        if (!o->type.shape.is_static()) r.first_dynamic = o->name();
    }
  }
  g.remove_dead();
  if (inlined) {
    const size_t folded = r.folded_nodes;
    r = specialize_shapes(g, input_shapes, options);
    r.folded_nodes += folded;
  }
  return r;
}

}  // namespace kiln::transforms
