// com.microsoft SkipLayerNormalization: LayerNorm over the last axis of input + skip (+ bias),
// what the SkipLayerNorm pattern makes of a transformer's residual Add followed by a
// LayerNormalization. Inputs: input [.., C], skip (same shape), gamma [C], beta [C]
// (optional), bias [C] (optional); attribute epsilon. Outputs: output; optionally mean and
// inv_std_var ([.., 1], f32) and input_skip_bias_sum (the sum before normalisation).
#include <cmath>

#include "core/dispatch.hpp"
#include "core/strings.hpp"
#include "ir/op_registry.hpp"

namespace kiln::ops {

void register_skip_layer_norm(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.domain = "com.microsoft";
  s.name = "SkipLayerNormalization";
  s.since_version = 1;
  s.min_inputs = 3;
  s.max_inputs = 5;
  s.min_outputs = 1;
  s.max_outputs = 4;
  s.attrs = {{"epsilon", ir::AttrType::f}};
  s.infer = [](ir::InferContext& ctx) {
    const DType dt = ctx.input_dtype(0);
    if (dt != DType::undefined && dt != DType::f32) throw ctx.error("input must be f32, got ", dtype_name(dt));
    const ir::PartialShape& x = ctx.input_shape(0);
    const ir::PartialShape& sk = ctx.input_shape(1);
    if (x.rank_known && x.rank() < 1) throw ctx.error("input must have rank >= 1");
    if (x.rank_known && sk.rank_known && x.is_static() && sk.is_static() && x.to_shape() != sk.to_shape())
      throw ctx.error("skip ", sk.to_string(), " must have the input's shape ", x.to_string());
    for (size_t i = 2; i < 5; ++i) {
      if (!ctx.has_input(i)) continue;
      const ir::PartialShape& p = ctx.input_shape(i);
      if (p.rank_known && p.rank() != 1) throw ctx.error("input ", i, " must be 1-D, got ", p.to_string());
    }
    ctx.set_output(0, dt, x);
    if (x.rank_known) {
      std::vector<ir::Dim> st(x.dims.begin(), x.dims.end());
      st.back() = ir::Dim(1);
      for (size_t o = 1; o < 3; ++o) ctx.set_output(o, DType::f32, ir::PartialShape(st));
    } else {
      for (size_t o = 1; o < 3; ++o) ctx.set_output(o, DType::f32, ir::PartialShape::unknown_rank());
    }
    ctx.set_output(3, dt, x);
  };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& skip = ctx.input(1);
    KILN_CHECK(x.dtype() == DType::f32 && skip.dtype() == DType::f32 && x.rank() >= 1 && skip.shape() == x.shape(),
               ctx.error("input and skip must be f32 tensors of one shape"));
    const int64_t c = x.shape().back();
    auto param = [&](size_t i, double def) {
      std::vector<double> v(static_cast<size_t>(c), def);
      if (!ctx.has_input(i)) return v;
      const Tensor& p = ctx.input(i);
      KILN_CHECK(p.rank() == 1 && p.shape()[0] == c, ctx.error("input ", i, " must have ", c, " values"));
      return p.to_f64();
    };
    const std::vector<double> gamma = param(2, 1.0), beta = param(3, 0.0), bias = param(4, 0.0);
    const double eps = ctx.node().attr_f("epsilon", 1e-12f);
    const int64_t rows = c == 0 ? 0 : x.size() / c;
    Shape st = x.shape();
    st.back() = 1;
    Tensor& y = ctx.allocate_output(0, DType::f32, x.shape());
    const size_t nout = ctx.num_outputs();
    float* mean = nout > 1 ? ctx.allocate_output(1, DType::f32, st).data<float>() : nullptr;
    float* inv = nout > 2 ? ctx.allocate_output(2, DType::f32, st).data<float>() : nullptr;
    float* sum = nout > 3 ? ctx.allocate_output(3, DType::f32, x.shape()).data<float>() : nullptr;
    const float* px = x.data<float>();
    const float* ps = skip.data<float>();
    float* py = y.data<float>();
#pragma omp parallel for if (rows * c > 32768) schedule(static)
    for (int64_t i = 0; i < rows; ++i) {
      std::vector<double> v(static_cast<size_t>(c));
      double m = 0;
      for (int64_t j = 0; j < c; ++j) {
        const float s32 = static_cast<float>(static_cast<double>(px[i * c + j]) + ps[i * c + j] + bias[static_cast<size_t>(j)]);
        v[static_cast<size_t>(j)] = s32;
        if (sum) sum[i * c + j] = s32;
        m += s32;
      }
      m /= static_cast<double>(c);
      double var = 0;
      for (double e : v) var += (e - m) * (e - m);
      var /= static_cast<double>(c);
      const double is = 1.0 / std::sqrt(var + eps);
      for (int64_t j = 0; j < c; ++j)
        py[i * c + j] = static_cast<float>((v[static_cast<size_t>(j)] - m) * is * gamma[static_cast<size_t>(j)] +
                                           beta[static_cast<size_t>(j)]);
      if (mean) mean[i] = static_cast<float>(m);
      if (inv) inv[i] = static_cast<float>(is);
    }
  };
  r.add(std::move(s));
}

}  // namespace kiln::ops
