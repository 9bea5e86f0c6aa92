#include "transforms/specialize_shapes.hpp"

#include <algorithm>
#include <limits>

#include "core/strings.hpp"
#include "ir/op_registry.hpp"

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

}  // namespace

SpecializeResult specialize_shapes(ir::Graph& g, const std::vector<Shape>& input_shapes) {
  KILN_CHECK(input_shapes.size() == g.inputs().size(),
             cat("specialize_shapes: ", input_shapes.size(), " shapes for ", g.inputs().size(), " inputs"));
  for (size_t i = 0; i < input_shapes.size(); ++i) g.inputs()[i]->type.shape = ir::PartialShape(input_shapes[i]);

  SpecializeResult r;
  for (ir::Node* n : g.topo_order()) {
    const ir::OpSchema& s = ir::validate_node(*n);
    bool inputs_const = true;
    for (const ir::Value* in : n->inputs())
      if (in && !in->is_constant()) inputs_const = false;
    // Shape / Size only need the input's (now static) shape.
    bool shape_query = (n->op_type() == "Shape" || n->op_type() == "Size") && n->is_onnx_domain() && n->input(0) &&
                       n->input(0)->type.shape.is_static();
    // Folding runs the kernel: not where inference already says the outputs are too large to
    // keep (a crafted Expand of a constant to a huge shape is left to run time, where the
    // tensor limit stops it); data-dependent outputs are measured after the kernel, as before.
    bool fold = (inputs_const || shape_query) && is_foldable_op(*n) && s.run;
    if (fold) {
      ir::InferContext ictx(*n);
      s.infer(ictx);
      if (all_static(*n)) {
        int64_t elements = 0;
        for (const ir::Value* o : n->outputs())
          elements += std::min<int64_t>(shape_size_capped(o->type.shape.to_shape()), kMaxFoldElements + 1);
        fold = elements <= kMaxFoldElements;
      }
    }
    if (fold) {
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
      ir::RunContext ctx(*n, ins, outs);
      s.run(ctx);
      int64_t total = 0;
      for (auto& t : outs) total += t.size();
      if (total <= kMaxFoldElements) {
        for (size_t i = 0; i < outs.size(); ++i) {
          ir::Value* c = g.add_constant(g.unique_name(n->output(i)->name() + "_folded"), outs[i]);
          g.replace_all_uses(n->output(i), c);
        }
        ++r.folded_nodes;
        continue;
      }
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
  return r;
}

}  // namespace kiln::transforms
