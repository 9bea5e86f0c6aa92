// Eltwise: unary f32 activations and math on oneDNN's eltwise_forward. Works on any
// layout: the output takes the input's layout (blocked after a convolution, plain
// elsewhere), so a conv -> Relu -> conv chain never leaves the blocked layout. (Only
// where oneDNN would fall back to its slow reference kernel, a non-zero-preserving op
// on a blocked layout with padded channels, is the input taken plain instead.)
//
// Covered (f32): Relu, LeakyRelu, Elu, Sigmoid, Tanh, Abs, Sqrt, Exp, Log, Neg, Round
// (half to even, like ONNX), Clip (constant scalar bounds, or the min/max attributes of
// opset < 11; not min > max), HardSwish, Softplus, Mish, Gelu (none/tanh; com.microsoft
// Gelu = erf, com.microsoft FastGelu without bias = tanh), Pow with a constant scalar
// exponent of 1, 2 or 3.
// NaN inputs: oneDNN 2.6 returns 0 for Relu(NaN), the lower bound for Clip(NaN) and inf
// for Exp(NaN), where ONNX's reference (numpy) propagates NaN; every other input,
// infinities included, gives ONNX's result (see tests/unit/test_cpu_eltwise.cpp).
// Left on Reference: HardSigmoid (oneDNN 2.6 has no eltwise_hardsigmoid), Erf (no
// eltwise), every other dtype.
#include <cmath>
#include <limits>
#include <optional>
#include <string_view>

#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/nodes/eltwise_spec.hpp"
#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

namespace {

using dnnl::algorithm;
using dnnl::memory;

bool is_f32_tensor(const ir::Value* v) {
  if (!v) return false;
  if (v->is_constant()) return v->constant().dtype() == DType::f32;
  return v->type.dtype == DType::f32;
}

// A constant holding exactly one element, as a double.
std::optional<double> constant_scalar(const ir::Value* v) {
  if (!v || !v->is_constant() || v->constant().size() != 1) return std::nullopt;
  const Tensor& t = v->constant();
  switch (t.dtype()) {
    case DType::f32:
    case DType::f64:
    case DType::f16:
    case DType::bf16:
    case DType::i8:
    case DType::i16:
    case DType::i32:
    case DType::i64:
    case DType::u8:
      return t.to_f64()[0];
    default:
      return std::nullopt;
  }
}

}  // namespace

// The oneDNN algorithm and parameters computing node n exactly as ONNX specifies, if any.
std::optional<EltwiseSpec> eltwise_spec(const ir::Node& n) {
  const std::string_view op = n.op_type();  // a view: each test below compares the length first
  const std::string& dom = n.domain();
  if (n.num_outputs() != 1) return std::nullopt;
  if (dom == "com.microsoft") {
    if (op == "Gelu" && n.num_inputs() == 1) return EltwiseSpec{algorithm::eltwise_gelu_erf};
    if (op == "FastGelu" && (n.num_inputs() == 1 || !n.has_input(1)))
      return EltwiseSpec{algorithm::eltwise_gelu_tanh};
    return std::nullopt;
  }
  if (!dom.empty() && dom != "ai.onnx") return std::nullopt;
  auto unary = [&](algorithm a, float alpha = 0.0f, float beta = 0.0f) -> std::optional<EltwiseSpec> {
    if (n.num_inputs() != 1) return std::nullopt;
    return EltwiseSpec{a, alpha, beta};
  };
  if (op == "Relu") return unary(algorithm::eltwise_relu);
  if (op == "LeakyRelu") return unary(algorithm::eltwise_relu, n.attr_f("alpha", 0.01f));
  if (op == "Elu") return unary(algorithm::eltwise_elu, n.attr_f("alpha", 1.0f));
  if (op == "Sigmoid") return unary(algorithm::eltwise_logistic);
  if (op == "Tanh") return unary(algorithm::eltwise_tanh);
  if (op == "Abs") return unary(algorithm::eltwise_abs);
  if (op == "Sqrt") return unary(algorithm::eltwise_sqrt);
  if (op == "Exp") return unary(algorithm::eltwise_exp);
  if (op == "Log") return unary(algorithm::eltwise_log);
  if (op == "Neg") return unary(algorithm::eltwise_linear, -1.0f, 0.0f);
  if (op == "Round") return unary(algorithm::eltwise_round);  // round-to-nearest-even, as ONNX
  // HardSwish: x * max(0, min(1, x/6 + 1/2)); oneDNN 2.6 computes x * relu6(x + 3) / 6
  // and ignores alpha/beta; later versions take them as the slope and offset.
  if (op == "HardSwish") return unary(algorithm::eltwise_hardswish, 1.0f / 6.0f, 0.5f);
  // Softplus: log(1 + exp(x)); alpha is the (1 in 2.6 semantics, ignored) scale.
  if (op == "Softplus") return unary(algorithm::eltwise_soft_relu, 1.0f);
  if (op == "Mish") return unary(algorithm::eltwise_mish);
  if (op == "Gelu") {
    std::string a = n.attr_s("approximate", "none");
    if (a == "none") return unary(algorithm::eltwise_gelu_erf);
    if (a == "tanh") return unary(algorithm::eltwise_gelu_tanh);
    return std::nullopt;
  }
  if (op == "Clip") {
    if (n.num_inputs() > 3) return std::nullopt;
    float lo = std::numeric_limits<float>::lowest(), hi = std::numeric_limits<float>::max();
    auto bound = [&](size_t i, const char* attr, float& v) {
      if (n.has_input(i)) {
        const ir::Value* b = n.input(i);
        if (!b->is_constant() || b->constant().dtype() != DType::f32 || b->constant().size() != 1) return false;
        v = b->constant().data<float>()[0];
      } else if (n.has_attr(attr)) {
        v = n.attr_f(attr);
      }
      return true;
    };
    if (!bound(1, "min", lo) || !bound(2, "max", hi)) return std::nullopt;
    // oneDNN rejects lo > hi (ONNX: everything becomes max); rare, left to Reference
    if (std::isnan(lo) || std::isnan(hi) || lo > hi) return std::nullopt;
    return EltwiseSpec{algorithm::eltwise_clip_v2, lo, hi};  // min(max(x, lo), hi)
  }
  if (op == "Pow") {
    if (n.num_inputs() != 2) return std::nullopt;
    auto e = constant_scalar(n.input(1));
    // exponents oneDNN computes exactly (x, x*x, x*x*x) for every x; not 0.5: sqrt(-inf)
    // is NaN where pow(-inf, 0.5) is inf, and sqrt(-0) is -0
    if (!e || !(*e == 1.0 || *e == 2.0 || *e == 3.0)) return std::nullopt;
    return EltwiseSpec{algorithm::eltwise_pow, 1.0f, static_cast<float>(*e)};
  }
  return std::nullopt;
}

namespace {

class EltwiseNode : public SrcDstPrimitiveNode {
 public:
  EltwiseNode(const ir::Node& n, EltwiseSpec spec) : SrcDstPrimitiveNode(n), spec_(spec) {}
  const char* type() const override { return "Eltwise"; }
  NodeKind kind() const override { return NodeKind::Eltwise; }
  int inplace_input() const override { return 0; }  // oneDNN eltwise may write over its source

  std::vector<InputLayout> prepare() override {
    auto make = [&](const memory::desc& src) {
      dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, spec_.alg, src, spec_.alpha, spec_.beta);
      return dnnl::eltwise_forward::primitive_desc(d, cpu_engine());
    };
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    pd_ = make(inputs[0]->desc());
    // oneDNN has JIT kernels for blocked layouts with padded channels only for ops that
    // map 0 to 0 (Relu, Clip(0, 6), ...); Exp, Sigmoid, ... run faster plain
    if (is_ref_impl(pd_.impl_info_str()) && !inputs[0]->is_plain()) {
      auto plain = make(*plain_desc(inputs[0]->shape, inputs[0]->dtype));
      if (!is_ref_impl(plain.impl_info_str())) {
        pd_ = plain;
        req[0] = InputLayout::plain();
      }
    }
    prim_ = dnnl::eltwise_forward(pd_);
    impl = pd_.impl_info_str();
    if (req[0].kind == InputLayout::Kind::plain) outputs[0]->blocked.reset();
    else outputs[0]->set_layout(pd_.dst_desc());
    return req;
  }

 private:
  EltwiseSpec spec_;
  dnnl::eltwise_forward::primitive_desc pd_;
};

}  // namespace

bool eltwise_supports(const ir::Node& n) {
  if (n.num_inputs() < 1 || !n.has_input(0) || n.num_outputs() != 1) return false;
  if (!eltwise_spec(n)) return false;  // most nodes asked are other ops: no shape looked at
  const ir::Value* x = n.input(0);
  const ir::Value* y = n.output(0);
  if (!is_f32_tensor(x) || y->type.dtype != DType::f32) return false;
  // (asked of every node as it is lowered, for every new input shape: y's dims compared in place)
  const Shape xs = x->is_constant() ? x->constant().shape() : x->type.shape.is_static() ? x->type.shape.to_shape() : Shape{};
  if (xs.empty() || xs.size() > 6 || shape_size(xs) == 0) return false;
  const ir::PartialShape& ys = y->type.shape;
  if (!ys.rank_known || ys.rank() != xs.size()) return false;
  for (size_t i = 0; i < xs.size(); ++i)
    if (ys.dims[i].value != xs[i]) return false;
  return true;
}

std::unique_ptr<Node> make_eltwise_node(const ir::Node& n) {
  auto spec = eltwise_spec(n);
  KILN_CHECK(spec.has_value(), cat(n.describe(), ": not an Eltwise op"));
  return std::make_unique<EltwiseNode>(n, *spec);
}

}  // namespace kiln::cpu
