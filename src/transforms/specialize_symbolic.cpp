#include "transforms/specialize_symbolic.hpp"

#include <optional>

#include "core/strings.hpp"
#include "ir/op_registry.hpp"

namespace kiln::transforms {

namespace {

// One element of a small integer tensor computed from shapes: a number, an input's symbolic
// dim, or something else (a product of dims, a dim no one named).
struct Elem {
  enum Kind { value, dim, unknown } kind = unknown;
  int64_t v = 0;
  std::string sym;
  static Elem of(int64_t x) {
    Elem e;
    e.kind = value;
    e.v = x;
    return e;
  }
  static Elem of(const ir::Dim& d) {
    if (d.is_static()) return of(d.value);
    Elem e;
    if (d.is_symbolic()) {
      e.kind = dim;
      e.sym = d.symbol;
    }
    return e;
  }
};

// A scalar or 1-D integer tensor, element by element.
struct SymTensor {
  std::vector<Elem> elems;
  bool scalar = false;
};

constexpr size_t kMaxElems = 64;  // shape tensors are short; anything longer is data
constexpr int kMaxDepth = 64;     // of the shape computation behind one value

std::optional<std::vector<int64_t>> const_ints(const ir::Value* v) {
  if (!v || !v->is_constant()) return std::nullopt;
  const Tensor& t = v->constant();
  if (t.kind() != ValueKind::tensor || (t.dtype() != DType::i64 && t.dtype() != DType::i32) || t.rank() > 1 ||
      static_cast<size_t>(t.size()) > kMaxElems)
    return std::nullopt;
  return t.to_i64();
}

bool is_int(const ir::Value* v) { return v && (v->type.dtype == DType::i64 || v->type.dtype == DType::i32); }

// ONNX's clamping of a start / end index into [0, size].
int64_t clamp_index(int64_t i, int64_t size) {
  if (i < 0) i += size;
  return std::max<int64_t>(0, std::min<int64_t>(i, size));
}

// The value of `v` element by element, when it is computed from shapes and constants by the
// few ops that move shape elements around; nullopt otherwise.
std::optional<SymTensor> eval(const ir::Value* v, int depth) {
  if (!v || depth > kMaxDepth || !is_int(v)) return std::nullopt;
  if (auto c = const_ints(v)) {
    SymTensor t;
    t.scalar = v->constant().rank() == 0;
    for (int64_t x : *c) t.elems.push_back(Elem::of(x));
    return t;
  }
  const ir::Node* n = v->producer();
  if (!n || !n->is_onnx_domain() || n->num_outputs() != 1) return std::nullopt;
  const std::string& op = n->op_type();
  auto in = [&](size_t i) { return eval(n->input(i), depth + 1); };
  SymTensor r;
  if (op == "Shape") {
    const ir::PartialShape& s = n->input(0)->type.shape;
    if (!s.rank_known) return std::nullopt;
    const auto rank = static_cast<int64_t>(s.rank());
    const int64_t b = clamp_index(n->attr_i("start", 0), rank), e = clamp_index(n->attr_i("end", rank), rank);
    for (int64_t i = b; i < e; ++i) r.elems.push_back(Elem::of(s.dims[static_cast<size_t>(i)]));
    return r;
  }
  if (op == "Identity" || op == "Cast") {
    if (op == "Cast" && !is_int(n->output(0))) return std::nullopt;
    return in(0);
  }
  if (op == "Gather") {
    auto data = in(0);
    const auto idx = const_ints(n->input(1));
    if (!data || data->scalar || !idx || n->attr_i("axis", 0) != 0) return std::nullopt;
    const auto size = static_cast<int64_t>(data->elems.size());
    for (int64_t i : *idx) {
      if (i < -size || i >= size) return std::nullopt;
      r.elems.push_back(data->elems[static_cast<size_t>(i < 0 ? i + size : i)]);
    }
    r.scalar = n->input(1)->constant().rank() == 0;
    return r;
  }
  if (op == "Unsqueeze") {  // a scalar made 1-D
    auto x = in(0);
    if (!x || !x->scalar) return std::nullopt;
    x->scalar = false;
    return x;
  }
  if (op == "Squeeze") {  // a 1-element 1-D tensor made a scalar
    auto x = in(0);
    if (!x || x->scalar || x->elems.size() != 1) return std::nullopt;
    x->scalar = true;
    return x;
  }
  if (op == "Concat") {
    const int64_t axis = n->attr_i("axis", 0);
    if (axis != 0 && axis != -1) return std::nullopt;
    for (size_t i = 0; i < n->num_inputs(); ++i) {
      auto x = in(i);
      if (!x || x->scalar) return std::nullopt;
      r.elems.insert(r.elems.end(), x->elems.begin(), x->elems.end());
    }
    if (r.elems.size() > kMaxElems) return std::nullopt;
    return r;
  }
  if (op == "Slice") {  // 1-D, step 1
    auto x = in(0);
    const auto starts = const_ints(n->input(1)), ends = const_ints(n->input(2));
    if (!x || x->scalar || !starts || !ends || starts->size() != 1 || ends->size() != 1) return std::nullopt;
    if (n->input(3)) {
      const auto axes = const_ints(n->input(3));
      if (!axes || axes->size() != 1 || ((*axes)[0] != 0 && (*axes)[0] != -1)) return std::nullopt;
    }
    if (n->input(4)) {
      const auto steps = const_ints(n->input(4));
      if (!steps || steps->size() != 1 || (*steps)[0] != 1) return std::nullopt;
    }
    const auto size = static_cast<int64_t>(x->elems.size());
    const int64_t b = clamp_index((*starts)[0], size), e = clamp_index((*ends)[0], size);
    for (int64_t i = b; i < e; ++i) r.elems.push_back(x->elems[static_cast<size_t>(i)]);
    return r;
  }
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
    auto a = in(0), b = in(1);
    if (!a || !b) return std::nullopt;
    const size_t na = a->elems.size(), nb = b->elems.size();
    if (na != nb && na != 1 && nb != 1) return std::nullopt;
    r.scalar = a->scalar && b->scalar;
    for (size_t i = 0; i < std::max(na, nb); ++i) {
      const Elem& x = a->elems[na == 1 ? 0 : i];
      const Elem& y = b->elems[nb == 1 ? 0 : i];
      Elem e;  // unknown unless both are numbers
      if (x.kind == Elem::value && y.kind == Elem::value) {
        if (op == "Add") e = Elem::of(x.v + y.v);
        if (op == "Sub") e = Elem::of(x.v - y.v);
        if (op == "Mul") e = Elem::of(x.v * y.v);
        if (op == "Div" && x.v >= 0 && y.v > 0) e = Elem::of(x.v / y.v);  // no rounding-direction question
      } else if (op == "Mul" && ((x.kind == Elem::dim && y.kind == Elem::value && y.v == 1) ||
                                 (y.kind == Elem::dim && x.kind == Elem::value && x.v == 1))) {
        e = x.kind == Elem::dim ? x : y;
      }
      r.elems.push_back(e);
    }
    return r;
  }
  return std::nullopt;
}

// Reshape's target as a constant that means the same for every binding of the symbols, when
// there is one (see the header); false when the target stays computed.
bool make_reshape_target_static(ir::Graph& g, ir::Node* n) {
  if (n->op_type() != "Reshape" || !n->is_onnx_domain() || !n->input(1) || n->input(1)->is_constant()) return false;
  if (n->attr_i("allowzero", 0) != 0) return false;  // a 0 would then mean an empty dim
  const ir::PartialShape& x = n->input(0)->type.shape;
  const auto t = eval(n->input(1), 0);
  if (!t || t->scalar || !x.rank_known) return false;
  std::vector<int64_t> target;
  int inferred = 0;  // elements left to Reshape's -1
  for (size_t i = 0; i < t->elems.size(); ++i) {
    const Elem& e = t->elems[i];
    if (e.kind == Elem::value) {
      if (e.v < -1) return false;  // invalid: leave the error to the per-shape run
      inferred += e.v == -1;
      target.push_back(e.v);
    } else if (e.kind == Elem::dim && i < x.rank() && x.dims[i].is_symbolic() && x.dims[i].symbol == e.sym) {
      target.push_back(0);  // the input's dim at the same place
    } else {
      ++inferred;
      target.push_back(-1);
    }
  }
  if (inferred > 1) return false;
  const auto size = static_cast<int64_t>(target.size());
  g.set_node_input(n, 1, g.add_constant(g.unique_name(n->name() + "/symbolic_shape"),
                                        Tensor::from_vector<int64_t>(target, Shape{size})));
  return true;
}

// Ops that move shape elements around: their int64 result is folded when it no longer depends
// on a symbol.
bool is_shape_arithmetic(const ir::Node& n) {
  static const char* ops[] = {"Gather", "Concat", "Unsqueeze", "Squeeze", "Slice", "Cast",
                              "Identity", "Add", "Sub", "Mul", "Div"};
  if (!n.is_onnx_domain() || n.num_outputs() != 1 || !n.output(0) || n.output(0)->type.dtype != DType::i64) return false;
  for (const char* op : ops)
    if (n.op_type() == op) return true;
  return false;
}

bool is_control_flow(const ir::Node& n) {
  return n.is_onnx_domain() && (n.op_type() == "If" || n.op_type() == "Loop" || n.op_type() == "Scan");
}

}  // namespace

SymbolicSpecializeResult specialize_symbolic(ir::Graph& g, const SpecializeOptions& options) {
  SymbolicSpecializeResult r;
  g.names_unknown_dims = true;  // here and in every later inference of the passes
  auto name_dims = [&](ir::PartialShape& s) {
    for (const ir::Dim& d : s.dims) r.named_dims += d.is_unknown();
    g.name_unknown_dims(s);
  };
  for (ir::Value* in : g.inputs()) {
    if (in->type.kind != ValueKind::tensor || !in->type.shape.rank_known) {
      r.reason = cat("input '", in->name(), "' is not a tensor of known rank");
      return r;
    }
    name_dims(in->type.shape);
  }
  for (ir::Node* n : g.topo_order()) {
    if (is_control_flow(*n)) {
      r.reason = cat(n->describe(), ": control flow (its branches are specialised for each shape)");
      return r;
    }
    const ir::OpSchema& s = ir::validate_node(*n);
    if (fold_if_known(g, n, s, options)) {
      ++r.folded_nodes;
      continue;
    }
    if (make_reshape_target_static(g, n)) ++r.static_reshapes;
    ir::InferContext ctx(*n);
    s.infer(ctx);
    if (is_shape_arithmetic(*n)) {
      if (auto t = eval(n->output(0), 0)) {
        std::vector<int64_t> values;
        for (const Elem& e : t->elems)
          if (e.kind == Elem::value) values.push_back(e.v);
        if (values.size() == t->elems.size()) {
          const Shape shape = t->scalar ? Shape{} : Shape{static_cast<int64_t>(values.size())};
          g.replace_all_uses(n->output(0), g.add_constant(g.unique_name(n->output(0)->name() + "_folded"),
                                                          Tensor::from_vector<int64_t>(values, shape)));
          ++r.folded_nodes;
          continue;
        }
      }
    }
    for (ir::Value* o : n->outputs()) {
      if (!o) continue;
      if (o->type.kind != ValueKind::tensor || !o->type.shape.rank_known) {
        r.reason = cat(n->describe(), ": its output '", o->name(), "' is not a tensor of known rank");
        return r;
      }
      name_dims(o->type.shape);
    }
  }
  g.remove_dead();
  r.ok = true;
  return r;
}

}  // namespace kiln::transforms
