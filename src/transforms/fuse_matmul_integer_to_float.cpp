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

// Where the fused node's per-channel operands lie in its output: the last axis (a
// MatMulInteger's columns) or axis 1 (a ConvInteger's output channels), `count` of them.
struct Channels {
  int64_t count = 0;
  bool axis1 = false;
};

// A constant f32 holding one value for every channel of an output of rank `out_rank`, as it
// broadcasts there: [N] (or [1, N], ...) along the last axis; [M, 1, 1] (or [1, M, 1, 1], ...)
// along axis 1. With `or_one`, a single value too.
bool per_channel_constant(const ir::Value* v, const Channels& ch, size_t out_rank, bool or_one) {
  if (!v || !v->is_constant() || v->constant().dtype() != DType::f32) return false;
  const Shape& s = v->constant().shape();
  if (or_one && v->constant().size() == 1 && s.size() <= std::max<size_t>(out_rank, 1)) return true;
  if (v->constant().size() != ch.count || s.empty() || s.size() > out_rank) return false;
  if (!ch.axis1) return s.back() == ch.count;  // size N: the other dims are 1
  const size_t lead = out_rank - s.size();      // s right-aligned to the output's rank
  return lead <= 1 && s[1 - lead] == ch.count;
}

// A constant f32 of one value or N, rank <= 1 (b_scale: per tensor or per column).
bool per_column_scale(const ir::Value* v, int64_t N) {
  if (!v || !v->is_constant() || v->constant().dtype() != DType::f32 || v->constant().rank() > 1) return false;
  return v->constant().size() == 1 || v->constant().size() == N;
}

// The Cast, the scale Mul and the bias Add after the integer node `n`, its per-channel operands
// as `ch` says.
std::string match_scaling(const ir::Graph& g, const ir::Node& n, const Channels& ch, ProjectionMatch& m) {
  const int64_t N = ch.count;
  const size_t out_rank = n.output(0)->type.shape.rank_known ? n.output(0)->type.shape.rank() : 0;
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
    const bool per_channel = ch.axis1 ? per_channel_constant(y, ch, out_rank, /*or_one=*/true) : per_column_scale(y, N);
    if (one_float_value(x) && per_channel) m.a_scale = x, m.b_scale = y;
  }
  if (!m.a_scale)
    return cat(sm->name(), " does not multiply one float (a_scale) by a constant of 1 or ", N, " floats (b_scale",
               ch.axis1 ? ", along the output channels" : "", ")");
  if (ir::Node* add = sole_reader_of_op(g, m.mul->output(0), "Add"); add && add->num_inputs() == 2) {
    ir::Value* c = add->input(add->input(0) == m.mul->output(0) ? 1 : 0);
    if (c != m.mul->output(0) && per_channel_constant(c, ch, m.mul->output(0)->type.shape.rank(), /*or_one=*/false))
      m.add = add, m.bias = c;
  }
  return "";
}

// Empty when the MatMulInteger `n` and the nodes after it match, filling `m`; else why not.
std::string match_projection(const ir::Graph& g, const ir::Node& n, ProjectionMatch& m) {
  const ir::Value* b = n.input(1);
  if (!b || !b->is_constant() || b->constant().rank() != 2) return "B is not a constant 2-D tensor";
  const DType bt = b->constant().dtype();
  if (bt != DType::u8 && bt != DType::i8) return cat("B is ", dtype_name(bt), ", not 8-bit");
  const int64_t N = b->constant().shape()[1];
  return match_scaling(g, n, Channels{N, false}, m);
}

// Empty when the ConvInteger `n` and the nodes after it match, filling `m`; else why not.
std::string match_convolution(const ir::Graph& g, const ir::Node& n, ProjectionMatch& m) {
  const ir::Value* w = n.input(1);
  if (!w || !w->is_constant() || w->constant().rank() < 3) return "the weights are not a constant";
  const DType wt = w->constant().dtype();
  if (wt != DType::u8 && wt != DType::i8) return cat("the weights are ", dtype_name(wt), ", not 8-bit");
  return match_scaling(g, n, Channels{w->constant().shape()[0], true}, m);
}

// Both passes: MatMulInteger -> MatMulIntegerToFloat, or (`conv`) ConvInteger -> ConvIntegerToFloat.
size_t fuse_integer_to_float(ir::Graph& g, PassLog* log, bool conv) {
  const char* pass = conv ? kFuseConvIntegerToFloat : kFuseMatMulIntegerToFloat;
  const char* op = conv ? "ConvInteger" : "MatMulInteger";
  GraphEditor ed(g);
  size_t count = 0;
  for (ir::Node* n : g.topo_order()) {
    if (ed.erased(n) || n->op_type() != op || !n->is_onnx_domain() || n->num_inputs() < 2) continue;
    ProjectionMatch m;
    const std::string reason = conv ? match_convolution(g, *n, m) : match_projection(g, *n, m);
    if (!reason.empty()) {
      if (log) log->skipped(pass, n->name(), cat(op, " kept: ", reason));
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
    const char* domain = conv ? "kiln" : "com.microsoft";
    const std::string fused_op = cat(op, "ToFloat");
    if (!g.opset_imports.count(domain)) g.opset_imports[domain] = 1;
    ir::Node* made = g.add_node(fused_op, in, 1, g.unique_name(n->name() + "_to_float"), domain);
    made->set_opset(1);
    if (conv) made->attrs = n->attrs;  // the window
    made->output(0)->type = last->output(0)->type;
    const std::string where = n->name();
    ed.replace_and_erase(last, last->output(0), made->output(0));
    if (m.add) ed.erase(m.mul);
    ed.erase(m.cast);
    ed.erase(n);
    ++count;
    if (log) log->applied(pass, where, cat(op, " + Cast + Mul", m.add ? " + Add" : "", " -> ", fused_op));
  }
  return count;
}

}  // namespace

size_t fuse_matmul_integer_to_float(ir::Graph& g, PassLog* log) { return fuse_integer_to_float(g, log, false); }

size_t fuse_conv_integer_to_float(ir::Graph& g, PassLog* log) { return fuse_integer_to_float(g, log, true); }

}  // namespace kiln::transforms
