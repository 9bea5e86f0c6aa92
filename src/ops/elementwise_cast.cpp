// Elementwise ops, part 3: Cast, CastLike, Clip.
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/narrow_types.hpp"
#include "ir/infer_util.hpp"
#include "ops/elementwise_common.hpp"
#include "ops/kernel_util.hpp"
#include "ops/op_families.hpp"

namespace kiln::ops {

void register_elementwise_cast_ops(ir::OpRegistry& r);

namespace {

using namespace elementwise_detail;

// double -> float rounded to odd: converting that float to a 16-bit float then rounds
// exactly as a direct double -> half conversion would (no double rounding).
float to_float_round_odd(double d) {
  float f = static_cast<float>(d);
  if (std::isnan(d) || static_cast<double>(f) == d) return f;
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) --u;  // rounded away from zero: step back
  u |= 1u;
  std::memcpy(&f, &u, 4);
  return f;
}

template <class To, class From>
To convert(From v) {
  using CF = calc_t<From>;
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<CF>(v) != CF(0);
  } else if constexpr (std::is_same_v<From, bool>) {
    return static_cast<To>(static_cast<calc_t<To>>(v ? 1 : 0));
  } else if constexpr (std::is_integral_v<To>) {
    if constexpr (std::is_integral_v<From>) return static_cast<To>(v);  // modular (C++20)
    else return float_to_int<To>(static_cast<double>(static_cast<CF>(v)));
  } else if constexpr (is_half_v<To>) {
    if constexpr (std::is_same_v<From, double>) return To(to_float_round_odd(v));
    else if constexpr (std::is_integral_v<From> && sizeof(From) >= 4)
      return To(to_float_round_odd(static_cast<double>(v)));
    else return To(static_cast<float>(static_cast<CF>(v)));
  } else {  // float / double
    return static_cast<To>(static_cast<CF>(v));
  }
}

// A number as text: the shortest decimal that reads back to the same value (numpy's str of a
// float32 / float64), integers in decimal, bools as True / False.
template <class From>
std::string number_to_string(From v) {
  if constexpr (std::is_same_v<From, bool>) {
    return v ? "True" : "False";
  } else {
    char buf[64];
    std::to_chars_result r;
    if constexpr (is_half_v<From>) r = std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
    else r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
  }
}

// Text to a number: decimal or scientific, inf / nan in any case (strtod); anything else is an
// error naming the string.
double string_to_number(const std::string& s) {
  const char* b = s.c_str();
  char* end = nullptr;
  const double v = std::strtod(b, &end);
  while (end && *end == ' ') ++end;
  KILN_CHECK(end != b && end && *end == '\0', cat("Cast: '", s, "' is not a number"));
  return v;
}

void cast_tensor(const Tensor& x, Tensor& y, bool saturate);

// Casts that involve an 8- / 4-bit format (core/narrow_types.hpp has the rules): through
// their values; int4 / uint4 count as integers (wrapping from other integers).
void cast_narrow(const Tensor& x, Tensor& y, bool saturate) {
  const DType from = x.dtype(), to = y.dtype();
  const int64_t n = x.size();
  if (from == DType::string || to == DType::string) {  // through f32
    Tensor mid(DType::f32, x.shape());
    cast_tensor(x, mid, saturate);
    cast_tensor(mid, y, saturate);
    return;
  }
  const bool int_from = from == DType::i4 || from == DType::u4;
  if (is_narrow(from) && is_narrow(to)) {
    const auto* px = static_cast<const uint8_t*>(x.raw());
    auto* py = static_cast<uint8_t*>(y.raw());
    for (int64_t i = 0; i < n; ++i) {
      const float v = narrow_to_float(from, px[i]);
      py[i] = int_from ? narrow_from_integer(to, static_cast<int64_t>(v), saturate) : narrow_from_float(to, v, saturate);
    }
    return;
  }
  if (is_narrow(from)) {
    const auto* px = static_cast<const uint8_t*>(x.raw());
    dispatch_all(to, [&](auto tt) {
      using To = typename decltype(tt)::type;
      To* py = y.data<To>();
      for (int64_t i = 0; i < n; ++i) {
        const float v = narrow_to_float(from, px[i]);
        py[i] = int_from ? convert<To>(static_cast<int32_t>(v)) : convert<To>(v);
      }
    }, "Cast");
    return;
  }
  auto* py = static_cast<uint8_t*>(y.raw());
  dispatch_all(from, [&](auto ft) {
    using From = typename decltype(ft)::type;
    const From* px = x.data<From>();
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_integral_v<From>) py[i] = narrow_from_integer(to, static_cast<int64_t>(px[i]), saturate);
      else py[i] = narrow_from_float(to, static_cast<double>(static_cast<calc_t<From>>(px[i])), saturate);
    }
  }, "Cast");
}

void cast_tensor(const Tensor& x, Tensor& y, bool saturate) {
  if (is_narrow(x.dtype()) || is_narrow(y.dtype())) {
    cast_narrow(x, y, saturate);
    return;
  }
  if (x.dtype() == DType::string || y.dtype() == DType::string) {
    if (x.dtype() == y.dtype()) {
      std::copy(x.data<std::string>(), x.data<std::string>() + x.size(), y.data<std::string>());
    } else if (x.dtype() == DType::string) {
      const std::string* px = x.data<std::string>();
      dispatch_all(y.dtype(), [&](auto tt) {
        using To = typename decltype(tt)::type;
        To* py = y.data<To>();
        for (int64_t i = 0; i < x.size(); ++i) py[i] = convert<To>(string_to_number(px[i]));
      }, "Cast");
    } else {
      std::string* py = y.data<std::string>();
      dispatch_all(x.dtype(), [&](auto ft) {
        using From = typename decltype(ft)::type;
        const From* px = x.data<From>();
        for (int64_t i = 0; i < x.size(); ++i) py[i] = number_to_string(px[i]);
      }, "Cast");
    }
    return;
  }
  dispatch_all(x.dtype(), [&](auto ft) {
    using From = typename decltype(ft)::type;
    dispatch_all(y.dtype(), [&](auto tt) {
      using To = typename decltype(tt)::type;
      const From* px = x.data<From>();
      To* py = y.data<To>();
      const int64_t n = x.size();
      for (int64_t i = 0; i < n; ++i) py[i] = convert<To>(px[i]);
    }, "Cast");
  }, "Cast");
}

void register_cast(ir::OpRegistry& r) {
  {
    ir::OpSchema s;
    s.name = "Cast";
    s.since_version = 1;
    s.attrs = {{"to", ir::AttrType::i, true}, {"saturate", ir::AttrType::i}};
    s.validate = [](const ir::Node& n) { dtype_attr(n, "to"); };
    s.infer = [](ir::InferContext& ctx) {
      ctx.set_output(0, dtype_attr(ctx.node(), "to"), ctx.input_shape(0));
    };
    s.run = [](RunContext& ctx) {
      const Tensor& x = ctx.input(0);
      DType to = dtype_attr(ctx.node(), "to");
      if (to == x.dtype()) {
        ctx.set_output(0, x);
        return;
      }
      Tensor& y = ctx.allocate_output(0, to, x.shape());
      cast_tensor(x, y, ctx.node().attr_i("saturate", 1) != 0);
    };
    r.add(std::move(s));
  }
  {
    ir::OpSchema s;
    s.name = "CastLike";
    s.since_version = 15;
    s.min_inputs = s.max_inputs = 2;
    s.attrs = {{"saturate", ir::AttrType::i}};
    s.infer = [](ir::InferContext& ctx) { ctx.set_output(0, ctx.input_dtype(1), ctx.input_shape(0)); };
    s.run = [](RunContext& ctx) {
      const Tensor& x = ctx.input(0);
      DType to = ctx.input(1).dtype();
      if (to == x.dtype()) {
        ctx.set_output(0, x);
        return;
      }
      Tensor& y = ctx.allocate_output(0, to, x.shape());
      cast_tensor(x, y, ctx.node().attr_i("saturate", 1) != 0);
    };
    r.add(std::move(s));
  }
}

// Clip(X, min?, max?); opset < 11 gives min/max as float attributes instead.
void register_clip(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Clip";
  s.since_version = 1;
  s.min_inputs = 1;
  s.max_inputs = 3;
  s.attrs = {{"min", ir::AttrType::f}, {"max", ir::AttrType::f}};
  s.infer = [](ir::InferContext& ctx) {
    DType t = ctx.input_dtype(0);
    if (t == DType::boolean) throw ctx.error("input 0 has element type bool, expected a numeric type");
    for (size_t i = 1; i < 3; ++i) {
      if (!ctx.has_input(i)) continue;
      DType ti = ctx.input_dtype(i);
      if (t != DType::undefined && ti != DType::undefined && ti != t)
        throw ctx.error("input ", i, " has element type ", dtype_name(ti), ", expected ", dtype_name(t),
                        " like input 0");
      const ir::PartialShape& ps = ctx.input_shape(i);
      if (ps.rank_known && ps.is_static() && shape_size(ps.to_shape()) != 1)
        throw ctx.error("input ", i, " must be a scalar, got shape ", ps.to_string());
    }
    ctx.set_output(0, t, ctx.input_shape(0));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const ir::Node& n = ctx.node();
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    dispatch_numeric(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = calc_t<T>;
      C lo = std::numeric_limits<C>::lowest();
      C hi = std::numeric_limits<C>::max();
      auto bound = [&](size_t i, const char* attr, C& v) {
        if (ctx.has_input(i)) {
          const Tensor& b = ctx.input(i);
          if (b.dtype() != x.dtype())
            throw ctx.error("input ", i, " has element type ", dtype_name(b.dtype()), ", expected ",
                            dtype_name(x.dtype()));
          if (b.size() != 1) throw ctx.error("input ", i, " must be a scalar, got shape ", shape_to_string(b.shape()));
          v = static_cast<C>(b.data<T>()[0]);
        } else if (n.has_attr(attr)) {
          float a = n.attr_f(attr);
          if constexpr (std::is_integral_v<C>) {
            double d = std::nearbyint(static_cast<double>(a));
            v = d <= static_cast<double>(std::numeric_limits<C>::lowest()) ? std::numeric_limits<C>::lowest()
                : d >= static_cast<double>(std::numeric_limits<C>::max()) ? std::numeric_limits<C>::max()
                                                                          : static_cast<C>(d);
          } else {
            v = static_cast<C>(a);
          }
        }
      };
      bound(1, "min", lo);
      bound(2, "max", hi);
      const T* px = x.data<T>();
      T* py = y.data<T>();
      const int64_t cnt = x.size();
      for (int64_t i = 0; i < cnt; ++i) {
        C v = static_cast<C>(px[i]);
        v = v < lo ? lo : v;  // NaN stays NaN
        v = v > hi ? hi : v;  // min > max: everything becomes max
        py[i] = static_cast<T>(v);
      }
    }, "Clip");
  };
  r.add(std::move(s));
}

}  // namespace

void register_elementwise_cast_ops(ir::OpRegistry& r) {
  register_cast(r);
  register_clip(r);
}

}  // namespace kiln::ops
