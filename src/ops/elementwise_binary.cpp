// Elementwise ops, part 2: binary arithmetic (Add Sub Mul Div Pow Mod BitShift), variadic
// Max/Min/Sum/Mean, comparisons, And/Or/Xor, Where, PRelu and com.microsoft FastGelu.
// Multi-input ops use numpy broadcasting; opset < 7 models may use the legacy
// `broadcast`/`axis` attributes, which are translated into numpy form here.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>

#include "ir/infer_util.hpp"
#include "ops/elementwise_common.hpp"
#include "ops/kernel_util.hpp"
#include "ops/op_families.hpp"

namespace kiln::ops {

void register_elementwise_binary_ops(ir::OpRegistry& r);

namespace {

using namespace elementwise_detail;

// All inputs in [first, last) must share one dtype (unknown dtypes are skipped).
template <class Ctx>
void check_same_dtype(const Ctx& ctx, const std::vector<DType>& ts) {
  DType ref = DType::undefined;
  for (size_t i = 0; i < ts.size(); ++i) {
    if (ts[i] == DType::undefined) continue;
    if (ref == DType::undefined) ref = ts[i];
    else if (ts[i] != ref)
      throw ctx.error("inputs must have the same element type, got ", dtype_name(ref), " and input ", i, " of ",
                      dtype_name(ts[i]));
  }
}

// ---------------- broadcasting iteration ----------------

// Calls fn(out_offset, offsets, count, inner_strides) for runs of `count` consecutive output
// elements; operand k's element j of the run is at offsets[k] + j * inner_strides[k].
template <size_t K, class Fn>
void for_each_row(const Shape& out, const std::array<Shape, K>& ins, Fn&& fn) {
  const int64_t n = shape_size(out);
  if (n == 0) return;
  std::array<int64_t, K> off{};
  std::array<int64_t, K> inner_st{};
  // Fast path: every operand is either the full output shape or a single element.
  bool flat = true;
  for (size_t k = 0; k < K; ++k) {
    if (ins[k] == out) inner_st[k] = 1;
    else if (shape_size(ins[k]) == 1) inner_st[k] = 0;
    else flat = false;
  }
  if (flat) {
    fn(int64_t{0}, off, n, inner_st);
    return;
  }
  const size_t r = out.size();
  std::array<std::vector<int64_t>, K> st;
  for (size_t k = 0; k < K; ++k) {
    st[k] = broadcast_strides(ins[k], out);
    inner_st[k] = st[k][r - 1];
  }
  const int64_t inner = out[r - 1];
  const int64_t outer = n / inner;
  std::vector<int64_t> idx(r, 0);
  for (int64_t o = 0; o < outer; ++o) {
    fn(o * inner, off, inner, inner_st);
    for (size_t d = r - 1; d-- > 0;) {
      ++idx[d];
      for (size_t k = 0; k < K; ++k) off[k] += st[k][d];
      if (idx[d] < out[d]) break;
      for (size_t k = 0; k < K; ++k) off[k] -= st[k][d] * idx[d];
      idx[d] = 0;
    }
  }
}

// y = f(a, b) elementwise with broadcasting; f is called with calc_t of the input types and
// its result is converted to TO.
template <class TO, class TA, class TB, class F>
void apply_binary(const Tensor& a, const Shape& as, const Tensor& b, const Shape& bs, Tensor& y, F&& f) {
  const TA* pa = a.data<TA>();
  const TB* pb = b.data<TB>();
  TO* py = y.data<TO>();
  using CA = calc_t<TA>;
  using CB = calc_t<TB>;
  for_each_row<2>(y.shape(), {as, bs}, [&](int64_t o, const auto& off, int64_t n, const auto& st) {
    const TA* ra = pa + off[0];
    const TB* rb = pb + off[1];
    TO* ry = py + o;
    if (st[0] == 1 && st[1] == 1) {
      for (int64_t j = 0; j < n; ++j) ry[j] = static_cast<TO>(f(static_cast<CA>(ra[j]), static_cast<CB>(rb[j])));
    } else {
      const int64_t sa = st[0], sb = st[1];
      for (int64_t j = 0; j < n; ++j)
        ry[j] = static_cast<TO>(f(static_cast<CA>(ra[j * sa]), static_cast<CB>(rb[j * sb])));
    }
  });
}

// ---------------- legacy (opset < 7) broadcasting ----------------

const std::vector<ir::AttrSpec> kLegacyBroadcastAttrs = {{"broadcast", ir::AttrType::i}, {"axis", ir::AttrType::i}};

// For opset < 7 ops with `broadcast`=1 and `axis`: B's dims line up with A's starting at
// axis; returns B's shape padded with trailing 1s so numpy broadcasting gives that result.
template <class DimVec>
DimVec legacy_b_shape(const ir::Node& n, size_t rank_a, DimVec b) {
  if (!n.has_attr("axis") || n.attr_i("broadcast", 0) == 0) return b;
  int64_t axis = n.attr_i("axis");
  int64_t ra = static_cast<int64_t>(rank_a);
  if (axis < 0) axis += ra;
  if (axis < 0 || axis + static_cast<int64_t>(b.size()) > ra)
    throw Error(cat(n.describe(), ": legacy broadcast axis ", n.attr_i("axis"), " does not fit B of rank ", b.size(),
                    " into A of rank ", rank_a));
  b.resize(static_cast<size_t>(ra - axis), typename DimVec::value_type(1));
  return b;
}

// Shapes of a binary op's operands, numpy-ready (legacy attributes applied to input 1).
std::array<Shape, 2> operand_shapes(const RunContext& ctx) {
  const Shape& a = ctx.input(0).shape();
  Shape b = ctx.input(1).shape();
  const ir::Node& n = ctx.node();
  if (n.opset() != 0 && n.opset() < 7 && n.has_attr("broadcast")) {
    if (n.attr_i("broadcast") == 0 && a != b)
      throw ctx.error("shapes ", shape_to_string(a), " and ", shape_to_string(b),
                      " differ and legacy attribute broadcast=0");
    b = legacy_b_shape(n, a.size(), b);
  }
  return {a, b};
}

ir::PartialShape infer_binary_shape(ir::InferContext& ctx) {
  const ir::PartialShape& a = ctx.input_shape(0);
  ir::PartialShape b = ctx.input_shape(1);
  const ir::Node& n = ctx.node();
  if (n.opset() != 0 && n.opset() < 7 && n.has_attr("axis") && n.attr_i("broadcast", 0) != 0) {
    if (!a.rank_known || !b.rank_known) return ir::PartialShape::unknown_rank();
    b.dims = legacy_b_shape(n, a.rank(), b.dims);
  }
  return ir::broadcast_shapes({a, b}, n);
}

// Output shape of a runtime broadcast over the given operand shapes.
Shape out_shape(const RunContext& ctx, const std::vector<Shape>& shapes) {
  return broadcast_shape(shapes, ctx.node());
}

// ---------------- integer arithmetic helpers (wrap-around, no UB) ----------------

template <class V>
V wrap_add(V a, V b) {
  if constexpr (std::is_integral_v<V>) return static_cast<V>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  else return a + b;
}
template <class V>
V wrap_sub(V a, V b) {
  if constexpr (std::is_integral_v<V>) return static_cast<V>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
  else return a - b;
}
template <class V>
V wrap_mul(V a, V b) {
  if constexpr (std::is_integral_v<V>) return static_cast<V>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else return a * b;
}

// Pow element function: exact integer power (wrap-around) for int^int, else pow in double
// (integer base) or in the base's compute type.
template <class CA, class CB>
CA pow_elem(CA x, CB e) {
  if constexpr (std::is_integral_v<CA> && std::is_integral_v<CB>) {
    // exact integer power with wrap-around
    if constexpr (std::is_signed_v<CB>) {
      if (e < 0) {
        if (x == 1) return 1;
        if constexpr (std::is_signed_v<CA>)
          if (x == -1) return (e % 2 == 0) ? CA(1) : CA(-1);
        return 0;  // |x| > 1: magnitude < 1 truncates to 0 (x == 0: undefined, 0)
      }
    }
    uint64_t base = static_cast<uint64_t>(x), result = 1;
    uint64_t ex = static_cast<uint64_t>(e);
    while (ex) {
      if (ex & 1) result *= base;
      base *= base;
      ex >>= 1;
    }
    return static_cast<CA>(result);
  } else if constexpr (std::is_integral_v<CA>) {
    return float_to_int<CA>(std::pow(static_cast<double>(x), static_cast<double>(e)));
  } else {
    return std::pow(x, static_cast<CA>(e));
  }
}

// ---------------- binary op registration ----------------

// Same-dtype binary op: output dtype = input dtype (or bool when Bool). `make(ctx)` returns
// the element function for calc_t<T>.
template <unsigned Types, bool Bool, class Make>
void add_binary(ir::OpRegistry& r, const char* name, int since, Make make, std::vector<ir::AttrSpec> attrs = {},
                bool legacy_broadcast = true) {
  ir::OpSchema s;
  s.name = name;
  s.since_version = since;
  s.min_inputs = s.max_inputs = 2;
  s.attrs = std::move(attrs);
  if (legacy_broadcast) s.attrs.insert(s.attrs.end(), kLegacyBroadcastAttrs.begin(), kLegacyBroadcastAttrs.end());
  s.infer = [](ir::InferContext& ctx) {
    DType t = ctx.input_dtype(0);
    check_dtype(ctx, t, Types, 0);
    check_dtype(ctx, ctx.input_dtype(1), Types, 1);
    check_same_dtype(ctx, {t, ctx.input_dtype(1)});
    ctx.set_output(0, Bool ? DType::boolean : t, infer_binary_shape(ctx));
  };
  s.run = [make](RunContext& ctx) {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    check_dtype(ctx, a.dtype(), Types, 0);
    check_same_dtype(ctx, {a.dtype(), b.dtype()});
    auto shapes = operand_shapes(ctx);
    Shape os = out_shape(ctx, {shapes[0], shapes[1]});
    Tensor& y = ctx.allocate_output(0, Bool ? DType::boolean : a.dtype(), os);
    dispatch_all(a.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (type_in<T>(Types)) {
        auto f = make(ctx, TypeTag<calc_t<T>>{});
        using TO = std::conditional_t<Bool, bool, T>;
        apply_binary<TO, T, T>(a, shapes[0], b, shapes[1], y, f);
      }
    });
  };
  r.add(std::move(s));
}

// Element function without attributes: make(ctx, tag) -> f.
template <class F>
auto simple(F f) {
  return [f](const RunContext&, auto) { return f; };
}

void register_arith(ir::OpRegistry& r) {
  add_binary<kNumeric, false>(r, "Add", 1, simple([](auto a, auto b) { return wrap_add(a, b); }));
  add_binary<kNumeric, false>(r, "Sub", 1, simple([](auto a, auto b) { return wrap_sub(a, b); }));
  add_binary<kNumeric, false>(r, "Mul", 1, simple([](auto a, auto b) { return wrap_mul(a, b); }));
  add_binary<kNumeric, false>(r, "Div", 1, [](const RunContext& ctx, auto tag) {
    using V = typename decltype(tag)::type;
    // [&]: only the integer instantiations use ctx (clang warns on an unused explicit capture)
    return [&](V a, V b) -> V {
      if constexpr (std::is_integral_v<V>) {
        if (b == 0) throw ctx.error("integer division by zero");
        if constexpr (std::is_signed_v<V>)
          if (b == V(-1)) return static_cast<V>(-static_cast<std::make_unsigned_t<V>>(a));
        return static_cast<V>(a / b);  // truncates toward zero
      } else {
        return a / b;
      }
    };
  });

  // Mod: fmod=1 -> C fmod (sign of dividend); fmod=0 -> sign of divisor (integers only).
  add_binary<kNumeric, false>(
      r, "Mod", 10,
      [](const RunContext& ctx, auto tag) {
        using V = typename decltype(tag)::type;
        const bool fmod = ctx.node().attr_i("fmod", 0) != 0;
        if constexpr (!std::is_integral_v<V>) {
          if (!fmod) throw ctx.error("floating point inputs require attribute fmod=1");
        }
        // a default capture: the float instantiations use neither (clang warns on explicit ones)
        [[maybe_unused]] const RunContext* c = &ctx;
        return [=](V a, V b) -> V {
          if constexpr (std::is_integral_v<V>) {
            if (b == 0) throw c->error("integer modulo by zero");
            if constexpr (std::is_signed_v<V>) {
              if (b == V(-1)) return V(0);
              V m = static_cast<V>(a % b);
              if (!fmod && m != 0 && ((m < 0) != (b < 0))) m = static_cast<V>(m + b);
              return m;
            } else {
              return static_cast<V>(a % b);
            }
          } else {
            return std::fmod(a, b);
          }
        };
      },
      {{"fmod", ir::AttrType::i}}, false);

  add_binary<kUnsignedInt, false>(
      r, "BitShift", 11,
      [](const RunContext& ctx, auto tag) {
        using V = typename decltype(tag)::type;
        const bool left = ctx.node().attr_s("direction") == "LEFT";
        return [left](V a, V b) -> V {
          constexpr V bits = static_cast<V>(sizeof(V) * 8);
          if (b >= bits) return V(0);
          return left ? static_cast<V>(a << b) : static_cast<V>(a >> b);
        };
      },
      {{"direction", ir::AttrType::s, true}}, false);
  {
    ir::OpSchema s = *r.find("", "BitShift");
    s.validate = [](const ir::Node& n) {
      std::string d = n.attr_s("direction");
      if (d != "LEFT" && d != "RIGHT")
        throw Error(cat(n.describe(), ": attribute 'direction' must be \"LEFT\" or \"RIGHT\", got \"", d, "\""));
    };
    r.add(std::move(s));
  }

  // BitwiseAnd / Or / Xor (opset 18): integers of one type, numpy broadcasting.
  add_binary<kSignedInt | kUnsignedInt, false>(r, "BitwiseAnd", 18, simple([](auto a, auto b) { return a & b; }), {},
                                               false);
  add_binary<kSignedInt | kUnsignedInt, false>(r, "BitwiseOr", 18, simple([](auto a, auto b) { return a | b; }), {},
                                               false);
  add_binary<kSignedInt | kUnsignedInt, false>(r, "BitwiseXor", 18, simple([](auto a, auto b) { return a ^ b; }), {},
                                               false);

  // Pow: base and exponent may differ in type; output has the base's type.
  {
    ir::OpSchema s;
    s.name = "Pow";
    s.since_version = 1;
    s.min_inputs = s.max_inputs = 2;
    s.attrs = kLegacyBroadcastAttrs;
    s.infer = [](ir::InferContext& ctx) {
      check_dtype(ctx, ctx.input_dtype(0), kNumeric, 0);
      check_dtype(ctx, ctx.input_dtype(1), kNumeric, 1);
      ctx.set_output(0, ctx.input_dtype(0), infer_binary_shape(ctx));
    };
    s.run = [](RunContext& ctx) {
      const Tensor& a = ctx.input(0);
      const Tensor& b = ctx.input(1);
      check_dtype(ctx, a.dtype(), kNumeric, 0);
      check_dtype(ctx, b.dtype(), kNumeric, 1);
      auto shapes = operand_shapes(ctx);
      Tensor& y = ctx.allocate_output(0, a.dtype(), out_shape(ctx, {shapes[0], shapes[1]}));
      dispatch_numeric(a.dtype(), [&](auto ta) {
        using TA = typename decltype(ta)::type;
        dispatch_numeric(b.dtype(), [&](auto tb) {
          using TB = typename decltype(tb)::type;
          using CA = calc_t<TA>;
          using CB = calc_t<TB>;
          apply_binary<TA, TA, TB>(a, shapes[0], b, shapes[1], y, [](CA x, CB e) { return pow_elem(x, e); });
        }, "Pow");
      }, "Pow");
    };
    r.add(std::move(s));
  }
}

void register_compare_logic(ir::OpRegistry& r) {
  add_binary<kAll, true>(r, "Equal", 1, simple([](auto a, auto b) { return a == b; }));
  add_binary<kNumeric, true>(r, "Greater", 1, simple([](auto a, auto b) { return a > b; }));
  add_binary<kNumeric, true>(r, "GreaterOrEqual", 12, simple([](auto a, auto b) { return a >= b; }), {}, false);
  add_binary<kNumeric, true>(r, "Less", 1, simple([](auto a, auto b) { return a < b; }));
  add_binary<kNumeric, true>(r, "LessOrEqual", 12, simple([](auto a, auto b) { return a <= b; }), {}, false);
  add_binary<kBool, true>(r, "And", 1, simple([](bool a, bool b) { return a && b; }));
  add_binary<kBool, true>(r, "Or", 1, simple([](bool a, bool b) { return a || b; }));
  add_binary<kBool, true>(r, "Xor", 1, simple([](bool a, bool b) { return a != b; }));

  // Where(cond, X, Y)
  ir::OpSchema s;
  s.name = "Where";
  s.since_version = 9;
  s.min_inputs = s.max_inputs = 3;
  s.infer = [](ir::InferContext& ctx) {
    check_dtype(ctx, ctx.input_dtype(0), kBool, 0);
    check_same_dtype(ctx, {DType::undefined, ctx.input_dtype(1), ctx.input_dtype(2)});
    DType t = ctx.input_dtype(1) != DType::undefined ? ctx.input_dtype(1) : ctx.input_dtype(2);
    ctx.set_output(0, t, ir::broadcast_shapes({ctx.input_shape(0), ctx.input_shape(1), ctx.input_shape(2)},
                                              ctx.node()));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& c = ctx.input(0);
    const Tensor& x = ctx.input(1);
    const Tensor& y = ctx.input(2);
    check_dtype(ctx, c.dtype(), kBool, 0);
    check_same_dtype(ctx, {DType::undefined, x.dtype(), y.dtype()});
    Tensor& out = ctx.allocate_output(0, x.dtype(), out_shape(ctx, {c.shape(), x.shape(), y.shape()}));
    dispatch_all(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const bool* pc = c.data<bool>();
      const T* px = x.data<T>();
      const T* py = y.data<T>();
      T* po = out.data<T>();
      for_each_row<3>(out.shape(), {c.shape(), x.shape(), y.shape()},
                      [&](int64_t o, const auto& off, int64_t n, const auto& st) {
                        for (int64_t j = 0; j < n; ++j)
                          po[o + j] = pc[off[0] + j * st[0]] ? px[off[1] + j * st[1]] : py[off[2] + j * st[2]];
                      });
    }, "Where");
  };
  strings_as_indices(s, {1, 2});
  r.add(std::move(s));
}

// Variadic Max / Min / Sum / Mean over 1..N broadcast inputs. The accumulator is kept in
// calc_t<T> so f16 / bf16 round once at the end.
enum class Variadic { max, min, sum, mean };

template <unsigned Types>
void add_variadic(ir::OpRegistry& r, const char* name, Variadic kind) {
  ir::OpSchema s;
  s.name = name;
  s.since_version = 1;
  s.min_inputs = 1;
  s.max_inputs = 1 << 20;
  s.infer = [](ir::InferContext& ctx) {
    std::vector<DType> ts;
    std::vector<ir::PartialShape> shapes;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      check_dtype(ctx, ctx.input_dtype(i), Types, i);
      ts.push_back(ctx.input_dtype(i));
      shapes.push_back(ctx.input_shape(i));
    }
    check_same_dtype(ctx, ts);
    ctx.set_output(0, ts[0], ir::broadcast_shapes(shapes, ctx.node()));
  };
  s.run = [kind, name](RunContext& ctx) {
    std::vector<Shape> shapes;
    std::vector<DType> ts;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& t = ctx.input(i);
      check_dtype(ctx, t.dtype(), Types, i);
      ts.push_back(t.dtype());
      shapes.push_back(t.shape());
    }
    check_same_dtype(ctx, ts);
    Shape os = out_shape(ctx, shapes);
    Tensor& y = ctx.allocate_output(0, ts[0], os);
    dispatch_numeric(ts[0], [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (type_in<T>(Types)) {
        using C = calc_t<T>;
        std::vector<C> acc(static_cast<size_t>(shape_size(os)));
        for (size_t k = 0; k < ctx.num_inputs(); ++k) {
          const T* px = ctx.input(k).data<T>();
          for_each_row<2>(os, {os, shapes[k]}, [&](int64_t o, const auto& off, int64_t n, const auto& st) {
            C* pa = acc.data() + o;
            const T* pin = px + off[1];
            const int64_t sx = st[1];
            for (int64_t j = 0; j < n; ++j) {
              C v = static_cast<C>(pin[j * sx]);
              if (k == 0) {
                pa[j] = v;
              } else if (kind == Variadic::max) {
                if constexpr (std::is_integral_v<C>) pa[j] = std::max(pa[j], v);
                else pa[j] = (std::isnan(pa[j]) || v < pa[j]) ? pa[j] : v;  // NaN propagates
              } else if (kind == Variadic::min) {
                if constexpr (std::is_integral_v<C>) pa[j] = std::min(pa[j], v);
                else pa[j] = (std::isnan(pa[j]) || v > pa[j]) ? pa[j] : v;
              } else {
                pa[j] = wrap_add(pa[j], v);
              }
            }
          });
        }
        T* py = y.data<T>();
        const C count = static_cast<C>(ctx.num_inputs());
        for (size_t i = 0; i < acc.size(); ++i) py[i] = static_cast<T>(kind == Variadic::mean ? acc[i] / count : acc[i]);
      }
    }, name);
  };
  r.add(std::move(s));
}

// PRelu(X, slope): slope broadcasts unidirectionally to X.
void register_prelu(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "PRelu";
  s.since_version = 1;
  s.min_inputs = s.max_inputs = 2;
  s.infer = [](ir::InferContext& ctx) {
    check_dtype(ctx, ctx.input_dtype(0), kSigned, 0);
    check_same_dtype(ctx, {ctx.input_dtype(0), ctx.input_dtype(1)});
    ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& slope = ctx.input(1);
    check_dtype(ctx, x.dtype(), kSigned, 0);
    check_same_dtype(ctx, {x.dtype(), slope.dtype()});
    Shape ss = slope.shape();
    const Shape& xs = x.shape();
    // Older exporters (opset < 7) give a per-channel 1-D slope of size C for X [N, C, ...].
    const int opset = ctx.node().opset();
    if (opset != 0 && opset < 7 && ss.size() == 1 && xs.size() >= 2 && ss[0] == xs[1] && ss[0] != 1 &&
        xs.back() != ss[0]) {
      ss.assign(xs.size() - 1, 1);
      ss[0] = xs[1];
    }
    if (out_shape(ctx, {xs, ss}) != xs)
      throw ctx.error("slope of shape ", shape_to_string(slope.shape()), " does not broadcast to X of shape ",
                      shape_to_string(xs));
    Tensor& y = ctx.allocate_output(0, x.dtype(), xs);
    dispatch_numeric(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (type_in<T>(kSigned)) {
        apply_binary<T, T, T>(x, xs, slope, ss, y, [](auto v, auto a) {
          using V = decltype(v);
          return v < V(0) ? static_cast<V>(a * v) : v;
        });
      }
    }, "PRelu");
  };
  r.add(std::move(s));
}

// com.microsoft FastGelu(X, bias?): tanh-approximated Gelu of X + bias.
void register_fast_gelu(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.domain = "com.microsoft";
  s.name = "FastGelu";
  s.since_version = 1;
  s.min_inputs = 1;
  s.max_inputs = 2;
  s.infer = [](ir::InferContext& ctx) {
    check_dtype(ctx, ctx.input_dtype(0), kFloat, 0);
    ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    check_dtype(ctx, x.dtype(), kFloat, 0);
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    Tensor zero(x.dtype(), Shape{});
    const Tensor& b = ctx.has_input(1) ? ctx.input(1) : zero;
    check_same_dtype(ctx, {x.dtype(), b.dtype()});
    if (out_shape(ctx, {x.shape(), b.shape()}) != x.shape())
      throw ctx.error("bias of shape ", shape_to_string(b.shape()), " does not broadcast to input shape ",
                      shape_to_string(x.shape()));
    dispatch_float(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      apply_binary<T, T, T>(x, x.shape(), b, b.shape(), y, [](auto v, auto bias) {
        using V = decltype(v);
        V u = v + bias;
        return V(0.5) * u * (V(1) + std::tanh(V(0.79788456080286535588) * (u + V(0.044715) * u * u * u)));
      });
    }, "FastGelu");
  };
  r.add(std::move(s));
}

}  // namespace

void register_elementwise_binary_ops(ir::OpRegistry& r) {
  register_arith(r);
  register_compare_logic(r);
  add_variadic<kNumeric>(r, "Max", Variadic::max);
  add_variadic<kNumeric>(r, "Min", Variadic::min);
  add_variadic<kFloat>(r, "Sum", Variadic::sum);
  add_variadic<kFloat>(r, "Mean", Variadic::mean);
  register_prelu(r);
  register_fast_gelu(r);
}

}  // namespace kiln::ops
