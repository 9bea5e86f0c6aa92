// RMSNormalization (domain "kiln", and ONNX's of opset 23, which normalises over the dims from
// `axis` on): y = x / sqrt(mean(x^2 over the last axis) + epsilon) * scale,
// what the RMSNorm pattern (src/pattern/library/rms_norm.json) makes of LLaMA / T5-style
// decompositions. Inputs X (float, rank >= 1) and Scale ([C], C = X's last dim); attribute
// epsilon. Rows are independent: split across the OpenMP team, accumulated in double.
#include <cmath>

#include "core/dispatch.hpp"
#include "core/strings.hpp"
#include "ir/infer_util.hpp"
#include "ir/op_registry.hpp"

namespace kiln::ops {

namespace {

// y[i, j] = x[i, j] / sqrt(mean_j(x[i, :]^2) + eps) * gamma[j] over rows of c elements; rows
// split across the OpenMP team, sums in double. y may have another float type than x.
void rms_norm_rows(const Tensor& x, const std::vector<double>& gamma, double eps, Tensor& y, const char* what) {
  const int64_t c = static_cast<int64_t>(gamma.size());
  const int64_t rows = c == 0 ? 0 : x.size() / c;
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_float(y.dtype(), [&](auto otag) {
      using O = typename decltype(otag)::type;
      const T* px = x.data<T>();
      O* py = y.data<O>();
#pragma omp parallel for if (rows * c > 32768) schedule(static)
      for (int64_t i = 0; i < rows; ++i) {
        const T* row = px + i * c;
        double ss = 0;
        for (int64_t j = 0; j < c; ++j) {
          const double v = static_cast<double>(row[j]);
          ss += v * v;
        }
        const double inv = 1.0 / std::sqrt(ss / static_cast<double>(c) + eps);
        for (int64_t j = 0; j < c; ++j) {
          const double r = static_cast<double>(row[j]) * inv * gamma[static_cast<size_t>(j)];
          if constexpr (std::is_same_v<O, double>) py[i * c + j] = r;
          else py[i * c + j] = O(static_cast<float>(r));
        }
      }
    }, what);
  }, what);
}

}  // namespace

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
    rms_norm_rows(x, gamma, eps, y, ctx.node().describe().c_str());
  };
  r.add(std::move(s));

  // ONNX RMSNormalization (opset 23): normalises over the dims from `axis` to the last one
  // (default -1), Scale broadcast against them; computed in double (stash_type 1 asks for at
  // least float).
  ir::OpSchema o;
  o.name = "RMSNormalization";
  o.since_version = 23;
  o.max_version = 23;
  o.min_inputs = o.max_inputs = 2;
  o.attrs = {{"axis", ir::AttrType::i}, {"epsilon", ir::AttrType::f}, {"stash_type", ir::AttrType::i}};
  o.infer = [](ir::InferContext& ctx) {
    const DType dt = ctx.input_dtype(0);
    if (dt != DType::undefined && !is_floating(dt)) throw ctx.error("X must be a float tensor, got ", dtype_name(dt));
    const ir::PartialShape& x = ctx.input_shape(0);
    if (x.rank_known) ir::normalize_axis(ctx.node().attr_i("axis", -1), static_cast<int64_t>(x.rank()), ctx.node());
    ctx.set_output(0, ctx.input_dtype(1) != DType::undefined ? ctx.input_dtype(1) : dt, x);
  };
  o.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& sc = ctx.input(1);
    const int64_t rank = static_cast<int64_t>(x.rank());
    KILN_CHECK(rank >= 1, ctx.error("X must have rank >= 1"));
    KILN_CHECK(is_floating(x.dtype()) && is_floating(sc.dtype()), ctx.error("X and scale must be float tensors"));
    const int64_t axis = ir::normalize_axis(ctx.node().attr_i("axis", -1), rank, ctx.node());
    const Shape norm_shape(x.shape().begin() + axis, x.shape().end());
    // scale broadcast (numpy rules, unidirectional) to the normalised dims
    const Shape& ss = sc.shape();
    KILN_CHECK(ss.size() <= norm_shape.size(), ctx.error("scale ", shape_to_string(ss), " does not broadcast to ",
                                                         shape_to_string(norm_shape)));
    int64_t inner = 1;
    for (int64_t d : norm_shape) inner *= d;
    const std::vector<double> sv = sc.to_f64();
    std::vector<double> gamma(static_cast<size_t>(inner));
    const size_t off = norm_shape.size() - ss.size();
    for (size_t k = 0; k < ss.size(); ++k)
      KILN_CHECK(ss[k] == 1 || ss[k] == norm_shape[off + k],
                 ctx.error("scale ", shape_to_string(ss), " does not broadcast to ", shape_to_string(norm_shape)));
    for (int64_t i = 0; i < inner; ++i) {
      int64_t rem = i, si = 0, mul = 1;
      for (size_t d = norm_shape.size(); d-- > 0;) {
        const int64_t c = rem % norm_shape[d];
        rem /= norm_shape[d];
        if (d >= off) {
          const int64_t sd = ss[d - off];
          if (sd != 1) si += c * mul;
          mul *= sd;
        }
      }
      gamma[static_cast<size_t>(i)] = sv[static_cast<size_t>(si)];
    }
    const double eps = ctx.node().attr_f("epsilon", 1e-5f);
    Tensor& out = ctx.allocate_output(0, sc.dtype(), x.shape());
    rms_norm_rows(x, gamma, eps, out, ctx.node().describe().c_str());
  };
  r.add(std::move(o));
}

}  // namespace kiln::ops
