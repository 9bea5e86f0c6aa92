// SqueezeExcite (domain "kiln"): a squeeze-and-excitation block as one op, what
// FuseSqueezeExcite (transforms/fuse_squeeze_excite.hpp) makes of MobileNet-v3's and
// EfficientNet's GlobalAveragePool -> 1x1 Conv -> activation -> 1x1 Conv -> gate -> Mul:
//   s[n, c] = gate(B2 + W2 act(B1 + W1 mean(x[n, :, spatial])))[c],  y = x * s
// Inputs: X [N, C, spatial...] f32, W1 [R, C], B1 [R], W2 [C, R], B2 [C] (f32 constants in the
// pass's graphs, any tensors here). Attributes: activation "Relu" or "Swish" (x * sigmoid(x));
// gate "Sigmoid" or "HardSigmoid" (max(0, min(1, gate_alpha x + gate_beta)), ONNX's defaults
// 0.2 and 0.5). Output: Y, X's shape and type.
#include <cmath>

#include "core/strings.hpp"
#include "ir/op_registry.hpp"
#include "ops/nn_common.hpp"

namespace kiln::ops::nn {

namespace {

void check_attrs(const ir::Node& n) {
  const std::string act = n.attr_s("activation", "Relu"), gate = n.attr_s("gate", "Sigmoid");
  KILN_CHECK(act == "Relu" || act == "Swish", cat(n.describe(), ": activation must be \"Relu\" or \"Swish\", got \"", act, "\""));
  KILN_CHECK(gate == "Sigmoid" || gate == "HardSigmoid",
             cat(n.describe(), ": gate must be \"Sigmoid\" or \"HardSigmoid\", got \"", gate, "\""));
  const float a = n.attr_f("gate_alpha", 0.2f), b = n.attr_f("gate_beta", 0.5f);
  KILN_CHECK(std::isfinite(a) && std::isfinite(b), cat(n.describe(), ": gate_alpha and gate_beta must be finite"));
}

}  // namespace

void register_squeeze_excite_ops(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.domain = "kiln";
  s.name = "SqueezeExcite";
  s.since_version = 1;
  s.min_inputs = 5;
  s.max_inputs = 5;
  s.attrs = {{"activation", ir::AttrType::s, false},
             {"gate", ir::AttrType::s, false},
             {"gate_alpha", ir::AttrType::f, false},
             {"gate_beta", ir::AttrType::f, false}};
  s.validate = check_attrs;
  s.infer = [](ir::InferContext& ctx) {
    for (size_t i = 0; i < 5; ++i)
      if (ctx.input_dtype(i) != DType::undefined && ctx.input_dtype(i) != DType::f32)
        throw ctx.error("input ", i, " must be f32, got ", dtype_name(ctx.input_dtype(i)));
    const ir::PartialShape& x = ctx.input_shape(0);
    if (x.rank_known && x.rank() < 3) throw ctx.error("X must be [N, C, spatial...], got ", x.to_string());
    const ir::PartialShape &w1 = ctx.input_shape(1), &b1 = ctx.input_shape(2), &w2 = ctx.input_shape(3),
                           &b2 = ctx.input_shape(4);
    for (const auto* p : {&w1, &w2})
      if (p->rank_known && p->rank() != 2) throw ctx.error("W1 and W2 must be 2-D, got ", p->to_string());
    for (const auto* p : {&b1, &b2})
      if (p->rank_known && p->rank() != 1) throw ctx.error("B1 and B2 must be 1-D, got ", p->to_string());
    auto known = [](const ir::PartialShape& p, size_t i) { return p.rank_known && p.dims[i].is_static(); };
    auto dim = [](const ir::PartialShape& p, size_t i) { return p.dims[i].value; };
    if (known(x, 1) && known(w1, 1) && dim(x, 1) != dim(w1, 1))
      throw ctx.error("W1 ", w1.to_string(), " must take X's ", dim(x, 1), " channels");
    if (known(w1, 0) && known(w2, 1) && dim(w1, 0) != dim(w2, 1))
      throw ctx.error("W2 ", w2.to_string(), " must take W1's ", dim(w1, 0), " outputs");
    if (known(x, 1) && known(w2, 0) && dim(x, 1) != dim(w2, 0))
      throw ctx.error("W2 ", w2.to_string(), " must give X's ", dim(x, 1), " channels");
    if (known(w1, 0) && known(b1, 0) && dim(w1, 0) != dim(b1, 0)) throw ctx.error("B1 must have W1's ", dim(w1, 0), " values");
    if (known(w2, 0) && known(b2, 0) && dim(w2, 0) != dim(b2, 0)) throw ctx.error("B2 must have W2's ", dim(w2, 0), " values");
    ctx.set_output(0, DType::f32, x);
  };
  s.run = [](ir::RunContext& ctx) {
    const ir::Node& n = ctx.node();
    const Tensor& x = ctx.input(0);
    KILN_CHECK(x.dtype() == DType::f32 && x.rank() >= 3, ctx.error("X must be an f32 [N, C, spatial...] tensor"));
    const int64_t batch = x.shape()[0], c = x.shape()[1], pixels = c == 0 || batch == 0 ? 0 : x.size() / batch / c;
    const Tensor &w1 = ctx.input(1), &w2 = ctx.input(3);
    KILN_CHECK(w1.rank() == 2 && w1.shape()[1] == c && w2.rank() == 2 && w2.shape()[0] == c && w2.shape()[1] == w1.shape()[0],
               ctx.error("W1 must be [R, ", c, "] and W2 [", c, ", R]"));
    const int64_t r = w1.shape()[0];
    const std::vector<double> W1 = w1.to_f64(), W2 = w2.to_f64(), B1 = ctx.input(2).to_f64(), B2 = ctx.input(4).to_f64();
    KILN_CHECK(static_cast<int64_t>(B1.size()) == r && static_cast<int64_t>(B2.size()) == c,
               ctx.error("B1 must have ", r, " values and B2 ", c));
    const bool swish = n.attr_s("activation", "Relu") == "Swish", hard = n.attr_s("gate", "Sigmoid") == "HardSigmoid";
    const double alpha = n.attr_f("gate_alpha", 0.2f), beta = n.attr_f("gate_beta", 0.5f);
    Tensor& y = ctx.allocate_output(0, DType::f32, x.shape());
    const float* px = x.data<float>();
    float* py = y.data<float>();
    std::vector<double> mean(static_cast<size_t>(c)), h(static_cast<size_t>(r));
    for (int64_t i = 0; i < batch; ++i) {
      for (int64_t k = 0; k < c; ++k) {
        double sum = 0;
        for (int64_t p = 0; p < pixels; ++p) sum += px[(i * c + k) * pixels + p];
        mean[static_cast<size_t>(k)] = pixels ? sum / static_cast<double>(pixels) : 0.0;
      }
      for (int64_t j = 0; j < r; ++j) {
        double v = B1[static_cast<size_t>(j)];
        for (int64_t k = 0; k < c; ++k) v += W1[static_cast<size_t>(j * c + k)] * mean[static_cast<size_t>(k)];
        h[static_cast<size_t>(j)] = swish ? v / (1.0 + std::exp(-v)) : std::max(v, 0.0);
      }
      for (int64_t k = 0; k < c; ++k) {
        double v = B2[static_cast<size_t>(k)];
        for (int64_t j = 0; j < r; ++j) v += W2[static_cast<size_t>(k * r + j)] * h[static_cast<size_t>(j)];
        const double s = hard ? std::max(0.0, std::min(1.0, alpha * v + beta)) : 1.0 / (1.0 + std::exp(-v));
        for (int64_t p = 0; p < pixels; ++p) {
          const int64_t at = (i * c + k) * pixels + p;
          py[at] = static_cast<float>(px[at] * s);
        }
      }
    }
  };
  r.add(std::move(s));
}

}  // namespace kiln::ops::nn
