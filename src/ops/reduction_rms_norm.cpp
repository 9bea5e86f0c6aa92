// RMSNormalization (domain "kiln"): y = x / sqrt(mean(x^2 over the last axis) + epsilon) * scale,
// what the RMSNorm pattern (src/pattern/library/rms_norm.json) makes of LLaMA / T5-style
// decompositions. Inputs X (float, rank >= 1) and Scale ([C], C = X's last dim); attribute
// epsilon. Rows are independent: split across the OpenMP team, accumulated in double.
#include <cmath>

#include "core/dispatch.hpp"
#include "core/strings.hpp"
#include "ir/op_registry.hpp"

namespace kiln::ops {

void register_rms_norm(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.domain = "kiln";
  s.name = "RMSNormalization";
  s.since_version = 1;
  s.min_inputs = s.max_inputs = 2;
  s.attrs = {{"epsilon", ir::AttrType::f}};
  s.validate = [](const ir::Node& n) {
    KILN_CHECK(!(n.attr_f("epsilon", 1e-6f) < 0), cat(n.describe(), ": epsilon must be >= 0"));
  };
  s.infer = [](ir::InferContext& ctx) {
    const DType dt = ctx.input_dtype(0);
    if (dt != DType::undefined && !is_floating(dt)) throw ctx.error("X must be a float tensor, got ", dtype_name(dt));
    const ir::PartialShape& x = ctx.input_shape(0);
    const ir::PartialShape& sc = ctx.input_shape(1);
    if (x.rank_known && x.rank() == 0) throw ctx.error("X must have rank >= 1");
    if (sc.rank_known && sc.rank() != 1) throw ctx.error("Scale must be 1-D, got ", sc.to_string());
    if (x.rank_known && sc.rank_known && x.dims.back().is_static() && sc.dims[0].is_static() &&
        x.dims.back().value != sc.dims[0].value)
      throw ctx.error("Scale has ", sc.dims[0].value, " values, X's last dim is ", x.dims.back().value);
    ctx.set_output(0, dt, x);
  };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& sc = ctx.input(1);
    KILN_CHECK(x.rank() >= 1, ctx.error("X must have rank >= 1"));
    const int64_t c = x.shape().back();
    KILN_CHECK(sc.rank() == 1 && sc.shape()[0] == c,
               ctx.error("Scale ", shape_to_string(sc.shape()), " does not match X's last dim ", c));
    const double eps = ctx.node().attr_f("epsilon", 1e-6f);
    const std::vector<double> gamma = sc.to_f64();
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    const int64_t rows = c == 0 ? 0 : x.size() / c;
    dispatch_float(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* px = x.data<T>();
      T* py = y.data<T>();
#pragma omp parallel for if (rows * c > 32768) schedule(static)
      for (int64_t i = 0; i < rows; ++i) {
        const T* row = px + i * c;
        double ss = 0;
        for (int64_t j = 0; j < c; ++j) {
          const double v = static_cast<double>(static_cast<float>(row[j]));
          ss += v * v;
        }
        const double inv = 1.0 / std::sqrt(ss / static_cast<double>(c) + eps);
        for (int64_t j = 0; j < c; ++j)
          py[i * c + j] = T(static_cast<float>(static_cast<double>(static_cast<float>(row[j])) * inv * gamma[static_cast<size_t>(j)]));
      }
    }, ctx.node().describe().c_str());
  };
  r.add(std::move(s));
}

}  // namespace kiln::ops
