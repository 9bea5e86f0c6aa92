// Elementwise ops, part 1: unary math and activations.
//   elementwise.cpp         unary math, activations (this file) + register_elementwise_ops
//   elementwise_binary.cpp  Add..Pow, Mod, BitShift, Max/Min/Sum/Mean, compare, logic, Where, PRelu, FastGelu
//   elementwise_cast.cpp    Cast, CastLike, Clip
// Kernels compute in float for f16/bf16 (calc_t) and in the element type otherwise.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "ir/infer_util.hpp"
#include "ops/elementwise_common.hpp"
#include "ops/fast_erf.hpp"
#include "ops/kernel_util.hpp"
#include "ops/op_families.hpp"

namespace kiln::ops {

void register_elementwise_binary_ops(ir::OpRegistry& r);  // elementwise_binary.cpp
void register_elementwise_cast_ops(ir::OpRegistry& r);    // elementwise_cast.cpp

namespace {

using namespace elementwise_detail;

// Negation with two's complement wrap-around for signed integers (no UB on INT_MIN).
template <class V>
V neg_wrap(V v) {
  if constexpr (std::is_integral_v<V>) return static_cast<V>(-static_cast<std::make_unsigned_t<V>>(v));
  else return -v;
}

// Registers a unary op y = f(x), same dtype and shape. `make(node)` returns the element
// function, a generic lambda called with calc_t<T> for every T in Types.
template <unsigned Types, class Make>
void add_unary(ir::OpRegistry& r, const char* name, int since, std::vector<ir::AttrSpec> attrs, Make make,
               const char* domain = "") {
  ir::OpSchema s;
  s.domain = domain;
  s.name = name;
  s.since_version = since;
  s.attrs = std::move(attrs);
  s.infer = [](ir::InferContext& ctx) {
    DType t = ctx.input_dtype(0);
    check_dtype(ctx, t, Types, 0);
    ctx.set_output(0, t, ctx.input_shape(0));
  };
  s.run = [make](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    check_dtype(ctx, x.dtype(), Types, 0);
    auto f = make(ctx.node());
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    dispatch_all(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (type_in<T>(Types)) {
        using C = calc_t<T>;
        const T* px = x.data<T>();
        T* py = y.data<T>();
        const int64_t n = x.size();
        for (int64_t i = 0; i < n; ++i) py[i] = static_cast<T>(f(static_cast<C>(px[i])));
      }
    });
  };
  r.add(std::move(s));
}

// Unary op on floating types returning bool (IsNaN, IsInf).
template <class Make>
void add_float_predicate(ir::OpRegistry& r, const char* name, int since, std::vector<ir::AttrSpec> attrs,
                         Make make) {
  ir::OpSchema s;
  s.name = name;
  s.since_version = since;
  s.attrs = std::move(attrs);
  s.infer = [](ir::InferContext& ctx) {
    check_dtype(ctx, ctx.input_dtype(0), kFloat, 0);
    ctx.set_output(0, DType::boolean, ctx.input_shape(0));
  };
  s.run = [make](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    check_dtype(ctx, x.dtype(), kFloat, 0);
    auto f = make(ctx.node());
    Tensor& y = ctx.allocate_output(0, DType::boolean, x.shape());
    bool* py = y.data<bool>();
    dispatch_float(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* px = x.data<T>();
      const int64_t n = x.size();
      for (int64_t i = 0; i < n; ++i) py[i] = f(static_cast<calc_t<T>>(px[i]));
    });
  };
  r.add(std::move(s));
}

// Element functions that need no attributes.
template <class F>
auto plain(F f) {
  return [f](const ir::Node&) { return f; };
}

template <class V>
V sigmoid(V v) {
  if (v >= V(0)) return V(1) / (V(1) + std::exp(-v));
  V e = std::exp(v);
  return e / (V(1) + e);
}

template <class V>
V softplus(V v) {
  // log(1 + exp(v)) without overflow
  return v > V(0) ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v));
}

template <class V>
V gelu_erf(V v) {
  return V(0.5) * v * (V(1) + std::erf(v * V(0.70710678118654752440)));
}

template <class V>
V gelu_tanh(V v) {
  const V k = V(0.79788456080286535588);  // sqrt(2/pi)
  return V(0.5) * v * (V(1) + std::tanh(k * (v + V(0.044715) * v * v * v)));
}

void register_unary_math(ir::OpRegistry& r) {
  using ir::AttrType;
  // --- numeric / signed ---
  add_unary<kNumeric>(r, "Abs", 1, {}, plain([](auto v) {
                        using V = decltype(v);
                        if constexpr (std::is_unsigned_v<V>) return v;
                        else return v < V(0) ? neg_wrap(v) : v;
                      }));
  add_unary<kSigned>(r, "Neg", 1, {}, plain([](auto v) { return neg_wrap(v); }));
  add_unary<kSignedInt | kUnsignedInt>(r, "BitwiseNot", 18, {}, plain([](auto v) { return ~v; }));
  add_unary<kNumeric>(r, "Sign", 9, {}, plain([](auto v) {
                        using V = decltype(v);
                        if constexpr (std::is_unsigned_v<V>) return V(v > 0 ? 1 : 0);
                        else return v > V(0) ? V(1) : v < V(0) ? V(-1) : v;  // keeps 0 and NaN
                      }));
  add_unary<kNumeric>(r, "Erf", 9, {}, plain([](auto v) {
                        using V = decltype(v);
                        if constexpr (std::is_integral_v<V>) return static_cast<V>(std::erf(static_cast<double>(v)));
                        else return std::erf(v);
                      }));
  // f32 Erf (GELU in transformers) on the vectorised kernel instead of scalar std::erf.
  {
    ir::OpSchema erf = *r.find("", "Erf");
    auto generic = erf.run;
    erf.run = [generic](RunContext& ctx) {
      const Tensor& x = ctx.input(0);
      if (x.dtype() != DType::f32) return generic(ctx);
      Tensor& y = ctx.allocate_output(0, DType::f32, x.shape());
      erf_f32(x.data<float>(), y.data<float>(), x.size());
    };
    r.add(std::move(erf));
  }

  // --- floating point math ---
#define KILN_FLOAT_UNARY(NAME, SINCE, EXPR) \
  add_unary<kFloat>(r, NAME, SINCE, {}, plain([](auto v) { using V = decltype(v); (void)sizeof(V); return EXPR; }))
  KILN_FLOAT_UNARY("Acos", 7, std::acos(v));
  KILN_FLOAT_UNARY("Acosh", 9, std::acosh(v));
  KILN_FLOAT_UNARY("Asin", 7, std::asin(v));
  KILN_FLOAT_UNARY("Asinh", 9, std::asinh(v));
  KILN_FLOAT_UNARY("Atan", 7, std::atan(v));
  KILN_FLOAT_UNARY("Atanh", 9, std::atanh(v));
  KILN_FLOAT_UNARY("Cos", 7, std::cos(v));
  KILN_FLOAT_UNARY("Cosh", 9, std::cosh(v));
  KILN_FLOAT_UNARY("Sin", 7, std::sin(v));
  KILN_FLOAT_UNARY("Sinh", 9, std::sinh(v));
  KILN_FLOAT_UNARY("Tan", 7, std::tan(v));
  KILN_FLOAT_UNARY("Tanh", 1, std::tanh(v));
  KILN_FLOAT_UNARY("Ceil", 1, std::ceil(v));
  KILN_FLOAT_UNARY("Floor", 1, std::floor(v));
  KILN_FLOAT_UNARY("Round", 11, std::nearbyint(v));  // default rounding mode: half to even
  KILN_FLOAT_UNARY("Exp", 1, std::exp(v));
  KILN_FLOAT_UNARY("Log", 1, std::log(v));
  KILN_FLOAT_UNARY("Sqrt", 1, std::sqrt(v));
  KILN_FLOAT_UNARY("Reciprocal", 1, V(1) / v);
  KILN_FLOAT_UNARY("Sigmoid", 1, sigmoid(v));
  KILN_FLOAT_UNARY("Softplus", 1, softplus(v));
  KILN_FLOAT_UNARY("Softsign", 1, v / (V(1) + std::abs(v)));
  KILN_FLOAT_UNARY("HardSwish", 14, v * std::max(V(0), std::min(V(1), v / V(6) + V(0.5))));
  // Mish is opset 18; registered from opset 1 since exporters emit it in older models too.
  KILN_FLOAT_UNARY("Mish", 1, v * std::tanh(softplus(v)));
#undef KILN_FLOAT_UNARY

  add_float_predicate(r, "IsNaN", 9, {}, plain([](auto v) { return std::isnan(v); }));
  add_float_predicate(r, "IsInf", 10, {{"detect_negative", AttrType::i}, {"detect_positive", AttrType::i}},
                      [](const ir::Node& n) {
                        bool neg = n.attr_i("detect_negative", 1) != 0;
                        bool pos = n.attr_i("detect_positive", 1) != 0;
                        return [neg, pos](auto v) { return std::isinf(v) && (v > 0 ? pos : neg); };
                      });

  // Not: bool only.
  {
    ir::OpSchema s;
    s.name = "Not";
    s.since_version = 1;
    s.infer = [](ir::InferContext& ctx) {
      check_dtype(ctx, ctx.input_dtype(0), kBool, 0);
      ctx.set_output(0, DType::boolean, ctx.input_shape(0));
    };
    s.run = [](RunContext& ctx) {
      const Tensor& x = ctx.input(0);
      check_dtype(ctx, x.dtype(), kBool, 0);
      Tensor& y = ctx.allocate_output(0, DType::boolean, x.shape());
      const bool* px = x.data<bool>();
      bool* py = y.data<bool>();
      for (int64_t i = 0; i < x.size(); ++i) py[i] = !px[i];
    };
    r.add(std::move(s));
  }
}

void register_activations(ir::OpRegistry& r) {
  using ir::AttrType;
  add_unary<kNumeric>(r, "Relu", 1, {}, plain([](auto v) {
                        using V = decltype(v);
                        return v < V(0) ? V(0) : v;  // NaN propagates
                      }));
  add_unary<kFloat>(r, "LeakyRelu", 1, {{"alpha", AttrType::f}}, [](const ir::Node& n) {
    float alpha = n.attr_f("alpha", 0.01f);
    return [alpha](auto v) {
      using V = decltype(v);
      return v < V(0) ? V(alpha) * v : v;
    };
  });
  add_unary<kFloat>(r, "Elu", 1, {{"alpha", AttrType::f}}, [](const ir::Node& n) {
    float alpha = n.attr_f("alpha", 1.0f);
    return [alpha](auto v) {
      using V = decltype(v);
      return v < V(0) ? V(alpha) * std::expm1(v) : v;
    };
  });
  add_unary<kFloat>(r, "Selu", 1, {{"alpha", AttrType::f}, {"gamma", AttrType::f}}, [](const ir::Node& n) {
    float alpha = n.attr_f("alpha", 1.67326319217681884765625f);
    float gamma = n.attr_f("gamma", 1.05070102519493408203125f);
    return [alpha, gamma](auto v) {
      using V = decltype(v);
      return v <= V(0) ? V(gamma) * (V(alpha) * std::exp(v) - V(alpha)) : V(gamma) * v;
    };
  });
  add_unary<kFloat>(r, "Celu", 12, {{"alpha", AttrType::f}}, [](const ir::Node& n) {
    float alpha = n.attr_f("alpha", 1.0f);
    return [alpha](auto v) {
      using V = decltype(v);
      const V a = V(alpha);
      return std::max(V(0), v) + std::min(V(0), a * (std::exp(v / a) - V(1)));
    };
  });
  add_unary<kFloat>(r, "HardSigmoid", 1, {{"alpha", AttrType::f}, {"beta", AttrType::f}}, [](const ir::Node& n) {
    float alpha = n.attr_f("alpha", 0.2f);
    float beta = n.attr_f("beta", 0.5f);
    return [alpha, beta](auto v) {
      using V = decltype(v);
      return std::max(V(0), std::min(V(1), V(alpha) * v + V(beta)));
    };
  });
  add_unary<kFloat>(r, "ThresholdedRelu", 10, {{"alpha", AttrType::f}}, [](const ir::Node& n) {
    float alpha = n.attr_f("alpha", 1.0f);
    return [alpha](auto v) {
      using V = decltype(v);
      return v > V(alpha) ? v : V(0);
    };
  });
  add_unary<kNumeric>(r, "Shrink", 9, {{"bias", AttrType::f}, {"lambd", AttrType::f}}, [](const ir::Node& n) {
    double bias = n.attr_f("bias", 0.0f);
    double lambd = n.attr_f("lambd", 0.5f);
    return [bias, lambd](auto v) {
      using V = decltype(v);
      double d = static_cast<double>(v);
      double out = d < -lambd ? d + bias : d > lambd ? d - bias : 0.0;
      if constexpr (std::is_integral_v<V>) {
        // integer inputs: the result is exactly representable for sane attributes; clamp to be safe
        if (!(out > static_cast<double>(std::numeric_limits<V>::lowest()))) return std::numeric_limits<V>::lowest();
        if (!(out < static_cast<double>(std::numeric_limits<V>::max()))) return std::numeric_limits<V>::max();
        return static_cast<V>(out);
      } else {
        return static_cast<V>(out);
      }
    };
  });

  // Gelu: ONNX opset 20, registered from opset 1 because exporters emit it earlier.
  auto gelu_make = [](const ir::Node& n) {
    bool tanh_form = n.attr_s("approximate", "none") == "tanh";
    return [tanh_form](auto v) { return tanh_form ? gelu_tanh(v) : gelu_erf(v); };
  };
  auto gelu_validate = [](const ir::Node& n) {
    std::string a = n.attr_s("approximate", "none");
    if (a != "none" && a != "tanh")
      throw Error(cat(n.describe(), ": attribute 'approximate' must be \"none\" or \"tanh\", got \"", a, "\""));
  };
  add_unary<kFloat>(r, "Gelu", 1, {{"approximate", AttrType::s}}, gelu_make);
  {
    ir::OpSchema s = *r.find("", "Gelu");
    s.validate = gelu_validate;
    r.add(std::move(s));
  }
  add_unary<kFloat>(r, "Gelu", 1, {}, plain([](auto v) { return gelu_erf(v); }), "com.microsoft");
}

}  // namespace

void register_elementwise_ops(ir::OpRegistry& r) {
  register_unary_math(r);
  register_activations(r);
  register_elementwise_binary_ops(r);
  register_elementwise_cast_ops(r);
}

}  // namespace kiln::ops
