// Reduction family, part 3: TopK, CumSum.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"
#include "ops/reduction_util.hpp"

namespace kiln::ops {

namespace {

// [outer, n, inner] view of a shape around `axis` (already normalised).
void split_at_axis(const Shape& s, int64_t axis, int64_t& outer, int64_t& n, int64_t& inner) {
  outer = 1;
  inner = 1;
  n = s[static_cast<size_t>(axis)];
  for (int64_t d = 0; d < axis; ++d) outer *= s[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < s.size(); ++d) inner *= s[d];
}

// ---------------- TopK ----------------

// k from the input (opset >= 10) or the attribute (opset 1). nullopt when not known statically.
std::optional<int64_t> topk_k_static(const ir::InferContext& ctx) {
  if (ctx.has_input(1)) {
    const Tensor* c = ctx.input_constant(1);
    if (!c || c->size() != 1) return std::nullopt;
    return c->to_i64()[0];
  }
  if (ctx.node().has_attr("k")) return ctx.node().attr_i("k");
  return std::nullopt;
}

int64_t topk_k_runtime(const ir::RunContext& ctx) {
  if (ctx.has_input(1)) {
    const Tensor& k = ctx.input(1);
    KILN_CHECK(k.dtype() == DType::i64 || k.dtype() == DType::i32,
               ctx.error("K must be an int64 tensor, got ", dtype_name(k.dtype())));
    KILN_CHECK(k.size() == 1 && k.rank() <= 1,
               ctx.error("K must be a 1-D tensor with one element, got shape ", shape_to_string(k.shape())));
    return k.to_i64()[0];
  }
  KILN_CHECK(ctx.node().has_attr("k"), ctx.error("K is required (input 1, or attribute 'k' at opset 1)"));
  return ctx.node().attr_i("k");
}

template <typename T>
void topk_kernel(const Tensor& x, int64_t axis, int64_t k, bool largest, Tensor& vals, Tensor& idx) {
  using C = std::conditional_t<is_fp_v<T>, double, T>;
  int64_t outer, n, inner;
  split_at_axis(x.shape(), axis, outer, n, inner);
  const T* px = x.data<T>();
  T* pv = vals.data<T>();
  int64_t* pi = idx.data<int64_t>();
  std::vector<C> line(static_cast<size_t>(n));
  std::vector<int64_t> order(static_cast<size_t>(n));
  // Strict weak orders with NaN treated as the greatest value; ties: lower index first.
  auto isnan_c = [](C v) {
    if constexpr (is_fp_v<T>) return std::isnan(v);
    else return (void)v, false;
  };
  auto before = [&](int64_t a, int64_t b) {
    C va = line[static_cast<size_t>(a)], vb = line[static_cast<size_t>(b)];
    bool na = isnan_c(va), nb = isnan_c(vb);
    if (largest) {
      if (na || nb) {
        if (na != nb) return na;
      } else if (va != vb) {
        return va > vb;
      }
    } else {
      if (na || nb) {
        if (na != nb) return nb;
      } else if (va != vb) {
        return va < vb;
      }
    }
    return a < b;
  };
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      const T* src = px + o * n * inner + in;
      for (int64_t j = 0; j < n; ++j) line[static_cast<size_t>(j)] = static_cast<C>(src[j * inner]);
      std::iota(order.begin(), order.end(), int64_t{0});
      std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
      for (int64_t j = 0; j < k; ++j) {
        int64_t at = o * k * inner + j * inner + in;
        pi[at] = order[static_cast<size_t>(j)];
        pv[at] = src[order[static_cast<size_t>(j)] * inner];
      }
    }
  }
}

void add_topk(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "TopK";
  s.since_version = 1;
  s.min_inputs = 1;
  s.max_inputs = 2;
  s.min_outputs = 2;
  s.max_outputs = 2;
  s.attrs = {{"axis", ir::AttrType::i}, {"largest", ir::AttrType::i}, {"sorted", ir::AttrType::i}, {"k", ir::AttrType::i}};
  s.validate = [](const ir::Node& n) {
    KILN_CHECK(n.has_input(1) || n.has_attr("k"), cat(n.describe(), ": K is required (input 1 or attribute 'k')"));
  };
  s.infer = [](ir::InferContext& ctx) {
    DType dt = ctx.input_dtype(0);
    ir::PartialShape out = ctx.input_shape(0);
    if (out.rank_known) {
      int64_t axis = ir::normalize_axis(ctx.node().attr_i("axis", -1), static_cast<int64_t>(out.rank()), ctx.node());
      auto k = topk_k_static(ctx);
      out.dims[static_cast<size_t>(axis)] = k ? ir::Dim(*k) : ir::Dim::unknown();
    }
    ctx.set_output(0, dt, out);
    ctx.set_output(1, DType::i64, out);
  };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const int64_t rank = static_cast<int64_t>(x.rank());
    KILN_CHECK(rank >= 1, ctx.error("input must have rank >= 1, got a scalar"));
    const int64_t axis = normalize_axis(ctx.node().attr_i("axis", -1), rank, ctx.node());
    const int64_t k = topk_k_runtime(ctx);
    const int64_t n = x.shape()[static_cast<size_t>(axis)];
    KILN_CHECK(k >= 0 && k <= n, ctx.error("K = ", k, " is out of range for axis ", axis, " of size ", n));
    const bool largest = ctx.node().attr_i("largest", 1) != 0;
    Shape out = x.shape();
    out[static_cast<size_t>(axis)] = k;
    Tensor& vals = ctx.allocate_output(0, x.dtype(), out);
    Tensor& idx = ctx.allocate_output(1, DType::i64, out);
    if (shape_size(out) == 0) return;
    dispatch_numeric(
        x.dtype(),
        [&](auto tag) { topk_kernel<typename decltype(tag)::type>(x, axis, k, largest, vals, idx); }, "TopK");
  };
  r.add(std::move(s));
}

// ---------------- CumSum ----------------

template <typename T>
void cumsum_kernel(const Tensor& x, int64_t axis, bool exclusive, bool reverse, Tensor& y) {
  using Acc = std::conditional_t<is_fp_v<T>, double, std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;
  int64_t outer, n, inner;
  split_at_axis(x.shape(), axis, outer, n, inner);
  const T* px = x.data<T>();
  T* py = y.data<T>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      const int64_t base = o * n * inner + in;
      Acc acc{};
      for (int64_t j = 0; j < n; ++j) {
        const int64_t jj = reverse ? n - 1 - j : j;
        const int64_t at = base + jj * inner;
        Acc v;
        if constexpr (is_fp_v<T>) v = to_double(px[at]);
        else v = static_cast<Acc>(px[at]);
        auto add = [](Acc a, Acc b) -> Acc {
          if constexpr (is_fp_v<T>) return a + b;
          else return static_cast<Acc>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));  // wraps, no UB
        };
        if (exclusive) {
          if constexpr (is_fp_v<T>) py[at] = from_double<T>(acc);
          else py[at] = static_cast<T>(acc);
          acc = add(acc, v);
        } else {
          acc = add(acc, v);
          if constexpr (is_fp_v<T>) py[at] = from_double<T>(acc);
          else py[at] = static_cast<T>(acc);
        }
      }
    }
  }
}

void add_cumsum(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "CumSum";
  s.since_version = 11;
  s.min_inputs = 2;
  s.max_inputs = 2;
  s.attrs = {{"exclusive", ir::AttrType::i}, {"reverse", ir::AttrType::i}};
  s.infer = [](ir::InferContext& ctx) {
    const ir::PartialShape& in = ctx.input_shape(0);
    if (in.rank_known) {
      if (const Tensor* a = ctx.input_constant(1); a && a->size() == 1)
        (void)ir::normalize_axis(a->to_i64()[0], static_cast<int64_t>(in.rank()), ctx.node());
    }
    ctx.set_output(0, ctx.input_dtype(0), in);
  };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& a = ctx.input(1);
    KILN_CHECK(a.dtype() == DType::i64 || a.dtype() == DType::i32,
               ctx.error("axis must be int32 or int64, got ", dtype_name(a.dtype())));
    KILN_CHECK(a.size() == 1 && a.rank() <= 1,
               ctx.error("axis must be a scalar, got shape ", shape_to_string(a.shape())));
    const int64_t rank = static_cast<int64_t>(x.rank());
    KILN_CHECK(rank >= 1, ctx.error("input must have rank >= 1, got a scalar"));
    const int64_t axis = normalize_axis(a.to_i64()[0], rank, ctx.node());
    const bool exclusive = ctx.node().attr_i("exclusive", 0) != 0;
    const bool reverse = ctx.node().attr_i("reverse", 0) != 0;
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    if (x.size() == 0) return;
    dispatch_numeric(
        x.dtype(),
        [&](auto tag) { cumsum_kernel<typename decltype(tag)::type>(x, axis, exclusive, reverse, y); }, "CumSum");
  };
  r.add(std::move(s));
}

}  // namespace

void register_reduction_misc_ops(ir::OpRegistry& r) {
  add_topk(r);
  add_cumsum(r);
}

}  // namespace kiln::ops
