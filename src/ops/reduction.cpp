// Reduction family: Reduce* (10 ops), ArgMax / ArgMin. The other ops of the family
// live in reduction_softmax.cpp (Softmax, LogSoftmax, Hardmax, LayerNormalization,
// NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss) and reduction_misc.cpp (TopK, CumSum).
#include <cmath>
#include <limits>
#include <type_traits>

#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"
#include "ops/op_families.hpp"
#include "ops/reduction_util.hpp"

namespace kiln::ops {

void register_reduction_softmax_ops(ir::OpRegistry& r);  // reduction_softmax.cpp
void register_reduction_misc_ops(ir::OpRegistry& r);     // reduction_misc.cpp

namespace {

enum class RK { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

// ---------------- axes handling ----------------

// Which axes a Reduce* node reduces. `noop` means the output is the input unchanged
// (ReduceSum / opset-18 style noop_with_empty_axes with empty axes).
struct ReduceAxes {
  std::vector<bool> reduced;  // per input dim
  bool noop = false;
};

ReduceAxes resolve_reduce_axes(const ir::Node& node, int64_t rank, const std::vector<int64_t>& axes) {
  ReduceAxes ra;
  ra.reduced.assign(static_cast<size_t>(rank), false);
  if (axes.empty()) {
    if (node.attr_i("noop_with_empty_axes", 0) != 0) {
      ra.noop = true;
    } else {
      ra.reduced.assign(static_cast<size_t>(rank), true);
    }
    return ra;
  }
  for (int64_t a : axes) {
    int64_t n = a < 0 ? a + rank : a;
    KILN_CHECK(n >= 0 && n < rank, cat(node.describe(), ": axis ", a, " is out of range for an input of rank ", rank));
    KILN_CHECK(!ra.reduced[static_cast<size_t>(n)], cat(node.describe(), ": axis ", a, " is repeated in axes"));
    ra.reduced[static_cast<size_t>(n)] = true;
  }
  return ra;
}

// The axes of a Reduce* node as given (attribute, or input 1 when present).
// Returns false when they come from a non-constant input (only possible in infer).
bool reduce_axes_static(const ir::InferContext& ctx, std::vector<int64_t>& axes) {
  if (ctx.has_input(1)) {
    const Tensor* c = ctx.input_constant(1);
    if (!c) return false;
    axes = c->to_i64();
    return true;
  }
  axes = ctx.node().attr_ints("axes", {});
  return true;
}

std::vector<int64_t> reduce_axes_runtime(const ir::RunContext& ctx) {
  if (ctx.has_input(1)) {
    const Tensor& a = ctx.input(1);
    KILN_CHECK(a.dtype() == DType::i64 || a.dtype() == DType::i32,
               ctx.error("axes input must be int64, got ", dtype_name(a.dtype())));
    KILN_CHECK(a.rank() <= 1, ctx.error("axes input must be 1-D, got shape ", shape_to_string(a.shape())));
    return a.to_i64();
  }
  return ctx.node().attr_ints("axes", {});
}

// ---------------- kernel ----------------

template <RK K, typename T>
void reduce_kernel(const Tensor& x, const Shape& keep_shape, Tensor& y) {
  constexpr bool fp = is_fp_v<T>;
  constexpr bool want_double = fp || K == RK::L2 || K == RK::LogSum || K == RK::LogSumExp;
  using Acc = std::conditional_t<want_double, double, std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;

  const int64_t n_out = shape_size(keep_shape);
  if (n_out == 0) return;
  const int64_t count = x.size() / n_out;
  const T* px = x.data<T>();
  T* py = y.data<T>();

  Acc init{};
  if constexpr (K == RK::Prod) init = Acc(1);
  if constexpr (K == RK::Max) {
    if constexpr (want_double) init = -std::numeric_limits<double>::infinity();
    else init = static_cast<Acc>(std::numeric_limits<T>::lowest());
  }
  if constexpr (K == RK::Min) {
    if constexpr (want_double) init = std::numeric_limits<double>::infinity();
    else init = static_cast<Acc>(std::numeric_limits<T>::max());
  }
  std::vector<Acc> acc(static_cast<size_t>(n_out), init);

  // LogSumExp: subtract the per-output max for stability.
  std::vector<double> mx;
  if constexpr (K == RK::LogSumExp) {
    mx.assign(static_cast<size_t>(n_out), -std::numeric_limits<double>::infinity());
    for_each_broadcast<1>(x.shape(), {keep_shape}, [&](int64_t i, const std::array<int64_t, 1>& off) {
      double v = to_double(px[i]);
      double& m = mx[static_cast<size_t>(off[0])];
      if (v > m) m = v;
    });
    for (double& m : mx)
      if (!std::isfinite(m)) m = 0;  // all -inf / +inf / NaN: let exp/log produce the IEEE result
  }

  for_each_broadcast<1>(x.shape(), {keep_shape}, [&](int64_t i, const std::array<int64_t, 1>& off) {
    Acc& a = acc[static_cast<size_t>(off[0])];
    if constexpr (want_double) {
      double v = to_double(px[i]);
      if constexpr (K == RK::Sum || K == RK::Mean || K == RK::LogSum) a += v;
      else if constexpr (K == RK::Max) { if (v > a || v != v) a = v; }
      else if constexpr (K == RK::Min) { if (v < a || v != v) a = v; }
      else if constexpr (K == RK::Prod) a *= v;
      else if constexpr (K == RK::L1) a += std::fabs(v);
      else if constexpr (K == RK::L2 || K == RK::SumSquare) a += v * v;
      else if constexpr (K == RK::LogSumExp) a += std::exp(v - mx[static_cast<size_t>(off[0])]);
    } else {
      // integers: wrap-around arithmetic like numpy (done in uint64 to avoid UB)
      Acc v = static_cast<Acc>(px[i]);
      auto add = [](Acc p, Acc q) { return static_cast<Acc>(static_cast<uint64_t>(p) + static_cast<uint64_t>(q)); };
      auto mul = [](Acc p, Acc q) { return static_cast<Acc>(static_cast<uint64_t>(p) * static_cast<uint64_t>(q)); };
      if constexpr (K == RK::Sum || K == RK::Mean) a = add(a, v);
      else if constexpr (K == RK::Max) { if (v > a) a = v; }
      else if constexpr (K == RK::Min) { if (v < a) a = v; }
      else if constexpr (K == RK::Prod) a = mul(a, v);
      else if constexpr (K == RK::L1) a = add(a, v < 0 ? static_cast<Acc>(0 - static_cast<uint64_t>(v)) : v);
      else if constexpr (K == RK::SumSquare) a = add(a, mul(v, v));
    }
  });

  for (int64_t o = 0; o < n_out; ++o) {
    Acc a = acc[static_cast<size_t>(o)];
    if constexpr (want_double) {
      double r = a;
      if constexpr (K == RK::Mean) r = count > 0 ? a / static_cast<double>(count) : std::numeric_limits<double>::quiet_NaN();
      if constexpr (K == RK::L2) r = std::sqrt(a);
      if constexpr (K == RK::LogSum) r = std::log(a);
      if constexpr (K == RK::LogSumExp) r = std::log(a) + mx[static_cast<size_t>(o)];
      py[o] = from_double<T>(r);
    } else {
      if constexpr (K == RK::Mean) {
        if (count > 0) a = static_cast<Acc>(a / static_cast<Acc>(count));
      }
      py[o] = static_cast<T>(a);
    }
  }
}

template <RK K>
void reduce_run(ir::RunContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  ReduceAxes ra = resolve_reduce_axes(ctx.node(), rank, reduce_axes_runtime(ctx));
  // noop_with_empty_axes: no axis is reduced, so each element is its own group: the identity
  // for Sum / Mean / Max / Min / Prod / LogSumExp, |x| for L1 / L2, log(x) for LogSum, x^2 for
  // SumSquare (as ONNX's reference and ONNX Runtime compute it)
  constexpr bool identity_when_noop = K == RK::Sum || K == RK::Mean || K == RK::Max || K == RK::Min || K == RK::Prod;
  if (ra.noop && identity_when_noop) {
    ctx.set_output(0, x);
    return;
  }
  const bool keepdims = ctx.node().attr_i("keepdims", 1) != 0 || ra.noop;
  Shape keep_shape = x.shape(), out_shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (ra.reduced[static_cast<size_t>(d)]) {
      keep_shape[static_cast<size_t>(d)] = 1;
      if (keepdims) out_shape.push_back(1);
    } else {
      out_shape.push_back(x.shape()[static_cast<size_t>(d)]);
    }
  }
  Tensor& y = ctx.allocate_output(0, x.dtype(), out_shape);
  if constexpr (K == RK::Max || K == RK::Min) {
    if (x.dtype() == DType::boolean) {  // opset 20: Max = any, Min = all, on the 0 / 1 bytes
      const Tensor xb = Tensor::wrap(DType::u8, x.shape(), const_cast<void*>(x.raw()));
      Tensor yb = Tensor::wrap(DType::u8, y.shape(), y.raw());
      reduce_kernel<K, uint8_t>(xb, keep_shape, yb);
      auto* p = static_cast<uint8_t*>(y.raw());
      for (int64_t i = 0; i < y.size(); ++i) p[i] = p[i] != 0;  // Min over nothing: 255 -> true
      return;
    }
  }
  dispatch_numeric(
      x.dtype(), [&](auto tag) { reduce_kernel<K, typename decltype(tag)::type>(x, keep_shape, y); },
      ctx.node().op_type().c_str());
}

void reduce_infer(ir::InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  const ir::PartialShape& in = ctx.input_shape(0);
  const bool keepdims = ctx.node().attr_i("keepdims", 1) != 0;
  std::vector<int64_t> axes;
  if (!in.rank_known || !reduce_axes_static(ctx, axes)) {
    if (in.rank_known && keepdims) {
      ctx.set_output(0, dt, ir::PartialShape(std::vector<ir::Dim>(in.rank(), ir::Dim::unknown())));
    } else {
      ctx.set_output(0, dt, ir::PartialShape::unknown_rank());
    }
    return;
  }
  ReduceAxes ra = resolve_reduce_axes(ctx.node(), static_cast<int64_t>(in.rank()), axes);
  if (ra.noop) {
    ctx.set_output(0, dt, in);
    return;
  }
  std::vector<ir::Dim> out;
  for (size_t d = 0; d < in.rank(); ++d) {
    if (ra.reduced[d]) {
      if (keepdims) out.emplace_back(1);
    } else {
      out.push_back(in.dims[d]);
    }
  }
  ctx.set_output(0, dt, ir::PartialShape(std::move(out)));
}

template <RK K>
void add_reduce(ir::OpRegistry& r, const char* name) {
  ir::OpSchema s;
  s.name = name;
  s.since_version = 1;
  s.min_inputs = 1;
  s.max_inputs = 2;  // axes input: ReduceSum >= 13, every Reduce* >= 18
  s.attrs = {{"axes", ir::AttrType::ints}, {"keepdims", ir::AttrType::i}, {"noop_with_empty_axes", ir::AttrType::i}};
  s.validate = [](const ir::Node& n) {
    KILN_CHECK(!(n.has_attr("axes") && n.has_input(1)),
               cat(n.describe(), ": axes given both as attribute and as input"));
  };
  s.infer = reduce_infer;
  s.run = reduce_run<K>;
  r.add(std::move(s));
}

// ---------------- ArgMax / ArgMin ----------------

template <bool IsMax, typename T>
void arg_kernel(const Tensor& x, int64_t axis, bool last, Tensor& y) {
  using C = std::conditional_t<is_fp_v<T>, double, T>;
  const Shape& s = x.shape();
  int64_t outer = 1, inner = 1, n = s[static_cast<size_t>(axis)];
  for (int64_t d = 0; d < axis; ++d) outer *= s[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < s.size(); ++d) inner *= s[d];
  const T* px = x.data<T>();
  int64_t* py = y.data<int64_t>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      const T* line = px + o * n * inner + in;
      int64_t best_i = 0;
      C best = static_cast<C>(line[0]);
      bool best_nan = best != best;  // NaN wins, like numpy
      for (int64_t k = 1; k < n && !best_nan; ++k) {
        C v = static_cast<C>(line[k * inner]);
        if (v != v) {
          best_i = k;
          best_nan = true;
          break;
        }
        bool better = IsMax ? (last ? v >= best : v > best) : (last ? v <= best : v < best);
        if (better) {
          best = v;
          best_i = k;
        }
      }
      py[o * inner + in] = best_i;
    }
  }
}

template <bool IsMax>
void add_arg(ir::OpRegistry& r, const char* name) {
  ir::OpSchema s;
  s.name = name;
  s.since_version = 1;
  s.attrs = {{"axis", ir::AttrType::i}, {"keepdims", ir::AttrType::i}, {"select_last_index", ir::AttrType::i}};
  s.infer = [](ir::InferContext& ctx) {
    const ir::PartialShape& in = ctx.input_shape(0);
    if (!in.rank_known) {
      ctx.set_output(0, DType::i64, ir::PartialShape::unknown_rank());
      return;
    }
    int64_t rank = static_cast<int64_t>(in.rank());
    int64_t axis = ir::normalize_axis(ctx.node().attr_i("axis", 0), rank, ctx.node());
    bool keep = ctx.node().attr_i("keepdims", 1) != 0;
    std::vector<ir::Dim> out;
    for (int64_t d = 0; d < rank; ++d) {
      if (d == axis) {
        if (keep) out.emplace_back(1);
      } else {
        out.push_back(in.dims[static_cast<size_t>(d)]);
      }
    }
    ctx.set_output(0, DType::i64, ir::PartialShape(std::move(out)));
  };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const int64_t rank = static_cast<int64_t>(x.rank());
    KILN_CHECK(rank >= 1, ctx.error("input must have rank >= 1, got a scalar"));
    int64_t axis = normalize_axis(ctx.node().attr_i("axis", 0), rank, ctx.node());
    bool keep = ctx.node().attr_i("keepdims", 1) != 0;
    bool last = ctx.node().attr_i("select_last_index", 0) != 0;
    KILN_CHECK(x.shape()[static_cast<size_t>(axis)] > 0,
               ctx.error("cannot take ", ctx.node().op_type(), " over an empty axis ", axis, " of shape ",
                         shape_to_string(x.shape())));
    Shape out;
    for (int64_t d = 0; d < rank; ++d) {
      if (d == axis) {
        if (keep) out.push_back(1);
      } else {
        out.push_back(x.shape()[static_cast<size_t>(d)]);
      }
    }
    Tensor& y = ctx.allocate_output(0, DType::i64, out);
    if (x.size() == 0) return;
    dispatch_numeric(
        x.dtype(), [&](auto tag) { arg_kernel<IsMax, typename decltype(tag)::type>(x, axis, last, y); },
        ctx.node().op_type().c_str());
  };
  r.add(std::move(s));
}

}  // namespace

void register_reduction_ops(ir::OpRegistry& r) {
  add_reduce<RK::Sum>(r, "ReduceSum");
  add_reduce<RK::Mean>(r, "ReduceMean");
  add_reduce<RK::Max>(r, "ReduceMax");
  add_reduce<RK::Min>(r, "ReduceMin");
  add_reduce<RK::Prod>(r, "ReduceProd");
  add_reduce<RK::L1>(r, "ReduceL1");
  add_reduce<RK::L2>(r, "ReduceL2");
  add_reduce<RK::LogSum>(r, "ReduceLogSum");
  add_reduce<RK::LogSumExp>(r, "ReduceLogSumExp");
  add_reduce<RK::SumSquare>(r, "ReduceSumSquare");
  add_arg<true>(r, "ArgMax");
  add_arg<false>(r, "ArgMin");
  register_reduction_softmax_ops(r);
  register_reduction_misc_ops(r);
}

}  // namespace kiln::ops
