#include "cpu/fusion_rules.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "core/strings.hpp"
#include "cpu/im2col_f32.hpp"
#include "cpu/nodes/eltwise_spec.hpp"
#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

namespace {

using dnnl::algorithm;

PostOp with_constant(PostOp::Kind kind, algorithm alg, Tensor c, const std::string& from) {
  PostOp op;
  op.kind = kind;
  op.alg = alg;
  op.constant = std::move(c);
  op.from = from;
  return op;
}

// The constant as an f32 tensor of rank `rank` (leading 1s) if it holds one value or one
// value per channel along `axis` of `out`; else nullopt and why.
std::optional<Tensor> channel_constant(const TensorFacts& e, const Shape& out, int axis, std::string* why) {
  if (!e.constant) {
    *why = cat("its other operand '", e.name, "' is not a constant");
    return std::nullopt;
  }
  if (e.dtype != DType::f32) {
    *why = cat("its constant '", e.name, "' is ", dtype_name(e.dtype), ", not f32");
    return std::nullopt;
  }
  const Shape& s = e.constant->shape();
  if (s.size() > out.size()) {
    *why = cat("its constant '", e.name, "' has a higher rank than the output");
    return std::nullopt;
  }
  Shape padded(out.size() - s.size(), 1);
  padded.insert(padded.end(), s.begin(), s.end());
  for (size_t d = 0; d < out.size(); ++d) {
    if (padded[d] == 1) continue;
    if (static_cast<int>(d) != axis || padded[d] != out[d]) {
      *why = cat("its constant '", e.name, "' ", shape_to_string(s), " is neither one value nor one per channel");
      return std::nullopt;
    }
  }
  return e.constant->reshaped(padded);
}

// The values of constant `e` if it holds one value or one value per channel along `axis`
// of `out` (any float dtype); else nullopt and why.
std::optional<std::vector<double>> channel_values(const TensorFacts& e, const Shape& out, int axis, const char* what,
                                                  std::string* why) {
  if (!e.constant) {
    *why = cat("its ", what, " '", e.name, "' is not a constant");
    return std::nullopt;
  }
  if (!is_floating(e.dtype)) {
    *why = cat("its ", what, " '", e.name, "' is ", dtype_name(e.dtype));
    return std::nullopt;
  }
  const Shape& s = e.constant->shape();
  bool ok = s.size() <= out.size();
  for (size_t i = 0; ok && i < s.size(); ++i) {
    const size_t d = out.size() - s.size() + i;
    ok = s[i] == 1 || (static_cast<int>(d) == axis && s[i] == out[d]);
  }
  if (!ok) {
    *why = cat("its ", what, " '", e.name, "' ", shape_to_string(s), " is neither one value nor one per channel");
    return std::nullopt;
  }
  return e.constant->to_f64();
}

}  // namespace

PostOp eltwise_post_op(dnnl::algorithm alg, float alpha, float beta, const std::string& from) {
  PostOp op;
  op.kind = PostOp::Kind::eltwise;
  op.alg = alg;
  op.alpha = alpha;
  op.beta = beta;
  op.from = from;
  return op;
}

TensorFacts facts_of(const ir::Value& v) {
  TensorFacts f;
  f.name = v.name();
  if (v.is_constant() && !v.producer()) {
    f.constant = &v.constant();
    f.dtype = v.constant().dtype();
    f.shape = v.constant().shape();
    return f;
  }
  f.dtype = v.type.dtype;
  if (v.type.shape.is_static()) f.shape = v.type.shape.to_shape();
  f.graph_input = !v.producer();
  return f;
}

TensorFacts facts_of(const Edge& e) {
  TensorFacts f;
  f.name = e.name;
  f.dtype = e.dtype;
  f.shape = e.shape;
  if (e.kind == Edge::Kind::constant) f.constant = &e.constant;
  f.graph_input = e.kind == Edge::Kind::input;
  return f;
}

bool batch_norm_takes_relu(const ir::Node& bn, const ir::Node& r) {
  return r.op_type() == "Relu" && r.is_onnx_domain() && r.num_inputs() == 1 && r.input(0) == bn.output(0) &&
         batch_norm_supports(bn);
}

bool concat_takes_batch_norm(const ir::Node& concat, const ir::Node& bn, std::string* why) {
  auto fail = [&](const std::string& w) {
    if (why) *why = w;
    return false;
  };
  if (!concat_supports(concat) || !batch_norm_supports(bn) || bn.input(0) != concat.output(0))
    return fail("not a Concat read by a BatchNormalization that kiln runs");
  if (concat.num_inputs() < 2) return fail("a Concat of one input is a view of it, not a copy");
  const ir::Value* y = concat.output(0);
  if (y->type.dtype != DType::f32) return fail(cat("the Concat's output is ", dtype_name(y->type.dtype), ", not f32"));
  const int64_t rank = y->type.shape.rank(), axis = concat.attr_i("axis");
  if ((axis < 0 ? axis + rank : axis) != 1) return fail("the Concat does not join the channels (axis 1)");
  return true;
}

std::optional<PostOpHost> post_op_host(const ir::Node& n) {
  if (convolution_supports(n)) return PostOpHost{true, 1, n.input(1)->constant().shape()[0]};
  if (!fully_connected_supports(n)) return std::nullopt;
  const Shape& w = n.input(1)->constant().shape();
  if (n.op_type() == "Gemm") return PostOpHost{false, 1, n.attr_i("transB", 0) != 0 ? w[0] : w[1]};
  return PostOpHost{false, static_cast<int>(n.output(0)->type.shape.rank()) - 1, w[1]};  // MatMul: the columns
}

std::optional<std::vector<PostOp>> fake_quantize_post_ops(const ir::Node& n, const std::vector<const TensorFacts*>& inputs,
                                                          const TensorFacts& out, size_t from, int channel_axis,
                                                          std::string* why) {
  why->clear();
  if (n.op_type() != "FakeQuantize" || n.domain() != "kiln") return std::nullopt;
  if (inputs.size() != 5 || n.num_outputs() != 1 || from != 0) return std::nullopt;
  const TensorFacts& x = *inputs[0];
  if (out.dtype != DType::f32 || x.dtype != DType::f32) {
    *why = cat("FakeQuantize on ", dtype_name(x.dtype), " (only f32 is fused)");
    return std::nullopt;
  }
  if (!out.shape || out.shape != x.shape || channel_axis < 0 || channel_axis >= static_cast<int>(out.shape->size())) {
    *why = cat("FakeQuantize output ", out.shape ? shape_to_string(*out.shape) : "?", " differs from its input");
    return std::nullopt;
  }
  const Shape& os = *out.shape;
  static const char* names[4] = {"input_low", "input_high", "output_low", "output_high"};
  std::vector<double> r[4];
  size_t count = 1;
  for (size_t k = 0; k < 4; ++k) {
    if (!inputs[k + 1]) {
      *why = cat("its ", names[k], " is missing");
      return std::nullopt;
    }
    auto v = channel_values(*inputs[k + 1], os, channel_axis, names[k], why);
    if (!v) return std::nullopt;
    r[k] = std::move(*v);
    count = std::max(count, r[k].size());
  }
  const double L = static_cast<double>(n.attr_i("levels") - 1);
  auto at = [&](int k, size_t i) { return r[k].size() == 1 ? r[k][0] : r[k][i]; };
  std::vector<double> il(count), ih(count), s(count), a(count), d(count), e(count);
  for (size_t i = 0; i < count; ++i) {
    il[i] = at(0, i);
    ih[i] = at(1, i);
    const double ol = at(2, i), oh = at(3, i);
    if (!(il[i] < ih[i])) {
      *why = cat("its input_low ", il[i], " is not below its input_high ", ih[i], count > 1 ? cat(" (channel ", i, ")") : "");
      return std::nullopt;
    }
    if (!std::isfinite(il[i]) || !std::isfinite(ih[i]) || !std::isfinite(ol) || !std::isfinite(oh) || !(L >= 1)) {
      *why = "its ranges are not finite";
      return std::nullopt;
    }
    s[i] = L / (ih[i] - il[i]);
    // the reference decides ties on the grid anchored at the real value 0 when 0 lies on it
    const double o = il[i] * L / (ih[i] - il[i]);
    const double oi = std::nearbyint(o);
    a[i] = std::fabs(o - oi) <= 1e-4 ? oi : 0.0;
    d[i] = (oh - ol) / L;
    e[i] = ol - a[i] * d[i];
  }
  Shape shape(os.size(), 1);
  if (count > 1) shape[static_cast<size_t>(channel_axis)] = static_cast<int64_t>(count);
  auto all = [](const std::vector<double>& v, double x) {
    return std::all_of(v.begin(), v.end(), [x](double y) { return y == x; });
  };
  std::vector<PostOp> ops;
  auto bin = [&](algorithm alg, const std::vector<double>& v, double scale) {
    Tensor t(DType::f32, shape);
    float* p = t.data<float>();
    for (size_t i = 0; i < count; ++i) p[i] = static_cast<float>(scale * v[i]);
    ops.push_back(with_constant(PostOp::Kind::binary, alg, std::move(t), n.name()));
  };
  bin(algorithm::binary_max, il, 1.0);
  bin(algorithm::binary_min, ih, 1.0);
  if (!all(il, 0.0)) bin(algorithm::binary_add, il, -1.0);
  if (!all(s, 1.0)) bin(algorithm::binary_mul, s, 1.0);
  if (!all(a, 0.0)) bin(algorithm::binary_add, a, 1.0);
  ops.push_back(eltwise_post_op(algorithm::eltwise_round, 0.0f, 0.0f, n.name()));
  if (!all(d, 1.0)) bin(algorithm::binary_mul, d, 1.0);
  if (!all(e, 0.0)) bin(algorithm::binary_add, e, 1.0);
  return ops;
}

bool simple_post_op_kind(const ir::Node& n) {
  // simple_post_ops' op tests below, in its order
  if (n.op_type() == "FakeQuantize" && n.domain() == "kiln") return true;
  if (eltwise_spec(n)) return true;
  if (!n.is_onnx_domain()) return false;
  const std::string_view op = n.op_type();  // a view: each test below compares the length first
  return op == "HardSigmoid" || op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Max" ||
         op == "Min" || op == "PRelu";
}

std::optional<std::vector<PostOp>> simple_post_ops(const ir::Node& n, const std::vector<const TensorFacts*>& inputs,
                                                   const TensorFacts& out, size_t from, int channel_axis,
                                                   std::string* why) {
  why->clear();
  if (n.num_outputs() != 1 || out.dtype != DType::f32 || from >= inputs.size() || !inputs[from]) return std::nullopt;
  if (auto fq = fake_quantize_post_ops(n, inputs, out, from, channel_axis, why); fq || !why->empty()) return fq;
  const std::string_view op = n.op_type();  // a view: each test below compares the length first
  if (eltwise_supports(n)) {  // what the Eltwise node runs, as one eltwise post-op
    if (from != 0) return std::nullopt;
    const EltwiseSpec spec = *eltwise_spec(n);
    return std::vector<PostOp>{eltwise_post_op(spec.alg, spec.alpha, spec.beta, n.name())};
  }
  if (!n.is_onnx_domain()) return std::nullopt;
  if (op == "HardSigmoid" && inputs.size() == 1) {
    // max(0, min(1, alpha * x + beta)): a linear and a clip post-op
    return std::vector<PostOp>{eltwise_post_op(algorithm::eltwise_linear, n.attr_f("alpha", 0.2f), n.attr_f("beta", 0.5f), n.name()),
                               eltwise_post_op(algorithm::eltwise_clip_v2, 0.0f, 1.0f, n.name())};
  }
  const bool binary = op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Max" || op == "Min";
  if (!binary && op != "PRelu") return std::nullopt;
  if (inputs.size() != 2 || !inputs[0] || !inputs[1]) return std::nullopt;
  const TensorFacts& x = *inputs[from];
  if (x.dtype != DType::f32 || !x.shape || !out.shape) return std::nullopt;
  if (*out.shape != *x.shape) {
    *why = cat(op, " broadcasts the output to ", shape_to_string(*out.shape));
    return std::nullopt;
  }
  const TensorFacts& other = *inputs[1 - from];
  if (op == "PRelu") {
    if (from != 0) return std::nullopt;
    auto slope = channel_constant(other, *out.shape, channel_axis, why);
    if (!slope) return std::nullopt;
    return std::vector<PostOp>{with_constant(PostOp::Kind::prelu, algorithm::undef, *slope, n.name())};
  }
  auto cst = channel_constant(other, *out.shape, channel_axis, why);
  if (!cst) return std::nullopt;
  auto bin = [&](algorithm a) { return with_constant(PostOp::Kind::binary, a, *cst, n.name()); };
  if (op == "Add") return std::vector<PostOp>{bin(algorithm::binary_add)};
  if (op == "Mul") return std::vector<PostOp>{bin(algorithm::binary_mul)};
  if (op == "Max") return std::vector<PostOp>{bin(algorithm::binary_max)};
  if (op == "Min") return std::vector<PostOp>{bin(algorithm::binary_min)};
  if (op == "Sub") {
    if (from == 0) return std::vector<PostOp>{bin(algorithm::binary_sub)};
    // c - x = (-x) + c
    return std::vector<PostOp>{eltwise_post_op(algorithm::eltwise_linear, -1.0f, 0.0f, n.name()), bin(algorithm::binary_add)};
  }
  if (from == 0) return std::vector<PostOp>{bin(algorithm::binary_div)};  // x / c
  *why = "Div with the host's output as divisor";
  return std::nullopt;
}

bool sum_operand_ok(const ir::Node& add, const TensorFacts& host_out, const TensorFacts& other,
                    const TensorFacts& add_out, std::string* why) {
  if (add.op_type() != "Add" || !add.is_onnx_domain() || add.num_inputs() != 2 || add.num_outputs() != 1) {
    *why = "not an Add of two tensors";
    return false;
  }
  if (!host_out.shape || other.shape != host_out.shape || add_out.shape != host_out.shape ||
      other.dtype != DType::f32 || host_out.dtype != DType::f32) {
    *why = cat("the other input '", other.name, "' ", other.shape ? shape_to_string(*other.shape) : "?",
               " is broadcast, not ", host_out.shape ? shape_to_string(*host_out.shape) : "?");
    return false;
  }
  if (other.constant || other.graph_input) {
    *why = cat("the other input '", other.name, "' is a ", other.constant ? "constant" : "graph input",
               " and may not be overwritten");
    return false;
  }
  return true;
}

bool swish_leaves_convolution(const FusionTarget& target, int64_t output_elements, bool kiln_kernels) {
  // oneDNN 2.6's swish post-op costs about as much whatever the convolution: 0.21-0.29 ms per
  // million outputs in isolation (1x1 16 -> 96 at 112x112 to 3x3 128 -> 128 at 28x28; AMD Zen 4,
  // 2 threads), and 0.36 inside EfficientNet-B0, whose 49 Swishes cover 6.2 million outputs: its
  // convolutions took 7.8-8.0 ms with them and 5.5-5.9 without. The snippets kernel (Sigmoid
  // and Mul in one pass, reading and writing the tensor once more) took 1.5 ms for them all,
  // 0.24 ms per million: the model ran 8-9% faster. On AVX2 the Sigmoid and Mul took 3.7-4.3
  // ms, more than the post-ops cost; the Swish op that replaced them (snippets
  // fuse_sigmoid_mul_to_swish) runs 1.3-1.45x faster there, and the model at
  // KILN_MAX_CPU_ISA=AVX2 ran 5-7% faster with it than with the post-ops (6 interleaved rounds,
  // 2026-11-27). In bf16 the convolutions write bf16, and the snippets kernels made the model
  // 1.2-1.9x slower: there it stays the post-op.
  // (Zen 4 runs a 512-bit operation as two halves; on a CPU with full-width AVX-512 both
  // sides run faster and the tensor's extra pass weighs more: not measured there.)
  // A small output is another matter: the post-op's cost is per output, a node's dispatch
  // (3-4 us) is not. EfficientNet-B0's 16 squeeze-and-excitation convolutions ([1, 8..80, 1,
  // 1]) each ran their Swish as a 4 us node.
  if (output_elements >= 0 && output_elements < 4096) return false;
  // kiln's GEMM and depthwise kernels: the epilogue's Swish (simd v_swish_n, the snippets
  // kernel's 17 operations) on each block while it is in cache, and each expansion, its Swish,
  // the depthwise convolution and its Swish one DepthwiseBlock (the expanded tensor never in
  // memory). EfficientNet-B0, f32, 2 threads, this rule against the snippets one in adjacent
  // pairs (2026-12-05, AMD Zen 4): 0.84-0.91 of the time a request at [1, 3, 224, 184] in the
  // machine's slow phase, 0.98-1.04 in its fast one; 0.90-0.94 at [2, 3, 200, 208]; 0.88-0.95
  // at KILN_MAX_CPU_ISA=AVX2.
  if (kiln_kernels) return false;
  return !target.bf16 && target.snippets_isa.has_value();
}

bool kiln_convolution(const ir::Node& conv) {
  if (conv.op_type() != "Conv" || !conv.is_onnx_domain() || conv.num_inputs() < 2) return false;
  const ir::Value* w = conv.input(1);
  if (!w->is_constant() || !w->type.shape.is_static() || w->type.shape.rank() != 4) return false;
  const Shape ws = w->type.shape.to_shape();
  const int64_t group = conv.attr_i("group", 1);
  if (group == 1) return (ws[2] == 1 && ws[3] == 1) || ws[1] * ws[2] * ws[3] <= im2col_f32::kMaxColumns;
  return ws[1] == 1 && ws[0] == group;  // depthwise (FuseDepthwiseBlock checks the input's channels)
}

}  // namespace kiln::cpu
