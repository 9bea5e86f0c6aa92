#include "transforms/fuse_matmul_integer_to_float.hpp"

#include "core/strings.hpp"
#include "transforms/graph_edit.hpp"

namespace kiln::transforms {

namespace {

// The nodes after a MatMulInteger that the fused node replaces, and the operands it takes.
struct ProjectionMatch {
  ir::Node* cast = nullptr;
  ir::Node* mul = nullptr;
  ir::Node* add = nullptr;  // the bias Add, or null
  ir::Value* a_scale = nullptr;
  ir::Value* b_scale = nullptr;
  ir::Value* bias = nullptr;
};

// The single reader of `v` when it is an ONNX `op` with two inputs (and `v` is no graph
// output), else null.
ir::Node* sole_reader_of_op(const ir::Graph& g, const ir::Value* v, const char* op) {
  if (g.is_output(v) || v->uses().size() != 1) return nullptr;
  ir::Node* r = v->uses()[0].node;
  if (r->op_type() != op || !r->is_onnx_domain()) return nullptr;
  return r;
}

// An f32 value of one element and rank <= 1 (a_scale: DynamicQuantizeLinear's, or a constant).
bool one_float_value(const ir::Value* v) {
  if (!v || v->type.dtype != DType::f32 || !v->type.shape.is_static() || v->type.shape.rank() > 1) return false;
  return shape_size(v->type.shape.to_shape()) == 1;
}

// A constant f32 of one value or N, rank <= 1 (b_scale: per tensor or per column).
bool per_column_scale(const ir::Value* v, int64_t N) {
  if (!v || !v->is_constant() || v->constant().dtype() != DType::f32 || v->constant().rank() > 1) return false;
  return v->constant().size() == 1 || v->constant().size() == N;
}

// Empty when the MatMulInteger `n` and the nodes after it match, filling `m`; else why not.
std::string match_projection(const ir::Graph& g, const ir::Node& n, ProjectionMatch& m) {
  const ir::Value* b = n.input(1);
  if (!b || !b->is_constant() || b->constant().rank() != 2) return "B is not a constant 2-D tensor";
  const DType bt = b->constant().dtype();
  if (bt != DType::u8 && bt != DType::i8) return cat("B is ", dtype_name(bt), ", not 8-bit");
  const int64_t N = b->constant().shape()[1];
  m.cast = sole_reader_of_op(g, n.output(0), "Cast");
  if (!m.cast || m.cast->attr_i("to", 0) != 1)  // TensorProto FLOAT
    return cat("its int32 result is not read by one Cast to float alone (", other_reader(g, n.output(0), nullptr), ")");
  m.mul = sole_reader_of_op(g, m.cast->output(0), "Mul");
  if (!m.mul || m.mul->num_inputs() != 2 || m.mul->input(0) == m.mul->input(1))
    return cat(m.cast->name(), "'s float result is not read by one Mul alone");
  const ir::Value* s = m.mul->input(m.mul->input(0) == m.cast->output(0) ? 1 : 0);
  const ir::Node* sm = s->producer();
  if (!sm || sm->op_type() != "Mul" || !sm->is_onnx_domain() || sm->num_inputs() != 2)
    return cat(m.mul->name(), " does not scale by a product a_scale * b_scale");
  for (int first = 0; first < 2 && !m.a_scale; ++first) {
    ir::Value *x = sm->input(first), *y = sm->input(1 - first);
    if (one_float_value(x) && per_column_scale(y, N)) m.a_scale = x, m.b_scale = y;
  }
  if (!m.a_scale)
    return cat(sm->name(), " does not multiply one float (a_scale) by a constant of 1 or ", N, " floats (b_scale)");
  if (ir::Node* add = sole_reader_of_op(g, m.mul->output(0), "Add"); add && add->num_inputs() == 2) {
    ir::Value* c = add->input(add->input(0) == m.mul->output(0) ? 1 : 0);
    if (c != m.mul->output(0) && c->is_constant() && c->constant().dtype() == DType::f32 && c->constant().size() == N &&
        !c->constant().shape().empty() && c->constant().shape().back() == N &&
        c->constant().rank() <= m.mul->output(0)->type.shape.rank())
      m.add = add, m.bias = c;
  }
  return "";
}

}  // namespace

size_t fuse_matmul_integer_to_float(ir::Graph& g, PassLog* log) {
  GraphEditor ed(g);
  size_t count = 0;
  for (ir::Node* n : g.topo_order()) {
    if (ed.erased(n) || n->op_type() != "MatMulInteger" || !n->is_onnx_domain() || n->num_inputs() < 2) continue;
    ProjectionMatch m;
    const std::string reason = match_projection(g, *n, m);
    if (!reason.empty()) {
      if (log) log->skipped(kFuseMatMulIntegerToFloat, n->name(), cat("MatMulInteger kept: ", reason));
      continue;
    }
    ir::Node* last = m.add ? m.add : m.mul;
    ir::Value* bias = nullptr;
    if (m.bias) {
      const int64_t N = m.bias->constant().size();
      bias = g.add_constant(g.unique_name(m.bias->name() + "_flat"), m.bias->constant().reshaped(Shape{N}));
    }
    std::vector<ir::Value*> in = {n->input(0), n->input(1), m.a_scale, m.b_scale, n->input(2), n->input(3)};
    if (bias) in.push_back(bias);
    if (!g.opset_imports.count("com.microsoft")) g.opset_imports["com.microsoft"] = 1;
    ir::Node* made = g.add_node("MatMulIntegerToFloat", in, 1, g.unique_name(n->name() + "_to_float"), "com.microsoft");
    made->set_opset(1);
    made->output(0)->type = last->output(0)->type;
    const std::string where = n->name();
    ed.replace_and_erase(last, last->output(0), made->output(0));
    if (m.add) ed.erase(m.mul);
    ed.erase(m.cast);
    ed.erase(n);
    ++count;
    if (log)
      log->applied(kFuseMatMulIntegerToFloat, where,
                   cat("MatMulInteger + Cast + Mul", m.add ? " + Add" : "", " -> MatMulIntegerToFloat"));
  }
  return count;
}

}  // namespace kiln::transforms
