// Random generators: RandomNormal, RandomUniform, RandomNormalLike, RandomUniformLike,
// Bernoulli, Multinomial. std::mt19937 seeded from the `seed` attribute when given (each run restarts
// from the seed, so seeded nodes are reproducible), else from std::random_device.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"
#include "ops/op_families.hpp"

namespace kiln::ops {

// misc.cpp
void misc_store_f64(Tensor& t, const std::vector<double>& v, const char* what);

namespace {

std::mt19937 make_engine(const ir::Node& n) {
  if (n.has_attr("seed")) {
    const float s = n.attr_f("seed");
    const double sd = std::isfinite(s) ? std::fabs(static_cast<double>(s)) : 0.0;
    return std::mt19937(static_cast<uint32_t>(std::fmod(std::floor(sd), 4294967296.0)));
  }
  std::random_device rd;
  return std::mt19937(rd());
}

// Output dtype: the `dtype` attribute, else `def`.
DType out_dtype(const ir::Node& n, DType def) {
  return dtype_attr(n, "dtype", def);
}

void check_float_dtype(const ir::Node& n, DType dt) {
  KILN_CHECK(is_floating(dt), cat(n.describe(), ": output type must be floating point, got ", dtype_name(dt)));
}

enum class Dist { normal, uniform };

std::vector<double> sample(const ir::Node& n, Dist dist, int64_t count) {
  std::mt19937 eng = make_engine(n);
  std::vector<double> v(static_cast<size_t>(count));
  if (dist == Dist::normal) {
    std::normal_distribution<double> d(n.attr_f("mean", 0.f), n.attr_f("scale", 1.f));
    for (auto& x : v) x = d(eng);
  } else {
    const double lo = n.attr_f("low", 0.f), hi = n.attr_f("high", 1.f);
    std::uniform_real_distribution<double> d(0.0, 1.0);
    for (auto& x : v) x = lo + (hi - lo) * d(eng);
  }
  return v;
}

std::vector<ir::AttrSpec> dist_attrs(Dist dist) {
  if (dist == Dist::normal) return {{"mean", ir::AttrType::f}, {"scale", ir::AttrType::f}, {"seed", ir::AttrType::f}};
  return {{"high", ir::AttrType::f}, {"low", ir::AttrType::f}, {"seed", ir::AttrType::f}};
}

void validate_dist(const ir::Node& n, Dist dist) {
  if (dist == Dist::normal) {
    float sc = n.attr_f("scale", 1.f);
    KILN_CHECK(std::isfinite(sc) && sc >= 0, cat(n.describe(), ": attribute 'scale' must be >= 0, got ", sc));
    KILN_CHECK(std::isfinite(n.attr_f("mean", 0.f)), cat(n.describe(), ": attribute 'mean' must be finite"));
  } else {
    float lo = n.attr_f("low", 0.f), hi = n.attr_f("high", 1.f);
    KILN_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo <= hi,
               cat(n.describe(), ": need finite low <= high, got low=", lo, " high=", hi));
  }
}

void add_random(ir::OpRegistry& r, const char* name, Dist dist) {
  ir::OpSchema s;
  s.name = name;
  s.since_version = 1;
  s.min_inputs = 0;
  s.max_inputs = 0;
  s.attrs = dist_attrs(dist);
  s.attrs.push_back({"dtype", ir::AttrType::i});
  s.attrs.push_back({"shape", ir::AttrType::ints, true});
  s.validate = [dist](const ir::Node& n) {
    check_float_dtype(n, out_dtype(n, DType::f32));
    for (int64_t d : n.attr_ints("shape"))
      KILN_CHECK(d >= 0, cat(n.describe(), ": attribute 'shape' has a negative dim ", d));
    validate_dist(n, dist);
  };
  s.infer = [](ir::InferContext& ctx) {
    const ir::Node& n = ctx.node();
    ctx.set_output(0, out_dtype(n, DType::f32), ir::PartialShape(Shape(n.attr_ints("shape"))));
  };
  s.run = [dist](RunContext& ctx) {
    const ir::Node& n = ctx.node();
    Tensor& y = ctx.allocate_output(0, out_dtype(n, DType::f32), Shape(n.attr_ints("shape")));
    misc_store_f64(y, sample(n, dist, y.size()), n.op_type().c_str());
  };
  r.add(std::move(s));
}

void add_random_like(ir::OpRegistry& r, const char* name, Dist dist) {
  ir::OpSchema s;
  s.name = name;
  s.since_version = 1;
  s.attrs = dist_attrs(dist);
  s.attrs.push_back({"dtype", ir::AttrType::i});
  s.validate = [dist](const ir::Node& n) {
    if (n.has_attr("dtype")) check_float_dtype(n, out_dtype(n, DType::f32));
    validate_dist(n, dist);
  };
  s.infer = [](ir::InferContext& ctx) {
    DType dt = out_dtype(ctx.node(), ctx.input_dtype(0));
    if (!is_floating(dt)) throw ctx.error("output type must be floating point, got ", dtype_name(dt));
    ctx.set_output(0, dt, ctx.input_shape(0));
  };
  s.run = [dist](RunContext& ctx) {
    const ir::Node& n = ctx.node();
    const Tensor& x = ctx.input(0);
    DType dt = out_dtype(n, x.dtype());
    if (!is_floating(dt)) throw ctx.error("output type must be floating point, got ", dtype_name(dt));
    Tensor& y = ctx.allocate_output(0, dt, x.shape());
    misc_store_f64(y, sample(n, dist, y.size()), n.op_type().c_str());
  };
  r.add(std::move(s));
}

void add_bernoulli(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Bernoulli";
  s.since_version = 15;
  s.attrs = {{"dtype", ir::AttrType::i}, {"seed", ir::AttrType::f}};
  s.validate = [](const ir::Node& n) {
    if (n.has_attr("dtype")) out_dtype(n, DType::f32);
  };
  s.infer = [](ir::InferContext& ctx) {
    ctx.set_output(0, out_dtype(ctx.node(), ctx.input_dtype(0)), ctx.input_shape(0));
  };
  s.run = [](RunContext& ctx) {
    const ir::Node& n = ctx.node();
    const Tensor& x = ctx.input(0);
    if (!is_floating(x.dtype())) throw ctx.error("input must be a floating point tensor, got ", dtype_name(x.dtype()));
    const std::vector<double> p = x.to_f64();
    std::mt19937 eng = make_engine(n);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::vector<double> v(p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      if (!(p[i] >= 0 && p[i] <= 1)) throw ctx.error("probability ", p[i], " at index ", i, " is outside [0, 1]");
      v[i] = u(eng) < p[i] ? 1.0 : 0.0;
    }
    Tensor& y = ctx.allocate_output(0, out_dtype(n, x.dtype()), x.shape());
    misc_store_f64(y, v, "Bernoulli");
  };
  r.add(std::move(s));
}

// Multinomial (7, 22): sample_size draws per row of [batch, classes] unnormalised log
// probabilities (softmax of the row), as int32 (default) or int64 class indices.
void add_multinomial(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Multinomial";
  s.since_version = 7;
  s.max_version = 22;
  s.attrs = {{"dtype", ir::AttrType::i}, {"sample_size", ir::AttrType::i}, {"seed", ir::AttrType::f}};
  s.validate = [](const ir::Node& n) {
    const DType t = out_dtype(n, DType::i32);
    KILN_CHECK(t == DType::i32 || t == DType::i64, cat(n.describe(), ": dtype must be int32 or int64, got ", dtype_name(t)));
    KILN_CHECK(n.attr_i("sample_size", 1) > 0, cat(n.describe(), ": sample_size must be positive"));
  };
  s.infer = [](ir::InferContext& ctx) {
    const auto& xs = ctx.input_shape(0);
    if (xs.rank_known && xs.rank() != 2) throw ctx.error("input must be [batch, classes], got ", xs.to_string());
    ctx.set_output(0, out_dtype(ctx.node(), DType::i32),
                   ir::PartialShape({dim_or_unknown(xs, 0), ir::Dim(ctx.node().attr_i("sample_size", 1))}));
  };
  s.run = [](RunContext& ctx) {
    const ir::Node& n = ctx.node();
    const Tensor& x = ctx.input(0);
    if (!is_floating(x.dtype())) throw ctx.error("input must be a floating point tensor, got ", dtype_name(x.dtype()));
    if (x.rank() != 2) throw ctx.error("input must be [batch, classes], got ", shape_to_string(x.shape()));
    const int64_t B = x.shape()[0], K = x.shape()[1], S = n.attr_i("sample_size", 1);
    if (K == 0 && B > 0) throw ctx.error("cannot sample from zero classes");
    const std::vector<double> logits = x.to_f64();
    std::mt19937 eng = make_engine(n);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::vector<double> out(static_cast<size_t>(B * S));
    std::vector<double> cdf(static_cast<size_t>(K));
    for (int64_t b = 0; b < B; ++b) {
      const double* row = &logits[static_cast<size_t>(b * K)];
      const double mx = *std::max_element(row, row + K);
      if (!std::isfinite(mx)) throw ctx.error("row ", b, " has no finite log-probability");
      double total = 0.0;
      for (int64_t k = 0; k < K; ++k) cdf[static_cast<size_t>(k)] = total += std::exp(row[k] - mx);
      for (int64_t i = 0; i < S; ++i) {
        const double t = u(eng) * total;
        const auto it = std::upper_bound(cdf.begin(), cdf.end(), t);
        out[static_cast<size_t>(b * S + i)] = static_cast<double>(std::min<int64_t>(it - cdf.begin(), K - 1));
      }
    }
    misc_store_f64(ctx.allocate_output(0, out_dtype(n, DType::i32), {B, S}), out, "Multinomial");
  };
  r.add(std::move(s));
}

}  // namespace

void register_misc_random_ops(ir::OpRegistry& r) {
  add_multinomial(r);
  add_random(r, "RandomNormal", Dist::normal);
  add_random(r, "RandomUniform", Dist::uniform);
  add_random_like(r, "RandomNormalLike", Dist::normal);
  add_random_like(r, "RandomUniformLike", Dist::uniform);
  add_bernoulli(r);
}

}  // namespace kiln::ops
