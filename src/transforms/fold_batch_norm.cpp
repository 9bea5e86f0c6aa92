#include "transforms/fold_batch_norm.hpp"

#include <cmath>
#include <tuple>

#include "core/strings.hpp"
#include "transforms/graph_edit.hpp"

namespace kiln::transforms {

namespace {

// The BatchNormalization as y = x * s[c] + shift[c] over channel c (dim 1).
struct Affine {
  std::vector<double> s, shift;
  size_t channels() const { return s.size(); }
};

// What a fold computed, before anything in the graph changes.
struct Fold {
  std::string reason;  // non-empty: not folded, the first condition that failed
  std::vector<std::tuple<ir::Node*, size_t, Tensor>> new_inputs;  // node input i := new constant
  std::map<std::string, ir::Attribute> attrs;                      // set on the producer
  Tensor add_bias;  // MatMul without a bias: Add this after it
};

Fold fail(std::string reason) {
  Fold f;
  f.reason = std::move(reason);
  return f;
}

// The reason an input cannot be folded, or "" when it is a constant f32 tensor.
std::string not_f32_constant(const ir::Node& n, size_t i, const char* what) {
  const ir::Value* v = n.input(i);
  if (!v) return cat("the ", n.op_type(), " has no ", what);
  if (!v->is_constant()) return cat("the ", n.op_type(), " ", what, " '", v->name(), "' is not a constant");
  if (v->constant().dtype() != DType::f32)
    return cat("the ", n.op_type(), " ", what, " '", v->name(), "' is ", dtype_name(v->constant().dtype()),
               " (only f32 weights are folded)");
  return "";
}

Tensor f32_tensor(const Shape& shape, const std::vector<double>& v) {
  Tensor t(DType::f32, shape);
  float* p = t.data<float>();
  for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<float>(v[i]);
  return t;
}

// Checks the BatchNormalization itself and computes its per-channel affine form.
std::string read_bn(const ir::Graph& g, const ir::Node& bn, Affine& a) {
  if (bn.attr_i("training_mode", 0) == 1) return "it is in training mode (training_mode = 1)";
  if (bn.opset() != 0 && bn.opset() < 9 && bn.attr_i("spatial", 1) == 0)
    return "spatial = 0 (statistics per element, not per channel)";
  for (size_t i = 1; i < bn.num_outputs(); ++i) {
    std::string r = other_reader(g, bn.output(i), nullptr);
    if (!r.empty()) return cat("its output ", i, " '", bn.output(i)->name(), "' is read by ", r);
  }
  const char* names[4] = {"scale", "B", "input_mean", "input_var"};
  std::vector<double> p[4];
  for (size_t k = 0; k < 4; ++k) {
    const ir::Value* v = bn.input(1 + k);
    if (!v || !v->is_constant()) return cat("its ", names[k], " input is not a constant");
    if (!is_floating(v->constant().dtype()))
      return cat("its ", names[k], " input is ", dtype_name(v->constant().dtype()));
    p[k] = v->constant().to_f64();
    if (p[k].size() != p[0].size())
      return cat("its ", names[k], " has ", p[k].size(), " values but scale has ", p[0].size());
  }
  const double eps = bn.attr_f("epsilon", 1e-5f);
  a.s.resize(p[0].size());
  a.shift.resize(p[0].size());
  for (size_t c = 0; c < p[0].size(); ++c) {
    a.s[c] = p[0][c] / std::sqrt(p[3][c] + eps);
    a.shift[c] = p[1][c] - p[2][c] * a.s[c];
  }
  return "";
}

// The new bias of a Conv / ConvTranspose: (b - mean) * s + beta = b * s + shift.
Fold conv_bias(ir::Node& conv, const Affine& a, Fold f) {
  std::vector<double> b(a.channels(), 0.0);
  if (conv.has_input(2)) {
    if (std::string r = not_f32_constant(conv, 2, "bias"); !r.empty()) return fail(r);
    const Tensor& t = conv.input(2)->constant();
    if (t.size() != static_cast<int64_t>(a.channels()))
      return fail(cat("the ", conv.op_type(), " bias has shape ", shape_to_string(t.shape()), ", expected [",
                      a.channels(), "]"));
    b = t.to_f64();
  }
  for (size_t c = 0; c < b.size(); ++c) b[c] = b[c] * a.s[c] + a.shift[c];
  f.new_inputs.emplace_back(&conv, 2, f32_tensor({static_cast<int64_t>(b.size())}, b));
  return f;
}

Fold fold_conv(ir::Node& conv, const Affine& a) {
  if (std::string r = not_f32_constant(conv, 1, "weight"); !r.empty()) return fail(r);
  const Tensor& w = conv.input(1)->constant();
  if (w.rank() < 3) return fail(cat("the Conv weight has shape ", shape_to_string(w.shape())));
  const int64_t M = w.shape()[0];
  if (M != static_cast<int64_t>(a.channels()))
    return fail(cat("the Conv has ", M, " output channels, the BatchNormalization ", a.channels()));
  std::vector<double> wv = w.to_f64();
  const int64_t per = w.size() / M;
  for (int64_t oc = 0; oc < M; ++oc)
    for (int64_t i = 0; i < per; ++i) wv[oc * per + i] *= a.s[oc];
  Fold f;
  f.new_inputs.emplace_back(&conv, 1, f32_tensor(w.shape(), wv));
  return conv_bias(conv, a, std::move(f));
}

// ConvTranspose weight: [C_in, M / group, k...]; output channel of [ci, j] is
// (ci / (C_in / group)) * (M / group) + j.
Fold fold_conv_transpose(ir::Node& conv, const Affine& a) {
  if (std::string r = not_f32_constant(conv, 1, "weight"); !r.empty()) return fail(r);
  const Tensor& w = conv.input(1)->constant();
  const int64_t group = conv.attr_i("group", 1);
  if (w.rank() < 3 || group < 1 || w.shape()[0] % group != 0)
    return fail(cat("the ConvTranspose weight has shape ", shape_to_string(w.shape()), " for group ", group));
  const int64_t cin = w.shape()[0], mg = w.shape()[1], M = mg * group;
  if (M != static_cast<int64_t>(a.channels()))
    return fail(cat("the ConvTranspose has ", M, " output channels, the BatchNormalization ", a.channels()));
  std::vector<double> wv = w.to_f64();
  const int64_t inner = w.size() / (cin * mg), cin_g = cin / group;
  for (int64_t ci = 0; ci < cin; ++ci)
    for (int64_t j = 0; j < mg; ++j) {
      const double s = a.s[(ci / cin_g) * mg + j];
      double* p = &wv[(ci * mg + j) * inner];
      for (int64_t i = 0; i < inner; ++i) p[i] *= s;
    }
  Fold f;
  f.new_inputs.emplace_back(&conv, 1, f32_tensor(w.shape(), wv));
  return conv_bias(conv, a, std::move(f));
}

// Scales the columns (or with `transposed`, the rows) of a 2-D weight.
Tensor scale_channels_2d(const Tensor& w, const std::vector<double>& s, bool transposed) {
  std::vector<double> v = w.to_f64();
  const int64_t rows = w.shape()[0], cols = w.shape()[1];
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) v[r * cols + c] *= s[transposed ? r : c];
  return f32_tensor(w.shape(), v);
}

Fold fold_gemm(ir::Node& gemm, const Affine& a) {
  if (std::string r = not_f32_constant(gemm, 1, "B"); !r.empty()) return fail(r);
  const Tensor& b = gemm.input(1)->constant();
  if (b.rank() != 2) return fail(cat("the Gemm B has shape ", shape_to_string(b.shape())));
  const bool tb = gemm.attr_i("transB", 0) != 0;
  const int64_t N = b.shape()[tb ? 0 : 1];
  if (N != static_cast<int64_t>(a.channels()))
    return fail(cat("the Gemm has ", N, " output columns, the BatchNormalization ", a.channels()));
  const double beta = gemm.attr_f("beta", 1.0f);
  Shape cshape{N};
  std::vector<double> c(N);
  if (gemm.has_input(2)) {
    if (std::string r = not_f32_constant(gemm, 2, "C"); !r.empty()) return fail(r);
    const Tensor& ct = gemm.input(2)->constant();
    const Shape& cs = ct.shape();
    const int64_t cols = cs.empty() ? 1 : cs.back(), rows = cs.size() == 2 ? cs[0] : 1;
    if (cs.size() > 2 || (cols != 1 && cols != N))
      return fail(cat("the Gemm C has shape ", shape_to_string(cs)));
    if (cs.size() == 2) cshape = {rows, N};
    std::vector<double> cv = ct.to_f64();
    c.assign(static_cast<size_t>(rows * N), 0.0);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t n = 0; n < N; ++n) c[i * N + n] = a.s[n] * beta * cv[i * cols + (cols == 1 ? 0 : n)];
  }
  for (size_t i = 0; i < c.size(); ++i) c[i] += a.shift[i % N];
  Fold f;
  f.new_inputs.emplace_back(&gemm, 1, scale_channels_2d(b, a.s, tb));
  f.new_inputs.emplace_back(&gemm, 2, f32_tensor(cshape, c));
  f.attrs["beta"] = ir::Attribute(1.0f);
  return f;
}

// MatMul(A, W) with a constant 2-D W and a 2-D output: W's columns are the BN channels.
Fold fold_matmul_weight(ir::Node& mm, const Affine& a) {
  if (std::string r = not_f32_constant(mm, 1, "weight"); !r.empty()) return fail(r);
  const Tensor& w = mm.input(1)->constant();
  const ir::PartialShape& out = mm.output(0)->type.shape;
  if (w.rank() != 2) return fail(cat("the MatMul weight has shape ", shape_to_string(w.shape()), ", not 2-D"));
  if (!out.rank_known || out.rank() != 2)
    return fail(cat("the MatMul output has shape ", out.to_string(),
                    "; only a 2-D output has its channels (BatchNormalization dim 1) in the weight's columns"));
  if (w.shape()[1] != static_cast<int64_t>(a.channels()))
    return fail(cat("the MatMul has ", w.shape()[1], " output columns, the BatchNormalization ", a.channels()));
  Fold f;
  f.new_inputs.emplace_back(&mm, 1, scale_channels_2d(w, a.s, false));
  return f;
}

Fold fold_matmul(ir::Node& mm, const Affine& a) {
  Fold f = fold_matmul_weight(mm, a);
  if (f.reason.empty()) f.add_bias = f32_tensor({static_cast<int64_t>(a.channels())}, a.shift);
  return f;
}

// MatMul -> Add(constant bias) -> BatchNormalization: both the weight and the bias change.
Fold fold_matmul_add(const ir::Graph& g, ir::Node& add, const Affine& a) {
  size_t ci = 2;
  for (size_t i = 0; i < 2; ++i)
    if (add.input(i) && add.input(i)->is_constant()) ci = i;
  if (ci == 2) return fail("its input comes from an Add without a constant operand");
  ir::Value* other = add.input(1 - ci);
  ir::Node* mm = other ? other->producer() : nullptr;
  if (!mm || mm->op_type() != "MatMul" || !is_onnx_domain(*mm))
    return fail("its input comes from an Add that does not add a bias to a MatMul");
  if (std::string r = other_reader(g, other, &add); !r.empty())
    return fail(cat("the MatMul output is also read by ", r));
  if (std::string r = not_f32_constant(add, ci, "bias"); !r.empty()) return fail(r);
  const Tensor& b = add.input(ci)->constant();
  const int64_t N = static_cast<int64_t>(a.channels());
  const Shape& bs = b.shape();
  const bool ok = bs.size() <= 2 && (b.size() == 1 || b.size() == N) && (bs.size() < 2 || bs[0] == 1);
  if (!ok) return fail(cat("the Add bias has shape ", shape_to_string(bs), ", not one value per output column"));
  Fold f = fold_matmul_weight(*mm, a);
  if (!f.reason.empty()) return f;
  std::vector<double> bv = b.to_f64(), nb(N);
  for (int64_t n = 0; n < N; ++n) nb[n] = bv[b.size() == 1 ? 0 : n] * a.s[n] + a.shift[n];
  f.new_inputs.emplace_back(&add, ci, f32_tensor(bs.size() == 2 ? Shape{1, N} : Shape{N}, nb));
  return f;
}

}  // namespace

size_t fold_batch_norm(ir::Graph& g, PassLog* log) {
  GraphEditor ed(g);
  size_t count = 0;
  for (ir::Node* bn : g.topo_order()) {
    if (ed.erased(bn) || bn->op_type() != "BatchNormalization" || !is_onnx_domain(*bn)) continue;
    std::string where = bn->name();
    auto skip = [&](const std::string& reason) {
      if (log) log->skipped(kFoldBatchNormalization, where, "BatchNormalization not folded: " + reason);
    };
    Affine a;
    if (std::string r = read_bn(g, *bn, a); !r.empty()) {
      skip(r);
      continue;
    }
    ir::Value* x = bn->input(0);
    ir::Node* p = x ? x->producer() : nullptr;
    if (!p) {
      skip(cat("its input '", x ? x->name() : "", "' is not produced by a node"));
      continue;
    }
    where = cat(p->name(), " -> ", bn->name());
    const std::string& op = p->op_type();
    if (!is_onnx_domain(*p) || (op != "Conv" && op != "ConvTranspose" && op != "Gemm" && op != "MatMul" && op != "Add")) {
      skip(cat("its input comes from ", op, ", not from Conv, ConvTranspose, Gemm or MatMul"));
      continue;
    }
    if (std::string r = other_reader(g, x, bn); !r.empty()) {
      skip(cat("the ", op, " output is also read by ", r));
      continue;
    }
    if (x->type.dtype != DType::f32) {
      skip(cat("the ", op, " output is ", dtype_name(x->type.dtype), " (only f32 is folded)"));
      continue;
    }
    if (op == "Add") {  // MatMul -> Add(bias) -> BatchNormalization
      for (ir::Value* in : p->inputs())
        if (in && in->producer() && in->producer()->op_type() == "MatMul") {
          where = cat(in->producer()->name(), " -> ", where);
          break;
        }
    }
    Fold f = op == "Conv"            ? fold_conv(*p, a)
             : op == "ConvTranspose" ? fold_conv_transpose(*p, a)
             : op == "Gemm"          ? fold_gemm(*p, a)
             : op == "MatMul"        ? fold_matmul(*p, a)
                                     : fold_matmul_add(g, *p, a);
    if (!f.reason.empty()) {
      skip(f.reason);
      continue;
    }
    // Apply: new constants, attributes, then route the BatchNormalization's readers.
    for (auto& [node, i, t] : f.new_inputs) {
      const std::string base = cat(node->name(), i == 1 ? "_folded_weight" : "_folded_bias");
      g.set_node_input(node, i, g.add_constant(g.unique_name(base), std::move(t)));
    }
    for (auto& [k, v] : f.attrs) p->attrs[k] = v;
    ir::Value* y = bn->output(0);
    ir::Value* result = x;
    std::string message = op == "Add" ? std::string("BatchNormalization folded into the MatMul's weight and the Add's bias")
                                      : cat("BatchNormalization folded into the ", op, "'s weights and bias");
    if (f.add_bias.defined()) {
      ir::Value* bias = g.add_constant(g.unique_name(p->name() + "_folded_bias"), std::move(f.add_bias));
      ir::Node* add = g.add_node("Add", {x, bias}, 1, g.unique_name(bn->name() + "_bias"));
      add->output(0)->type = x->type;
      result = add->output(0);
      message = cat("BatchNormalization folded into the MatMul's weight and a new bias Add '", add->name(), "'");
    }
    ed.replace_and_erase(bn, y, result);
    ++count;
    if (log) log->applied(kFoldBatchNormalization, where, message);
  }
  return count;
}

}  // namespace kiln::transforms
