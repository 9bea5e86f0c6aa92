// Normalisations: BatchNormalization (inference and training_mode statistics),
// InstanceNormalization, GroupNormalization, LpNormalization, LRN, MeanVarianceNormalization.
#include <algorithm>
#include <cmath>

#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"
#include "ops/nn_common.hpp"

namespace kiln::ops::nn {
namespace {

// Writes v (double) into element i of a float tensor of any float dtype.
void store_f64(Tensor& t, const std::vector<double>& v) {
  dispatch_float(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = T(static_cast<acc_t<T>>(v[i]));
  }, "store");
}

// ---------------------------------------------------------------------------
// BatchNormalization

void register_batchnorm(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "BatchNormalization";
  s.since_version = 1;
  s.min_inputs = 5;
  s.max_inputs = 5;
  s.min_outputs = 1;
  s.max_outputs = 5;
  s.attrs = {{"epsilon", ir::AttrType::f},   {"momentum", ir::AttrType::f},
             {"spatial", ir::AttrType::i},   {"training_mode", ir::AttrType::i},
             {"is_test", ir::AttrType::i},   {"consumed_inputs", ir::AttrType::ints}};
  s.validate = [](const ir::Node& n) {
    if (n.has_attr("epsilon"))
      KILN_CHECK(n.attr_f("epsilon") >= 0.f,
                 cat(n.describe(), ": attribute 'epsilon' must be >= 0, got ", n.attr_f("epsilon")));
    int64_t tm = n.attr_i("training_mode", 0);
    KILN_CHECK(tm == 0 || tm == 1, cat(n.describe(), ": attribute 'training_mode' must be 0 or 1, got ", tm));
    if (tm == 1 || n.opset() >= 14)
      KILN_CHECK(n.num_outputs() <= 3, cat(n.describe(), ": expected at most 3 outputs, got ", n.num_outputs()));
  };
  s.infer = [](ir::InferContext& ctx) {
    ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
    for (size_t i = 1; i < ctx.num_outputs(); ++i) ctx.set_output(i, ctx.input_dtype(3), ctx.input_shape(3));
  };
  s.run = [](ir::RunContext& ctx) {
    const ir::Node& n = ctx.node();
    const Tensor& x = ctx.input(0);
    const Shape& xs = x.shape();
    KILN_CHECK(xs.size() >= 2, ctx.error("input X must have rank >= 2 (N, C, ...), got shape ", shape_to_string(xs)));
    const int64_t N = xs[0], C = xs[1];
    int64_t inner = 1;
    for (size_t i = 2; i < xs.size(); ++i) inner *= xs[i];
    const bool spatial = n.attr_i("spatial", 1) != 0 || (n.opset() >= 9);
    const int64_t P = spatial ? C : C * inner;  // parameter count
    std::vector<std::vector<double>> prm(4);
    const char* names[4] = {"scale", "B", "input_mean", "input_var"};
    for (size_t k = 0; k < 4; ++k) {
      const Tensor& t = ctx.input(1 + k);
      dispatch_float(t.dtype(), [](auto) {}, "BatchNormalization");
      KILN_CHECK(t.size() == P, ctx.error(names[k], " must have ", P, " values (", spatial ? "C" : "C x spatial",
                                          "), got shape ", shape_to_string(t.shape()), " for X ", shape_to_string(xs)));
      prm[k] = t.to_f64();
    }
    const double eps = n.attr_f("epsilon", 1e-5f);
    const double momentum = n.attr_f("momentum", 0.9f);
    const bool training = n.attr_i("training_mode", 0) == 1;
    std::vector<double>& mean = prm[2];
    std::vector<double>& var = prm[3];
    std::vector<double> bmean, bvar;
    if (training) {
      // batch statistics per channel over N and the spatial dims (population variance)
      std::vector<double> xv = x.to_f64();
      bmean.assign(C, 0.0);
      bvar.assign(C, 0.0);
      const double cnt = static_cast<double>(N * inner);
      for (int64_t nn = 0; nn < N; ++nn)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t i = 0; i < inner; ++i) bmean[c] += xv[(nn * C + c) * inner + i];
      for (auto& m : bmean) m = cnt > 0 ? m / cnt : 0.0;
      for (int64_t nn = 0; nn < N; ++nn)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t i = 0; i < inner; ++i) {
            double d = xv[(nn * C + c) * inner + i] - bmean[c];
            bvar[c] += d * d;
          }
      for (auto& v : bvar) v = cnt > 0 ? v / cnt : 0.0;
    }
    const std::vector<double>& use_mean = training ? bmean : mean;
    const std::vector<double>& use_var = training ? bvar : var;
    // y = x * a + b per parameter
    std::vector<double> a(P), b(P);
    for (int64_t k = 0; k < P; ++k) {
      a[k] = prm[0][k] / std::sqrt(use_var[k] + eps);
      b[k] = prm[1][k] - use_mean[k] * a[k];
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), xs);
    dispatch_float(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      using A = acc_t<T>;
      const T* px = x.data<T>();
      T* py = y.data<T>();
      for (int64_t nn = 0; nn < N; ++nn)
        for (int64_t c = 0; c < C; ++c) {
          const int64_t base = (nn * C + c) * inner;
          if (spatial) {
            const A ac = static_cast<A>(a[c]), bc = static_cast<A>(b[c]);
            for (int64_t i = 0; i < inner; ++i) py[base + i] = T(static_cast<A>(px[base + i]) * ac + bc);
          } else {
            for (int64_t i = 0; i < inner; ++i) {
              const int64_t k = c * inner + i;
              py[base + i] = T(static_cast<A>(static_cast<A>(px[base + i]) * a[k] + b[k]));
            }
          }
        }
    }, "BatchNormalization");
    // Optional outputs.
    const DType pdt = ctx.input(3).dtype();
    const Shape& ps = ctx.input(3).shape();
    for (size_t o = 1; o < ctx.num_outputs(); ++o) {
      Tensor& t = ctx.allocate_output(o, pdt, ps);
      std::vector<double> v;
      if (training) {
        const std::vector<double>& run = o == 1 ? mean : var;
        const std::vector<double>& cur = o == 1 ? bmean : bvar;
        v.resize(run.size());
        for (size_t i = 0; i < v.size(); ++i) v[i] = run[i] * momentum + cur[i] * (1.0 - momentum);
      } else {
        v = (o % 2 == 1) ? mean : var;  // estimated statistics (inference mode)
      }
      store_f64(t, v);
    }
  };
  r.add(std::move(s));
}

// ---------------------------------------------------------------------------
// InstanceNormalization

void register_instancenorm(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "InstanceNormalization";
  s.since_version = 1;
  s.min_inputs = 3;
  s.max_inputs = 3;
  s.attrs = {{"epsilon", ir::AttrType::f}};
  s.infer = ir::infer_same_as_input(0);
  s.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Shape& xs = x.shape();
    KILN_CHECK(xs.size() >= 3, ctx.error("input X must have rank >= 3 (N, C, spatial...), got shape ",
                                         shape_to_string(xs)));
    const int64_t N = xs[0], C = xs[1];
    int64_t inner = 1;
    for (size_t i = 2; i < xs.size(); ++i) inner *= xs[i];
    const Tensor& sc = ctx.input(1);
    const Tensor& bi = ctx.input(2);
    KILN_CHECK(sc.dtype() == x.dtype() && bi.dtype() == x.dtype(),
               ctx.error("scale and B must have the element type of X (", dtype_name(x.dtype()), ")"));
    KILN_CHECK(sc.size() == C && bi.size() == C, ctx.error("scale and B must have C = ", C, " values, got shapes ",
                                                           shape_to_string(sc.shape()), " and ",
                                                           shape_to_string(bi.shape())));
    const std::vector<double> scale = sc.to_f64(), bias = bi.to_f64();
    const double eps = ctx.node().attr_f("epsilon", 1e-5f);
    Tensor& y = ctx.allocate_output(0, x.dtype(), xs);
    dispatch_float(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      using A = acc_t<T>;
      const T* px = x.data<T>();
      T* py = y.data<T>();
      for (int64_t nn = 0; nn < N; ++nn)
        for (int64_t c = 0; c < C; ++c) {
          const T* p = px + (nn * C + c) * inner;
          T* q = py + (nn * C + c) * inner;
          double mean = 0, var = 0;
          for (int64_t i = 0; i < inner; ++i) mean += static_cast<double>(static_cast<A>(p[i]));
          mean = inner ? mean / static_cast<double>(inner) : 0.0;
          for (int64_t i = 0; i < inner; ++i) {
            double d = static_cast<double>(static_cast<A>(p[i])) - mean;
            var += d * d;
          }
          var = inner ? var / static_cast<double>(inner) : 0.0;
          const double a = scale[c] / std::sqrt(var + eps);
          const A aa = static_cast<A>(a), bb = static_cast<A>(bias[c] - mean * a);
          for (int64_t i = 0; i < inner; ++i) q[i] = T(static_cast<A>(p[i]) * aa + bb);
        }
    }, "InstanceNormalization");
  };
  r.add(std::move(s));
}

// ---------------------------------------------------------------------------
// LRN

void register_lrn(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "LRN";
  s.since_version = 1;
  s.attrs = {{"alpha", ir::AttrType::f},
             {"beta", ir::AttrType::f},
             {"bias", ir::AttrType::f},
             {"size", ir::AttrType::i, true}};
  s.validate = [](const ir::Node& n) {
    KILN_CHECK(n.attr_i("size") >= 1, cat(n.describe(), ": attribute 'size' must be >= 1, got ", n.attr_i("size")));
  };
  s.infer = ir::infer_same_as_input(0);
  s.run = [](ir::RunContext& ctx) {
    const ir::Node& n = ctx.node();
    const Tensor& x = ctx.input(0);
    const Shape& xs = x.shape();
    KILN_CHECK(xs.size() >= 2, ctx.error("input X must have rank >= 2 (N, C, ...), got shape ", shape_to_string(xs)));
    const int64_t N = xs[0], C = xs[1];
    int64_t inner = 1;
    for (size_t i = 2; i < xs.size(); ++i) inner *= xs[i];
    const int64_t size = n.attr_i("size");
    const double alpha = n.attr_f("alpha", 1e-4f), beta = n.attr_f("beta", 0.75f), bias = n.attr_f("bias", 1.0f);
    const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;  // floor / ceil of (size-1)/2
    Tensor& y = ctx.allocate_output(0, x.dtype(), xs);
    dispatch_float(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      using A = acc_t<T>;
      const T* px = x.data<T>();
      T* py = y.data<T>();
      std::vector<A> sq(static_cast<size_t>(C * inner)), sum(static_cast<size_t>(inner));
      const A scale = static_cast<A>(alpha / static_cast<double>(size));
      for (int64_t nn = 0; nn < N; ++nn) {
        const T* p = px + nn * C * inner;
        T* q = py + nn * C * inner;
        for (int64_t i = 0; i < C * inner; ++i) {
          A v = static_cast<A>(p[i]);
          sq[i] = v * v;
        }
        for (int64_t c = 0; c < C; ++c) {
          std::fill(sum.begin(), sum.end(), A(0));
          for (int64_t cc = std::max<int64_t>(0, c - lo); cc <= std::min(C - 1, c + hi); ++cc)
            for (int64_t i = 0; i < inner; ++i) sum[i] += sq[cc * inner + i];
          for (int64_t i = 0; i < inner; ++i) {
            const A v = static_cast<A>(p[c * inner + i]);
            q[c * inner + i] = T(static_cast<A>(v / std::pow(static_cast<A>(bias) + scale * sum[i],
                                                             static_cast<A>(beta))));
          }
        }
      }
    }, "LRN");
  };
  r.add(std::move(s));
}

// ---------------------------------------------------------------------------
// MeanVarianceNormalization: (x - mean) / (sqrt(var) + 1e-9) over `axes`.

void register_mvn(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "MeanVarianceNormalization";
  s.since_version = 9;
  s.attrs = {{"axes", ir::AttrType::ints}};
  s.infer = ir::infer_same_as_input(0);
  s.run = [](ir::RunContext& ctx) {
    const ir::Node& n = ctx.node();
    const Tensor& x = ctx.input(0);
    const Shape& xs = x.shape();
    dispatch_float(x.dtype(), [](auto) {}, "MeanVarianceNormalization");
    const int64_t rank = static_cast<int64_t>(xs.size());
    std::vector<int64_t> axes = n.attr_ints("axes", {0, 2, 3});
    Shape keep = xs;  // reduced dims set to 1
    for (int64_t a : axes) keep[normalize_axis(a, rank, n)] = 1;
    const int64_t groups = shape_size(keep);
    std::vector<double> xv = x.to_f64();
    std::vector<double> mean(static_cast<size_t>(groups), 0.0), var(static_cast<size_t>(groups), 0.0);
    std::vector<int64_t> gi(xv.size());
    for_each_broadcast<1>(xs, {keep}, [&](int64_t i, const std::array<int64_t, 1>& off) { gi[i] = off[0]; });
    const double cnt = groups ? static_cast<double>(xv.size()) / static_cast<double>(groups) : 1.0;
    for (size_t i = 0; i < xv.size(); ++i) mean[gi[i]] += xv[i];
    for (auto& m : mean) m /= cnt;
    for (size_t i = 0; i < xv.size(); ++i) {
      double d = xv[i] - mean[gi[i]];
      var[gi[i]] += d * d;
    }
    for (auto& v : var) v = std::sqrt(v / cnt) + 1e-9;
    std::vector<double> out(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) out[i] = (xv[i] - mean[gi[i]]) / var[gi[i]];
    Tensor& y = ctx.allocate_output(0, x.dtype(), xs);
    store_f64(y, out);
  };
  r.add(std::move(s));
}

}  // namespace

// ---------------------------------------------------------------------------
// GroupNormalization (18, 21): mean and variance over each group of C / num_groups channels
// (and all spatial positions) of a sample, then y = x_hat * scale + bias: one scale / bias per
// group in opset 18, per channel since 21.

void register_groupnorm(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "GroupNormalization";
  s.since_version = 18;
  s.max_version = 21;
  s.min_inputs = s.max_inputs = 3;
  s.attrs = {{"epsilon", ir::AttrType::f}, {"num_groups", ir::AttrType::i, true}, {"stash_type", ir::AttrType::i}};
  s.validate = [](const ir::Node& n) {
    KILN_CHECK(n.attr_i("num_groups") >= 1, cat(n.describe(), ": num_groups must be >= 1, got ", n.attr_i("num_groups")));
  };
  s.infer = ir::infer_same_as_input(0);
  s.run = [](ir::RunContext& ctx) {
    const ir::Node& n = ctx.node();
    const Tensor& x = ctx.input(0);
    const Shape& xs = x.shape();
    KILN_CHECK(xs.size() >= 2, ctx.error("input X must have rank >= 2 (N, C, ...), got ", shape_to_string(xs)));
    const int64_t N = xs[0], C = xs[1], G = n.attr_i("num_groups");
    KILN_CHECK(C % G == 0, ctx.error("channels ", C, " are not divisible by num_groups ", G));
    const int64_t per = n.opset() >= 21 || n.opset() == 0 ? C : G;  // scale / bias values
    const Tensor& sc = ctx.input(1);
    const Tensor& bi = ctx.input(2);
    KILN_CHECK(sc.size() == per && bi.size() == per,
               ctx.error("scale and bias must have ", per, per == C ? " (one per channel)" : " (one per group)",
                         " values, got shapes ", shape_to_string(sc.shape()), " and ", shape_to_string(bi.shape())));
    int64_t inner = 1;
    for (size_t i = 2; i < xs.size(); ++i) inner *= xs[i];
    const int64_t cg = C / G;
    const std::vector<double> xv = x.to_f64(), scale = sc.to_f64(), bias = bi.to_f64();
    const double eps = n.attr_f("epsilon", 1e-5f);
    std::vector<double> y(xv.size());
    for (int64_t b = 0; b < N; ++b)
      for (int64_t g = 0; g < G; ++g) {
        const int64_t first = (b * C + g * cg) * inner, count = cg * inner;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < count; ++i) mean += xv[static_cast<size_t>(first + i)];
        mean = count ? mean / static_cast<double>(count) : 0.0;
        for (int64_t i = 0; i < count; ++i) {
          const double d = xv[static_cast<size_t>(first + i)] - mean;
          var += d * d;
        }
        var = count ? var / static_cast<double>(count) : 0.0;
        const double inv = 1.0 / std::sqrt(var + eps);
        for (int64_t c = 0; c < cg; ++c) {
          const size_t p = static_cast<size_t>(per == C ? g * cg + c : g);
          for (int64_t i = 0; i < inner; ++i) {
            const size_t at = static_cast<size_t>(first + c * inner + i);
            y[at] = (xv[at] - mean) * inv * scale[p] + bias[p];
          }
        }
      }
    Tensor& out = ctx.allocate_output(0, x.dtype(), xs);
    store_f64(out, y);
  };
  r.add(std::move(s));
}

// ---------------------------------------------------------------------------
// LpNormalization: x / ||x||_p along `axis` (p = 1 or 2); a zero norm gives 0.

void register_lpnorm(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "LpNormalization";
  s.since_version = 1;
  s.max_version = 22;
  s.attrs = {{"axis", ir::AttrType::i}, {"p", ir::AttrType::i}};
  s.validate = [](const ir::Node& n) {
    const int64_t p = n.attr_i("p", 2);
    KILN_CHECK(p == 1 || p == 2, cat(n.describe(), ": attribute 'p' must be 1 or 2, got ", p));
  };
  s.infer = ir::infer_same_as_input(0);
  s.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    KILN_CHECK(is_floating(x.dtype()), ctx.error("input must be a float tensor, got ", dtype_name(x.dtype())));
    const int64_t rank = static_cast<int64_t>(x.rank());
    KILN_CHECK(rank >= 1, ctx.error("input must have rank >= 1"));
    const int64_t axis = normalize_axis(ctx.node().attr_i("axis", -1), rank, ctx.node());
    const bool l1 = ctx.node().attr_i("p", 2) == 1;
    int64_t outer = 1, inner = 1;
    const int64_t len = x.shape()[static_cast<size_t>(axis)];
    for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[static_cast<size_t>(d)];
    for (int64_t d = axis + 1; d < rank; ++d) inner *= x.shape()[static_cast<size_t>(d)];
    std::vector<double> v = x.to_f64();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        double norm = 0;
        for (int64_t k = 0; k < len; ++k) {
          const double e = v[static_cast<size_t>((o * len + k) * inner + i)];
          norm += l1 ? std::fabs(e) : e * e;
        }
        if (!l1) norm = std::sqrt(norm);
        for (int64_t k = 0; k < len; ++k) {
          double& e = v[static_cast<size_t>((o * len + k) * inner + i)];
          e = norm == 0 ? 0.0 : e / norm;
        }
      }
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    store_f64(y, v);
  };
  r.add(std::move(s));
}

void register_norm_ops(ir::OpRegistry& r) {
  register_batchnorm(r);
  register_instancenorm(r);
  register_groupnorm(r);
  register_lpnorm(r);
  register_lrn(r);
  register_mvn(r);
}

}  // namespace kiln::ops::nn
