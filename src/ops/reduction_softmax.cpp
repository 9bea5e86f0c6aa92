// Reduction family, part 2: Softmax, LogSoftmax, Hardmax, LayerNormalization,
// NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss.
#include <cmath>
#include <limits>
#include <optional>

#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"
#include "ops/reduction_util.hpp"

namespace kiln::ops {

namespace {

// ---------------- Softmax / LogSoftmax / Hardmax ----------------

enum class SM { Softmax, LogSoftmax, Hardmax };

// A tensor seen as [outer, n, inner] with the op applied along n.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};

bool legacy_softmax(const ir::Node& node) { return node.opset() != 0 && node.opset() < 13; }

// Opset < 13: the input is coerced to 2-D [prod(d < axis), prod(d >= axis)] and the op
// runs over the second dim. Opset >= 13: along the single dim `axis`.
AxisSplit softmax_split(const ir::RunContext& ctx, const Shape& s) {
  const ir::Node& node = ctx.node();
  const bool legacy = legacy_softmax(node);
  const int64_t rank = static_cast<int64_t>(s.size());
  KILN_CHECK(rank >= 1, ctx.error("input must have rank >= 1, got a scalar"));
  int64_t axis = node.attr_i("axis", legacy ? 1 : -1);
  int64_t a = axis < 0 ? axis + rank : axis;
  // legacy coercion allows axis == rank (everything in the outer dim)
  KILN_CHECK(a >= 0 && (a < rank || (legacy && a == rank)),
             ctx.error("axis ", axis, " is out of range for an input of rank ", rank));
  AxisSplit sp;
  for (int64_t d = 0; d < a; ++d) sp.outer *= s[static_cast<size_t>(d)];
  if (legacy) {
    sp.n = 1;
    for (int64_t d = a; d < rank; ++d) sp.n *= s[static_cast<size_t>(d)];
  } else {
    sp.n = s[static_cast<size_t>(a)];
    for (int64_t d = a + 1; d < rank; ++d) sp.inner *= s[static_cast<size_t>(d)];
  }
  return sp;
}

// out[o, :, in] = op(x[o, :, in]), computed in double.
template <SM K>
void softmax_lines(const AxisSplit& sp, const double* x, double* y) {
  for (int64_t o = 0; o < sp.outer; ++o) {
    for (int64_t in = 0; in < sp.inner; ++in) {
      const int64_t base = o * sp.n * sp.inner + in;
      if (sp.n == 0) continue;
      double mx = -std::numeric_limits<double>::infinity();
      int64_t arg = 0;
      for (int64_t k = 0; k < sp.n; ++k) {
        double v = x[base + k * sp.inner];
        if (v > mx) {
          mx = v;
          arg = k;
        }
      }
      if constexpr (K == SM::Hardmax) {
        for (int64_t k = 0; k < sp.n; ++k) y[base + k * sp.inner] = k == arg ? 1.0 : 0.0;
      } else {
        if (!std::isfinite(mx)) mx = 0;  // all -inf / inf / NaN: let IEEE arithmetic decide
        double sum = 0;
        for (int64_t k = 0; k < sp.n; ++k) sum += std::exp(x[base + k * sp.inner] - mx);
        if constexpr (K == SM::Softmax) {
          for (int64_t k = 0; k < sp.n; ++k) y[base + k * sp.inner] = std::exp(x[base + k * sp.inner] - mx) / sum;
        } else {
          double ls = std::log(sum);
          for (int64_t k = 0; k < sp.n; ++k) y[base + k * sp.inner] = x[base + k * sp.inner] - mx - ls;
        }
      }
    }
  }
}

template <SM K>
void add_softmax(ir::OpRegistry& r, const char* name) {
  ir::OpSchema s;
  s.name = name;
  s.since_version = 1;
  s.attrs = {{"axis", ir::AttrType::i}};
  s.infer = [](ir::InferContext& ctx) {
    const ir::PartialShape& in = ctx.input_shape(0);
    if (in.rank_known) {
      const int64_t rank = static_cast<int64_t>(in.rank());
      const bool legacy = legacy_softmax(ctx.node());
      int64_t axis = ctx.node().attr_i("axis", legacy ? 1 : -1);
      int64_t a = axis < 0 ? axis + rank : axis;
      if (!(a >= 0 && (a < rank || (legacy && a == rank))))
        throw ctx.error("axis ", axis, " is out of range for an input of rank ", rank);
    }
    ctx.set_output(0, ctx.input_dtype(0), in);
  };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    AxisSplit sp = softmax_split(ctx, x.shape());
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    dispatch_float(
        x.dtype(),
        [&](auto tag) {
          using T = typename decltype(tag)::type;
          const T* px = x.data<T>();
          T* py = y.data<T>();
          const int64_t n = x.size();
          std::vector<double> xd(static_cast<size_t>(n)), yd(static_cast<size_t>(n));
          for (int64_t i = 0; i < n; ++i) xd[static_cast<size_t>(i)] = to_double(px[i]);
          softmax_lines<K>(sp, xd.data(), yd.data());
          for (int64_t i = 0; i < n; ++i) py[i] = from_double<T>(yd[static_cast<size_t>(i)]);
        },
        ctx.node().op_type().c_str());
  };
  r.add(std::move(s));
}

// ---------------- LayerNormalization ----------------

DType stash_dtype(const ir::Node& n) {
  int64_t st = n.attr_i("stash_type", 1);
  switch (st) {
    case 1: return DType::f32;
    case 10: return DType::f16;
    case 11: return DType::f64;
    case 16: return DType::bf16;
    default: throw Error(cat(n.describe(), ": stash_type ", st, " is not a floating TensorProto type"));
  }
}

// Expands a Scale / B tensor (unidirectionally broadcast to `norm`) to norm's size.
std::vector<double> expand_param(const ir::RunContext& ctx, const Tensor& p, const Shape& norm, const char* what) {
  bool ok = p.rank() <= norm.size();
  for (size_t i = 0; ok && i < p.rank(); ++i) {
    int64_t d = p.shape()[i], want = norm[norm.size() - p.rank() + i];
    ok = d == want || d == 1;
  }
  KILN_CHECK(ok, ctx.error(what, " of shape ", shape_to_string(p.shape()),
                           " does not broadcast to the normalized shape ", shape_to_string(norm)));
  std::vector<double> vals = p.to_f64();
  std::vector<double> out(static_cast<size_t>(shape_size(norm)));
  for_each_broadcast<1>(norm, {p.shape()}, [&](int64_t i, const std::array<int64_t, 1>& off) {
    out[static_cast<size_t>(i)] = vals[static_cast<size_t>(off[0])];
  });
  return out;
}

void add_layer_norm(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "LayerNormalization";
  s.since_version = 17;
  s.min_inputs = 2;
  s.max_inputs = 3;
  s.min_outputs = 1;
  s.max_outputs = 3;
  s.attrs = {{"axis", ir::AttrType::i}, {"epsilon", ir::AttrType::f}, {"stash_type", ir::AttrType::i}};
  s.validate = [](const ir::Node& n) { (void)stash_dtype(n); };
  s.infer = [](ir::InferContext& ctx) {
    const ir::PartialShape& in = ctx.input_shape(0);
    ctx.set_output(0, ctx.input_dtype(0), in);
    DType st = stash_dtype(ctx.node());
    if (!in.rank_known) {
      ctx.set_output(1, st, ir::PartialShape::unknown_rank());
      ctx.set_output(2, st, ir::PartialShape::unknown_rank());
      return;
    }
    const int64_t rank = static_cast<int64_t>(in.rank());
    int64_t axis = ir::normalize_axis(ctx.node().attr_i("axis", -1), rank, ctx.node());
    std::vector<ir::Dim> st_dims;
    for (int64_t d = 0; d < rank; ++d) st_dims.push_back(d < axis ? in.dims[static_cast<size_t>(d)] : ir::Dim(1));
    ctx.set_output(1, st, ir::PartialShape(st_dims));
    ctx.set_output(2, st, ir::PartialShape(st_dims));
  };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const ir::Node& node = ctx.node();
    const int64_t rank = static_cast<int64_t>(x.rank());
    KILN_CHECK(rank >= 1, ctx.error("input must have rank >= 1, got a scalar"));
    const int64_t axis = normalize_axis(node.attr_i("axis", -1), rank, node);
    const double eps = node.attr_f("epsilon", 1e-5f);
    const DType st = stash_dtype(node);
    const Shape& xs = x.shape();
    Shape norm(xs.begin() + axis, xs.end());
    Shape st_shape = xs;
    for (int64_t d = axis; d < rank; ++d) st_shape[static_cast<size_t>(d)] = 1;
    const int64_t m = shape_size(norm);
    const int64_t outer = m == 0 ? 0 : x.size() / m;
    std::vector<double> scale = expand_param(ctx, ctx.input(1), norm, "Scale");
    std::vector<double> bias = ctx.has_input(2) ? expand_param(ctx, ctx.input(2), norm, "B")
                                                : std::vector<double>(static_cast<size_t>(m), 0.0);
    Tensor& y = ctx.allocate_output(0, x.dtype(), xs);
    std::vector<double> means(static_cast<size_t>(shape_size(st_shape))), invs(means.size());
    dispatch_float(
        x.dtype(),
        [&](auto tag) {
          using T = typename decltype(tag)::type;
          const T* px = x.data<T>();
          T* py = y.data<T>();
          std::vector<double> row(static_cast<size_t>(m));
          for (int64_t o = 0; o < outer; ++o) {
            double sum = 0;
            for (int64_t i = 0; i < m; ++i) sum += row[static_cast<size_t>(i)] = to_double(px[o * m + i]);
            const double mean = sum / static_cast<double>(m);
            double var = 0;
            for (int64_t i = 0; i < m; ++i) {
              double dv = row[static_cast<size_t>(i)] - mean;
              var += dv * dv;
            }
            var /= static_cast<double>(m);
            const double inv = 1.0 / std::sqrt(var + eps);
            for (int64_t i = 0; i < m; ++i)
              py[o * m + i] = from_double<T>((row[static_cast<size_t>(i)] - mean) * inv * scale[static_cast<size_t>(i)] +
                                             bias[static_cast<size_t>(i)]);
            means[static_cast<size_t>(o)] = mean;
            invs[static_cast<size_t>(o)] = inv;
          }
        },
        "LayerNormalization");
    for (size_t k = 1; k < ctx.num_outputs() && k <= 2; ++k) {
      Tensor& t = ctx.allocate_output(k, st, st_shape);
      const std::vector<double>& src = k == 1 ? means : invs;
      dispatch_float(st, [&](auto tag) {
        using U = typename decltype(tag)::type;
        U* p = t.data<U>();
        for (size_t i = 0; i < src.size(); ++i) p[i] = from_double<U>(src[i]);
      });
    }
  };
  r.add(std::move(s));
}

// ---------------- NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss ----------------

void validate_loss(const ir::Node& n) {
  std::string red = n.attr_s("reduction", "mean");
  KILN_CHECK(red == "none" || red == "sum" || red == "mean",
             cat(n.describe(), ": reduction must be 'none', 'sum' or 'mean', got '", red, "'"));
}

void infer_loss(ir::InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  if (ctx.node().attr_s("reduction", "mean") == "none") {
    ctx.set_output(0, dt, ctx.input_shape(1));
  } else {
    ctx.set_output(0, dt, ir::PartialShape(Shape{}));
  }
  ctx.set_output(1, dt, ctx.input_shape(0));  // SoftmaxCrossEntropyLoss log_prob
}

// Loss from log-probabilities logp laid out [N, C, D] (D = product of the trailing dims).
void nll_loss(ir::RunContext& ctx, const std::vector<double>& logp, const Shape& in_shape, DType dt) {
  const ir::Node& node = ctx.node();
  KILN_CHECK(in_shape.size() >= 2, ctx.error("input must have shape [N, C, d1, ...], got ", shape_to_string(in_shape)));
  const Tensor& target = ctx.input(1);
  KILN_CHECK(target.dtype() == DType::i32 || target.dtype() == DType::i64,
             ctx.error("target must be int32 or int64, got ", dtype_name(target.dtype())));
  Shape want_t{in_shape[0]};
  want_t.insert(want_t.end(), in_shape.begin() + 2, in_shape.end());
  KILN_CHECK(target.shape() == want_t, ctx.error("target shape ", shape_to_string(target.shape()),
                                                 " does not match input shape ", shape_to_string(in_shape),
                                                 " (expected ", shape_to_string(want_t), ")"));
  const int64_t N = in_shape[0], C = in_shape[1];
  const int64_t D = shape_size(Shape(in_shape.begin() + 2, in_shape.end()));
  std::vector<double> weight;
  if (ctx.has_input(2)) {
    const Tensor& w = ctx.input(2);
    KILN_CHECK(w.shape() == Shape{C}, ctx.error("weight must have shape [", C, "], got ", shape_to_string(w.shape())));
    weight = w.to_f64();
  }
  std::optional<int64_t> ii;
  if (node.has_attr("ignore_index")) ii = node.attr_i("ignore_index");
  const std::string red = node.attr_s("reduction", "mean");
  std::vector<int64_t> t = target.to_i64();
  std::vector<double> loss(t.size());
  double loss_sum = 0, w_sum = 0;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t d = 0; d < D; ++d) {
      const size_t ti = static_cast<size_t>(n * D + d);
      const int64_t c = t[ti];
      if (ii && c == *ii) {
        loss[ti] = 0;
        continue;
      }
      KILN_CHECK(c >= 0 && c < C, ctx.error("target value ", c, " is out of range [0, ", C, ")"));
      const double w = weight.empty() ? 1.0 : weight[static_cast<size_t>(c)];
      loss[ti] = -logp[static_cast<size_t>((n * C + c) * D + d)] * w;
      loss_sum += loss[ti];
      w_sum += w;
    }
  }
  dispatch_float(
      dt,
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        if (red == "none") {
          Tensor& out = ctx.allocate_output(0, dt, target.shape());
          T* p = out.data<T>();
          for (size_t i = 0; i < loss.size(); ++i) p[i] = from_double<T>(loss[i]);
        } else {
          Tensor& out = ctx.allocate_output(0, dt, Shape{});
          out.data<T>()[0] = from_double<T>(red == "sum" ? loss_sum : loss_sum / w_sum);
        }
      },
      node.op_type().c_str());
}

std::vector<double> input_as_f64(const ir::RunContext& ctx) {
  const Tensor& x = ctx.input(0);
  dispatch_float(x.dtype(), [](auto) {}, ctx.node().op_type().c_str());  // dtype check
  return x.to_f64();
}

void add_losses(ir::OpRegistry& r) {
  {
    ir::OpSchema s;
    s.name = "NegativeLogLikelihoodLoss";
    s.since_version = 12;
    s.min_inputs = 2;
    s.max_inputs = 3;
    s.attrs = {{"reduction", ir::AttrType::s}, {"ignore_index", ir::AttrType::i}};
    s.validate = validate_loss;
    s.infer = infer_loss;
    s.run = [](ir::RunContext& ctx) {
      std::vector<double> x = input_as_f64(ctx);
      nll_loss(ctx, x, ctx.input(0).shape(), ctx.input(0).dtype());
    };
    r.add(std::move(s));
  }
  {
    ir::OpSchema s;
    s.name = "SoftmaxCrossEntropyLoss";
    s.since_version = 12;
    s.min_inputs = 2;
    s.max_inputs = 3;
    s.min_outputs = 1;
    s.max_outputs = 2;
    s.attrs = {{"reduction", ir::AttrType::s}, {"ignore_index", ir::AttrType::i}};
    s.validate = validate_loss;
    s.infer = infer_loss;
    s.run = [](ir::RunContext& ctx) {
      const Tensor& x = ctx.input(0);
      const Shape& xs = x.shape();
      KILN_CHECK(xs.size() >= 2, ctx.error("scores must have shape [N, C, d1, ...], got ", shape_to_string(xs)));
      std::vector<double> xd = input_as_f64(ctx);
      AxisSplit sp;
      sp.outer = xs[0];
      sp.n = xs[1];
      sp.inner = shape_size(Shape(xs.begin() + 2, xs.end()));
      std::vector<double> logp(xd.size());
      softmax_lines<SM::LogSoftmax>(sp, xd.data(), logp.data());
      nll_loss(ctx, logp, xs, x.dtype());
      if (ctx.num_outputs() > 1) {
        Tensor& lp = ctx.allocate_output(1, x.dtype(), xs);
        dispatch_float(x.dtype(), [&](auto tag) {
          using T = typename decltype(tag)::type;
          T* p = lp.data<T>();
          for (size_t i = 0; i < logp.size(); ++i) p[i] = from_double<T>(logp[i]);
        });
      }
    };
    r.add(std::move(s));
  }
}

}  // namespace

void register_rms_norm(ir::OpRegistry& r);  // reduction_rms_norm.cpp
void register_skip_layer_norm(ir::OpRegistry& r);  // reduction_skip_layer_norm.cpp

void register_reduction_softmax_ops(ir::OpRegistry& r) {
  register_rms_norm(r);
  register_skip_layer_norm(r);
  add_softmax<SM::Softmax>(r, "Softmax");
  add_softmax<SM::LogSoftmax>(r, "LogSoftmax");
  add_softmax<SM::Hardmax>(r, "Hardmax");
  add_layer_norm(r);
  add_losses(r);
}

}  // namespace kiln::ops
