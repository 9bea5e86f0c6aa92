// Indexing ops of the shape family: Gather, GatherElements, GatherND, ScatterElements,
// Scatter, ScatterND, OneHot, Compress, NonZero, ReverseSequence, EyeLike, Trilu, Unique.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"
#include "ops/shape_common.hpp"

namespace kiln::ops::shape_detail {

namespace {

using ir::Dim;
using ir::PartialShape;

int64_t prod(const Shape& s, size_t b, size_t e) {
  int64_t p = 1;
  for (size_t i = b; i < e; ++i) p *= s[i];
  return p;
}

// ---------------- Gather ----------------

void add_gather(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Gather";
  s.since_version = 1;
  s.min_inputs = 2;
  s.max_inputs = 2;
  s.attrs = {{"axis", ir::AttrType::i}};
  s.infer = [](ir::InferContext& ctx) {
    DType dt = ctx.input_dtype(0);
    require_int_dtype(ctx, 1, "Gather indices");
    const PartialShape& d = ctx.input_shape(0);
    const PartialShape& ind = ctx.input_shape(1);
    if (!d.rank_known || !ind.rank_known) {
      ctx.set_output(0, dt, PartialShape::unknown_rank());
      return;
    }
    if (d.rank() == 0) throw ctx.error("data must have rank >= 1");
    size_t axis = static_cast<size_t>(ir::normalize_axis(ctx.node().attr_i("axis", 0), static_cast<int64_t>(d.rank()), ctx.node()));
    std::vector<Dim> out(d.dims.begin(), d.dims.begin() + static_cast<std::ptrdiff_t>(axis));
    out.insert(out.end(), ind.dims.begin(), ind.dims.end());
    out.insert(out.end(), d.dims.begin() + static_cast<std::ptrdiff_t>(axis) + 1, d.dims.end());
    ctx.set_output(0, dt, PartialShape(out));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& ind = ctx.input(1);
    require_int_dtype(ctx, 1, "Gather indices");
    if (x.rank() == 0) throw ctx.error("data must have rank >= 1");
    size_t axis = static_cast<size_t>(normalize_axis(ctx.node().attr_i("axis", 0), static_cast<int64_t>(x.rank()), ctx.node()));
    const Shape& xs = x.shape();
    Shape os(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(axis));
    os.insert(os.end(), ind.shape().begin(), ind.shape().end());
    os.insert(os.end(), xs.begin() + static_cast<std::ptrdiff_t>(axis) + 1, xs.end());
    const int64_t dim = xs[axis];
    auto idx = ind.to_i64();
    for (auto& v : idx) v = wrap_index(ctx, v, dim, "Gather");
    // every element is written below: no zeroing first
    Tensor& y = ctx.allocate_output_unzeroed(0, x.dtype(), os);
    const int64_t outer = prod(xs, 0, axis), inner = prod(xs, axis + 1, xs.size());
    const int64_t n = static_cast<int64_t>(idx.size());
    const size_t chunk = static_cast<size_t>(inner) * dtype_size(x.dtype());
    auto* src = static_cast<const unsigned char*>(x.raw());
    auto* dst = static_cast<unsigned char*>(y.raw());
    if (chunk == 0) return;
    // rows in parallel from 256 KiB on: an embedding lookup (BERT's words, [8, 126] of a
    // 30522 x 384 table) reads rows scattered over a table larger than the cache, and one
    // thread waited on each row's misses alone (1.1 ms for 1.5 MiB)
    const int64_t rows = outer * n;
    const bool parallel = static_cast<double>(rows) * static_cast<double>(chunk) >= 256.0 * 1024;
#pragma omp parallel for if (parallel) schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t o = r / n, j = r % n;
      std::memcpy(dst + static_cast<size_t>(r) * chunk,
                  src + static_cast<size_t>(o * dim + idx[static_cast<size_t>(j)]) * chunk, chunk);
    }
  };
  strings_as_indices(s, {0});
  r.add(std::move(s));
}

// Calls f(i, offset) for every element i of `indices` (same rank as the data), in order:
// the offset into `data` of the element whose coordinates are i's with the index value in
// place of the one along `axis`. Indices are read where they are (int64 / int32; other integer
// types through a copy), the last dim in an inner loop. Used by GatherElements and
// ScatterElements.
template <typename F>
void for_each_element_offset(const RunContext& ctx, const Shape& ds, const Tensor& indices, size_t axis,
                             const char* what, F&& f) {
  const Shape& is = indices.shape();
  const size_t r = ds.size();
  for (size_t k = 0; k < r; ++k)
    if (k != axis && is[k] > ds[k])
      throw ctx.error("indices shape ", shape_to_string(is), " exceeds data shape ", shape_to_string(ds), " on axis ", k);
  const int64_t n = shape_size(is);
  if (n == 0) return;
  const auto st = strides_of(ds);
  const int64_t inner = is[r - 1], outer = n / inner, dim = ds[axis], step = st[axis];
  const bool axis_inner = axis == r - 1;
  auto visit = [&](const auto* idx) {
    std::vector<int64_t> mi(r - 1, 0);
    int64_t base = 0;  // offset of the coordinates before the last, the axis's left out
    for (int64_t o = 0, i = 0; o < outer; ++o) {
      if (axis_inner) {
        for (int64_t j = 0; j < inner; ++j, ++i) f(i, base + wrap_index(ctx, static_cast<int64_t>(idx[i]), dim, what));
      } else {
        for (int64_t j = 0; j < inner; ++j, ++i)
          f(i, base + j + wrap_index(ctx, static_cast<int64_t>(idx[i]), dim, what) * step);
      }
      for (size_t d = r - 1; d-- > 0;) {
        ++mi[d];
        if (d != axis) base += st[d];
        if (mi[d] < is[d]) break;
        if (d != axis) base -= st[d] * mi[d];
        mi[d] = 0;
      }
    }
  };
  if (indices.dtype() == DType::i64) {
    visit(indices.data<int64_t>());
  } else if (indices.dtype() == DType::i32) {
    visit(indices.data<int32_t>());
  } else {
    const std::vector<int64_t> copy = indices.to_i64();
    visit(copy.data());
  }
}

void add_gather_elements(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "GatherElements";
  s.since_version = 11;
  s.min_inputs = 2;
  s.max_inputs = 2;
  s.attrs = {{"axis", ir::AttrType::i}};
  s.infer = [](ir::InferContext& ctx) {
    require_int_dtype(ctx, 1, "GatherElements indices");
    ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(1));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& ind = ctx.input(1);
    require_int_dtype(ctx, 1, "GatherElements indices");
    if (x.rank() == 0 || ind.rank() != x.rank())
      throw ctx.error("data ", shape_to_string(x.shape()), " and indices ", shape_to_string(ind.shape()),
                      " must have the same rank >= 1");
    size_t axis = static_cast<size_t>(normalize_axis(ctx.node().attr_i("axis", 0), static_cast<int64_t>(x.rank()), ctx.node()));
    Tensor& y = ctx.allocate_output_unzeroed(0, x.dtype(), ind.shape());  // every element written below
    dispatch_bytes(x.dtype(), [&](auto tag) {
      using E = typename decltype(tag)::type;
      const E* src = raw_as<E>(x);
      E* dst = raw_as<E>(y);
      for_each_element_offset(ctx, x.shape(), ind, axis, "GatherElements",
                              [&](int64_t i, int64_t off) { dst[i] = src[off]; });
    });
  };
  strings_as_indices(s, {0});
  r.add(std::move(s));
}

// ---------------- GatherND ----------------

struct NdPlan {
  int64_t batch = 1;        // product of batch dims
  int64_t per_batch = 1;    // index tuples per batch
  int64_t k = 0;            // tuple length
  int64_t inner = 1;        // elements per gathered slice
  int64_t data_batch = 1;   // data elements per batch
  std::vector<int64_t> dims, strides;  // the k indexed dims and their strides (elements)
  Shape out_shape;          // indices.shape[:-1] + data.shape[b+k:]
};

NdPlan nd_plan(const RunContext& ctx, const Shape& ds, const Shape& is, int64_t b) {
  const int64_t r = static_cast<int64_t>(ds.size()), q = static_cast<int64_t>(is.size());
  if (q < 1) throw ctx.error("indices must have rank >= 1");
  if (b < 0 || b >= std::min(r, q)) throw ctx.error("batch_dims ", b, " must be less than the ranks of data and indices");
  NdPlan p;
  p.k = is.back();
  if (p.k < 0 || p.k > r - b)
    throw ctx.error("indices last dim ", p.k, " must be at most data rank - batch_dims = ", r - b);
  for (int64_t i = 0; i < b; ++i)
    if (ds[static_cast<size_t>(i)] != is[static_cast<size_t>(i)])
      throw ctx.error("batch dims of data ", shape_to_string(ds), " and indices ", shape_to_string(is), " differ");
  size_t ub = static_cast<size_t>(b), uk = static_cast<size_t>(p.k);
  p.batch = prod(ds, 0, ub);
  p.per_batch = prod(is, ub, is.size() - 1);
  p.inner = prod(ds, ub + uk, ds.size());
  p.data_batch = prod(ds, ub, ds.size());
  for (size_t i = 0; i < uk; ++i) {
    p.dims.push_back(ds[ub + i]);
    p.strides.push_back(prod(ds, ub + i + 1, ds.size()));
  }
  p.out_shape.assign(is.begin(), is.end() - 1);
  p.out_shape.insert(p.out_shape.end(), ds.begin() + b + p.k, ds.end());
  return p;
}

// Offset (elements) in data of every tuple of `idx`, batch offsets included.
std::vector<int64_t> nd_offsets(const RunContext& ctx, const NdPlan& p, const std::vector<int64_t>& idx, const char* what) {
  std::vector<int64_t> offs(static_cast<size_t>(p.batch * p.per_batch));
  for (int64_t bi = 0; bi < p.batch; ++bi)
    for (int64_t j = 0; j < p.per_batch; ++j) {
      size_t t = static_cast<size_t>(bi * p.per_batch + j);
      int64_t off = bi * p.data_batch;
      for (size_t c = 0; c < p.dims.size(); ++c)
        off += wrap_index(ctx, idx[t * p.dims.size() + c], p.dims[c], what) * p.strides[c];
      offs[t] = off;
    }
  return offs;
}

void add_gather_nd(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "GatherND";
  s.since_version = 11;
  s.min_inputs = 2;
  s.max_inputs = 2;
  s.attrs = {{"batch_dims", ir::AttrType::i}};
  s.infer = [](ir::InferContext& ctx) {
    DType dt = ctx.input_dtype(0);
    const PartialShape& d = ctx.input_shape(0);
    const PartialShape& ind = ctx.input_shape(1);
    require_int_dtype(ctx, 1, "GatherND indices");
    if (!d.rank_known || !ind.rank_known || ind.rank() == 0 || !ind.dims.back().is_static()) {
      ctx.set_output(0, dt, PartialShape::unknown_rank());
      return;
    }
    int64_t b = ctx.node().attr_i("batch_dims", 0);
    int64_t k = ind.dims.back().value;
    if (b < 0 || k > static_cast<int64_t>(d.rank()) - b) throw ctx.error("indices last dim ", k, " too large for data rank ", d.rank());
    std::vector<Dim> out(ind.dims.begin(), ind.dims.end() - 1);
    out.insert(out.end(), d.dims.begin() + b + k, d.dims.end());
    ctx.set_output(0, dt, PartialShape(out));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& ind = ctx.input(1);
    require_int_dtype(ctx, 1, "GatherND indices");
    NdPlan p = nd_plan(ctx, x.shape(), ind.shape(), ctx.node().attr_i("batch_dims", 0));
    auto offs = nd_offsets(ctx, p, ind.to_i64(), "GatherND");
    Tensor& y = ctx.allocate_output(0, x.dtype(), p.out_shape);
    const size_t es = dtype_size(x.dtype()), chunk = static_cast<size_t>(p.inner) * es;
    auto* src = static_cast<const unsigned char*>(x.raw());
    auto* dst = static_cast<unsigned char*>(y.raw());
    if (chunk == 0) return;
    for (size_t t = 0; t < offs.size(); ++t) std::memcpy(dst + t * chunk, src + static_cast<size_t>(offs[t]) * es, chunk);
  };
  strings_as_indices(s, {0});
  r.add(std::move(s));
}

// ---------------- Scatter ----------------

enum class Reduce { none, add, mul, max, min };

Reduce parse_reduction(const ir::Node& n) {
  std::string s = n.attr_s("reduction", "none");
  if (s == "none") return Reduce::none;
  if (s == "add") return Reduce::add;
  if (s == "mul") return Reduce::mul;
  if (s == "max") return Reduce::max;
  if (s == "min") return Reduce::min;
  throw Error(cat(n.describe(), ": reduction must be none, add, mul, max or min, got '", s, "'"));
}

// dst[offs[i] + j] (op)= upd[i * inner + j] for every i, j.
void scatter_apply(const RunContext& ctx, Tensor& y, const Tensor& upd, const std::vector<int64_t>& offs, int64_t inner,
                   Reduce red) {
  if (red == Reduce::none) {
    dispatch_bytes(y.dtype(), [&](auto tag) {
      using E = typename decltype(tag)::type;
      const E* pu = raw_as<E>(upd);
      E* py = raw_as<E>(y);
      for (size_t i = 0; i < offs.size(); ++i)
        for (int64_t j = 0; j < inner; ++j) py[offs[i] + j] = pu[static_cast<int64_t>(i) * inner + j];
    });
    return;
  }
  auto op = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pu = upd.data<T>();
    T* py = y.data<T>();
    for (size_t i = 0; i < offs.size(); ++i)
      for (int64_t j = 0; j < inner; ++j) {
        T& a = py[offs[i] + j];
        T b = pu[static_cast<int64_t>(i) * inner + j];
        switch (red) {
          case Reduce::add: a = static_cast<T>(a + b); break;
          case Reduce::mul: a = static_cast<T>(a * b); break;
          case Reduce::max: if (b > a) a = b; break;
          case Reduce::min: if (b < a) a = b; break;
          case Reduce::none: a = b; break;
        }
      }
  };
  if (y.dtype() == DType::boolean) throw ctx.error("reduction is not supported for bool tensors");
  dispatch_numeric(y.dtype(), op, "ScatterElements reduction");
}

void add_scatter_elements(ir::OpRegistry& r, const char* name, int since) {
  ir::OpSchema s;
  s.name = name;
  s.since_version = since;
  s.min_inputs = 3;
  s.max_inputs = 3;
  s.attrs = {{"axis", ir::AttrType::i}};
  if (std::string(name) == "ScatterElements") s.attrs.push_back({"reduction", ir::AttrType::s});
  s.validate = [](const ir::Node& n) { parse_reduction(n); };
  s.infer = [](ir::InferContext& ctx) {
    require_int_dtype(ctx, 1, "indices");
    ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& ind = ctx.input(1);
    const Tensor& upd = ctx.input(2);
    require_int_dtype(ctx, 1, "indices");
    if (upd.dtype() != x.dtype())
      throw ctx.error("updates element type ", dtype_name(upd.dtype()), " differs from data ", dtype_name(x.dtype()));
    if (upd.shape() != ind.shape())
      throw ctx.error("updates shape ", shape_to_string(upd.shape()), " must equal indices shape ", shape_to_string(ind.shape()));
    if (x.rank() == 0 || ind.rank() != x.rank())
      throw ctx.error("data ", shape_to_string(x.shape()), " and indices ", shape_to_string(ind.shape()),
                      " must have the same rank >= 1");
    size_t axis = static_cast<size_t>(normalize_axis(ctx.node().attr_i("axis", 0), static_cast<int64_t>(x.rank()), ctx.node()));
    const char* what = ctx.node().op_type().c_str();
    Tensor& y = ctx.allocate_output_unzeroed(0, x.dtype(), x.shape());  // a copy of the data, then the updates
    if (x.byte_size()) std::memcpy(y.raw(), x.raw(), x.byte_size());
    const Reduce red = parse_reduction(ctx.node());
    if (red == Reduce::none) {
      dispatch_bytes(y.dtype(), [&](auto tag) {
        using E = typename decltype(tag)::type;
        const E* pu = raw_as<E>(upd);
        E* py = raw_as<E>(y);
        for_each_element_offset(ctx, x.shape(), ind, axis, what, [&](int64_t i, int64_t off) { py[off] = pu[i]; });
      });
    } else {
      std::vector<int64_t> offs(static_cast<size_t>(ind.size()));
      for_each_element_offset(ctx, x.shape(), ind, axis, what,
                              [&](int64_t i, int64_t off) { offs[static_cast<size_t>(i)] = off; });
      scatter_apply(ctx, y, upd, offs, 1, red);
    }
  };
  strings_as_indices(s, {0, 2});
  r.add(std::move(s));
}

void add_scatter_nd(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "ScatterND";
  s.since_version = 11;
  s.min_inputs = 3;
  s.max_inputs = 3;
  s.attrs = {{"reduction", ir::AttrType::s}};
  s.validate = [](const ir::Node& n) { parse_reduction(n); };
  s.infer = [](ir::InferContext& ctx) { ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0)); };
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& ind = ctx.input(1);
    const Tensor& upd = ctx.input(2);
    require_int_dtype(ctx, 1, "ScatterND indices");
    if (upd.dtype() != x.dtype())
      throw ctx.error("updates element type ", dtype_name(upd.dtype()), " differs from data ", dtype_name(x.dtype()));
    if (x.rank() == 0) throw ctx.error("data must have rank >= 1");
    NdPlan p = nd_plan(ctx, x.shape(), ind.shape(), 0);
    if (upd.shape() != p.out_shape)
      throw ctx.error("updates shape ", shape_to_string(upd.shape()), " must be ", shape_to_string(p.out_shape),
                      " (indices.shape[:-1] + data.shape[k:])");
    auto offs = nd_offsets(ctx, p, ind.to_i64(), "ScatterND");
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    if (x.byte_size()) std::memcpy(y.raw(), x.raw(), x.byte_size());
    scatter_apply(ctx, y, upd, offs, p.inner, parse_reduction(ctx.node()));
  };
  strings_as_indices(s, {0, 2});
  r.add(std::move(s));
}

// ---------------- OneHot ----------------

void add_one_hot(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "OneHot";
  s.since_version = 9;
  s.min_inputs = 3;
  s.max_inputs = 3;
  s.attrs = {{"axis", ir::AttrType::i}};
  s.infer = [](ir::InferContext& ctx) {
    DType dt = ctx.input_dtype(2);
    const PartialShape& in = ctx.input_shape(0);
    if (!in.rank_known) {
      ctx.set_output(0, dt, PartialShape::unknown_rank());
      return;
    }
    int64_t rank = static_cast<int64_t>(in.rank()) + 1;
    size_t axis = static_cast<size_t>(ir::normalize_axis(ctx.node().attr_i("axis", -1), rank, ctx.node()));
    Dim depth = Dim::unknown();
    if (const Tensor* t = ctx.input_constant(1); t && t->size() == 1) depth = Dim(static_cast<int64_t>(t->to_f64()[0]));
    std::vector<Dim> out = in.dims;
    out.insert(out.begin() + static_cast<std::ptrdiff_t>(axis), depth);
    ctx.set_output(0, dt, PartialShape(out));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& ind = ctx.input(0);
    const Tensor& dep = ctx.input(1);
    const Tensor& vals = ctx.input(2);
    one_value(ctx, dep, "depth");
    if (vals.size() != 2) throw ctx.error("values must hold [off_value, on_value], got shape ", shape_to_string(vals.shape()));
    if (ind.dtype() == DType::boolean) throw ctx.error("indices must be numeric");
    double dd = dep.to_f64()[0];
    if (!(dd >= 1) || dd > 1e12) throw ctx.error("depth must be >= 1, got ", dd);
    const int64_t depth = static_cast<int64_t>(dd);
    const int64_t rank = static_cast<int64_t>(ind.rank()) + 1;
    size_t axis = static_cast<size_t>(normalize_axis(ctx.node().attr_i("axis", -1), rank, ctx.node()));
    Shape os = ind.shape();
    os.insert(os.begin() + static_cast<std::ptrdiff_t>(axis), depth);
    checked_numel(ctx, os);
    Tensor& y = ctx.allocate_output(0, vals.dtype(), os);
    const int64_t outer = prod(ind.shape(), 0, axis), inner = prod(ind.shape(), axis, ind.rank());
    auto iv = ind.to_f64();
    dispatch_bytes(vals.dtype(), [&](auto tag) {
      using E = typename decltype(tag)::type;
      const E off = raw_as<E>(vals)[0], on = raw_as<E>(vals)[1];
      E* py = raw_as<E>(y);
      for (int64_t i = 0; i < y.size(); ++i) py[i] = off;
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          double v = iv[static_cast<size_t>(o * inner + i)];
          if (!(v >= -static_cast<double>(depth) && v < static_cast<double>(depth))) continue;  // out of range: all off
          int64_t k = static_cast<int64_t>(v);
          if (k < 0) k += depth;
          if (k < 0 || k >= depth) continue;
          py[(o * depth + k) * inner + i] = on;
        }
    });
  };
  r.add(std::move(s));
}

// ---------------- Compress ----------------

void add_compress(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Compress";
  s.since_version = 9;
  s.min_inputs = 2;
  s.max_inputs = 2;
  s.attrs = {{"axis", ir::AttrType::i}};
  s.infer = [](ir::InferContext& ctx) {
    DType dt = ctx.input_dtype(0);
    const PartialShape& in = ctx.input_shape(0);
    if (!ctx.node().has_attr("axis")) {
      ctx.set_output(0, dt, unknown_dims(1));
      return;
    }
    if (!in.rank_known) {
      ctx.set_output(0, dt, PartialShape::unknown_rank());
      return;
    }
    size_t axis = static_cast<size_t>(ir::normalize_axis(ctx.node().attr_i("axis"), static_cast<int64_t>(in.rank()), ctx.node()));
    std::vector<Dim> out = in.dims;
    out[axis] = Dim::unknown();
    ctx.set_output(0, dt, PartialShape(out));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& c = ctx.input(1);
    if (c.dtype() != DType::boolean) throw ctx.error("condition must be bool, got ", dtype_name(c.dtype()));
    if (c.rank() != 1) throw ctx.error("condition must be 1-D, got shape ", shape_to_string(c.shape()));
    const bool* pc = c.data<bool>();
    Shape os;
    int64_t outer, dim, inner;
    if (ctx.node().has_attr("axis")) {
      size_t axis = static_cast<size_t>(normalize_axis(ctx.node().attr_i("axis"), static_cast<int64_t>(x.rank()), ctx.node()));
      outer = prod(x.shape(), 0, axis);
      dim = x.shape()[axis];
      inner = prod(x.shape(), axis + 1, x.rank());
      os = x.shape();
    } else {
      outer = 1;
      dim = x.size();
      inner = 1;
      os = {0};
    }
    if (c.size() > dim)
      throw ctx.error("condition has ", c.size(), " entries but the compressed axis has size ", dim);
    std::vector<int64_t> keep;
    for (int64_t j = 0; j < c.size(); ++j)
      if (pc[j]) keep.push_back(j);
    const int64_t nk = static_cast<int64_t>(keep.size());
    if (ctx.node().has_attr("axis"))
      os[static_cast<size_t>(normalize_axis(ctx.node().attr_i("axis"), static_cast<int64_t>(x.rank()), ctx.node()))] = nk;
    else
      os[0] = nk;
    Tensor& y = ctx.allocate_output(0, x.dtype(), os);
    const size_t es = dtype_size(x.dtype()), chunk = static_cast<size_t>(inner) * es;
    auto* src = static_cast<const unsigned char*>(x.raw());
    auto* dst = static_cast<unsigned char*>(y.raw());
    if (chunk == 0) return;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < nk; ++j)
        std::memcpy(dst + static_cast<size_t>(o * nk + j) * chunk,
                    src + static_cast<size_t>(o * dim + keep[static_cast<size_t>(j)]) * chunk, chunk);
  };
  strings_as_indices(s, {0});
  r.add(std::move(s));
}

// ---------------- NonZero ----------------

template <typename T>
bool is_nonzero(T v) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) return static_cast<float>(v) != 0.0f;
  else return v != T(0);
}

void add_non_zero(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "NonZero";
  s.since_version = 9;
  s.infer = [](ir::InferContext& ctx) {
    const PartialShape& in = ctx.input_shape(0);
    ctx.set_output(0, DType::i64, PartialShape({in.rank_known ? Dim(std::max<int64_t>(1, static_cast<int64_t>(in.rank()))) : Dim::unknown(), Dim::unknown()}));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Shape& xs = x.shape();
    const size_t r = std::max<size_t>(1, xs.size());
    Shape shp = xs.empty() ? Shape{1} : xs;
    std::vector<int64_t> hits;
    dispatch_all(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* px = x.data<T>();
      for (int64_t i = 0; i < x.size(); ++i)
        if (is_nonzero(px[i])) hits.push_back(i);
    }, "NonZero");
    const int64_t nnz = static_cast<int64_t>(hits.size());
    Tensor& y = ctx.allocate_output(0, DType::i64, {static_cast<int64_t>(r), nnz});
    int64_t* py = y.data<int64_t>();
    auto st = strides_of(shp);
    for (int64_t j = 0; j < nnz; ++j) {
      int64_t flat = hits[static_cast<size_t>(j)];
      for (size_t d = 0; d < r; ++d) {
        py[static_cast<int64_t>(d) * nnz + j] = flat / st[d];
        flat %= st[d];
      }
    }
  };
  r.add(std::move(s));
}

// ---------------- ReverseSequence ----------------

void add_reverse_sequence(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "ReverseSequence";
  s.since_version = 10;
  s.min_inputs = 2;
  s.max_inputs = 2;
  s.attrs = {{"batch_axis", ir::AttrType::i}, {"time_axis", ir::AttrType::i}};
  s.validate = [](const ir::Node& n) {
    int64_t b = n.attr_i("batch_axis", 1), t = n.attr_i("time_axis", 0);
    if (!((b == 0 && t == 1) || (b == 1 && t == 0)))
      throw Error(cat(n.describe(), ": batch_axis and time_axis must be 0 and 1 (either order), got ", b, " and ", t));
  };
  s.infer = ir::infer_same_as_input(0);
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& lens_t = ctx.input(1);
    if (x.rank() < 2) throw ctx.error("input must have rank >= 2, got ", shape_to_string(x.shape()));
    require_int_dtype(ctx, 1, "sequence_lens");
    const int64_t baxis = ctx.node().attr_i("batch_axis", 1);
    const int64_t B = x.shape()[static_cast<size_t>(baxis)], T = x.shape()[static_cast<size_t>(1 - baxis)];
    auto lens = lens_t.to_i64();
    if (static_cast<int64_t>(lens.size()) != B)
      throw ctx.error("sequence_lens has ", lens.size(), " entries for batch size ", B);
    for (auto l : lens)
      if (l < 0 || l > T) throw ctx.error("sequence length ", l, " is outside [0, ", T, "]");
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    if (x.byte_size()) std::memcpy(y.raw(), x.raw(), x.byte_size());
    const int64_t inner = prod(x.shape(), 2, x.rank());
    const size_t es = dtype_size(x.dtype()), chunk = static_cast<size_t>(inner) * es;
    auto* src = static_cast<const unsigned char*>(x.raw());
    auto* dst = static_cast<unsigned char*>(y.raw());
    if (chunk == 0) return;
    auto off = [&](int64_t b, int64_t t) { return static_cast<size_t>(baxis == 0 ? b * T + t : t * B + b) * chunk; };
    for (int64_t b = 0; b < B; ++b) {
      const int64_t l = lens[static_cast<size_t>(b)];
      for (int64_t t = 0; t < l; ++t) std::memcpy(dst + off(b, t), src + off(b, l - 1 - t), chunk);
    }
  };
  strings_as_indices(s, {0});
  r.add(std::move(s));
}

// ---------------- EyeLike / Trilu ----------------

void add_eye_like(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "EyeLike";
  s.since_version = 9;
  s.attrs = {{"dtype", ir::AttrType::i}, {"k", ir::AttrType::i}};
  s.validate = [](const ir::Node& n) {
    if (n.has_attr("dtype")) dtype_attr(n, "dtype");
  };
  s.infer = [](ir::InferContext& ctx) {
    DType dt = dtype_attr(ctx.node(), "dtype", ctx.input_dtype(0));
    const PartialShape& in = ctx.input_shape(0);
    if (in.rank_known && in.rank() != 2) throw ctx.error("input must be 2-D, got ", in.to_string());
    ctx.set_output(0, dt, in.rank_known ? in : unknown_dims(2));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    if (x.rank() != 2) throw ctx.error("input must be 2-D, got ", shape_to_string(x.shape()));
    DType dt = dtype_attr(ctx.node(), "dtype", x.dtype());
    Tensor& y = ctx.allocate_output(0, dt, x.shape());
    const int64_t R = x.shape()[0], C = x.shape()[1], k = ctx.node().attr_i("k", 0);
    dispatch_all(dt, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* py = y.data<T>();
      for (int64_t i = 0; i < R; ++i) {
        int64_t j = i + k;
        if (j >= 0 && j < C) py[i * C + j] = static_cast<T>(1);
      }
    }, "EyeLike");
  };
  r.add(std::move(s));
}

void add_trilu(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Trilu";
  s.since_version = 14;
  s.min_inputs = 1;
  s.max_inputs = 2;
  s.attrs = {{"upper", ir::AttrType::i}};
  s.infer = [](ir::InferContext& ctx) {
    const PartialShape& in = ctx.input_shape(0);
    if (in.rank_known && in.rank() < 2) throw ctx.error("input must have rank >= 2, got ", in.to_string());
    ctx.set_output(0, ctx.input_dtype(0), in);
  };
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    if (x.rank() < 2) throw ctx.error("input must have rank >= 2, got ", shape_to_string(x.shape()));
    int64_t k = 0;
    if (ctx.has_input(1)) {
      require_int_dtype(ctx, 1, "Trilu k");
      if (ctx.input(1).size() != 1) throw ctx.error("k must be a scalar, got shape ", shape_to_string(ctx.input(1).shape()));
      k = ctx.input(1).to_i64()[0];
    }
    const bool upper = ctx.node().attr_i("upper", 1) != 0;
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    if (x.byte_size()) std::memcpy(y.raw(), x.raw(), x.byte_size());
    const int64_t R = x.shape()[x.rank() - 2], C = x.shape()[x.rank() - 1];
    const int64_t mats = R * C == 0 ? 0 : x.size() / (R * C);
    const size_t es = dtype_size(x.dtype());
    auto* py = static_cast<unsigned char*>(y.raw());
    for (int64_t m = 0; m < mats; ++m)
      for (int64_t i = 0; i < R; ++i) {
        // zero columns [lo, hi) of row i
        int64_t lo, hi;
        if (upper) {
          lo = 0;
          hi = std::clamp<int64_t>(i + k, 0, C);  // keep j >= i + k
        } else {
          lo = std::clamp<int64_t>(i + k + 1, 0, C);  // keep j <= i + k
          hi = C;
        }
        if (hi > lo) std::memset(py + static_cast<size_t>((m * R + i) * C + lo) * es, 0, static_cast<size_t>(hi - lo) * es);
      }
  };
  r.add(std::move(s));
}

// ---------------- Unique ----------------

template <typename T>
bool val_less(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return !a && b;
  } else if constexpr (std::is_integral_v<T>) {
    return a < b;
  } else {
    const double x = static_cast<double>(static_cast<std::conditional_t<std::is_same_v<T, double>, double, float>>(a));
    const double y = static_cast<double>(static_cast<std::conditional_t<std::is_same_v<T, double>, double, float>>(b));
    const bool nx = std::isnan(x), ny = std::isnan(y);
    if (nx || ny) return !nx && ny;  // NaN sorts last, NaNs compare equal
    return x < y;
  }
}

void add_unique(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Unique";
  s.since_version = 11;
  s.min_outputs = 1;
  s.max_outputs = 4;
  s.attrs = {{"sorted", ir::AttrType::i}, {"axis", ir::AttrType::i}};
  s.infer = [](ir::InferContext& ctx) {
    DType dt = ctx.input_dtype(0);
    const PartialShape& in = ctx.input_shape(0);
    Dim len = Dim::unknown();
    if (ctx.node().has_attr("axis") && in.rank_known) {
      size_t axis = static_cast<size_t>(ir::normalize_axis(ctx.node().attr_i("axis"), static_cast<int64_t>(in.rank()), ctx.node()));
      std::vector<Dim> out = in.dims;
      out[axis] = Dim::unknown();
      ctx.set_output(0, dt, PartialShape(out));
      len = in.dims[axis];
    } else if (ctx.node().has_attr("axis")) {
      ctx.set_output(0, dt, PartialShape::unknown_rank());
    } else {
      ctx.set_output(0, dt, unknown_dims(1));
      if (in.rank_known) len = ir::dim_product(in.dims);
    }
    ctx.set_output(1, DType::i64, unknown_dims(1));
    ctx.set_output(2, DType::i64, PartialShape({len}));
    ctx.set_output(3, DType::i64, unknown_dims(1));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const bool has_axis = ctx.node().has_attr("axis");
    const bool sorted = ctx.node().attr_i("sorted", 1) != 0;
    int64_t outer = 1, dim = x.size(), inner = 1;
    size_t axis = 0;
    if (has_axis) {
      axis = static_cast<size_t>(normalize_axis(ctx.node().attr_i("axis"), static_cast<int64_t>(x.rank()), ctx.node()));
      outer = prod(x.shape(), 0, axis);
      dim = x.shape()[axis];
      inner = prod(x.shape(), axis + 1, x.rank());
    }
    // slice j = { x[o, j, i] } compared lexicographically in (o, i) order
    std::vector<int64_t> order(static_cast<size_t>(dim));
    std::iota(order.begin(), order.end(), 0);
    std::vector<int64_t> group_of(static_cast<size_t>(dim));  // sorted-group id of each slice
    std::vector<int64_t> first;                                // first slice index of each sorted group
    std::vector<int64_t> count;
    dispatch_all(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* px = x.data<T>();
      auto cmp = [&](int64_t a, int64_t b) -> int {
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t i = 0; i < inner; ++i) {
            T va = px[(o * dim + a) * inner + i], vb = px[(o * dim + b) * inner + i];
            if (val_less(va, vb)) return -1;
            if (val_less(vb, va)) return 1;
          }
        return 0;
      };
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return cmp(a, b) < 0; });
      for (size_t p = 0; p < order.size(); ++p) {
        if (p == 0 || cmp(order[p - 1], order[p]) != 0) {
          first.push_back(order[p]);
          count.push_back(0);
        }
        group_of[static_cast<size_t>(order[p])] = static_cast<int64_t>(first.size()) - 1;
        ++count.back();
      }
    }, "Unique");
    const size_t ng = first.size();
    // output position of each sorted group
    std::vector<int64_t> pos(ng);
    std::vector<size_t> gorder(ng);  // groups in output order
    std::iota(gorder.begin(), gorder.end(), size_t{0});
    if (!sorted) std::sort(gorder.begin(), gorder.end(), [&](size_t a, size_t b) { return first[a] < first[b]; });
    for (size_t p = 0; p < ng; ++p) pos[gorder[p]] = static_cast<int64_t>(p);
    const int64_t u = static_cast<int64_t>(ng);
    Shape ys = has_axis ? x.shape() : Shape{u};
    if (has_axis) ys[axis] = u;
    Tensor& y = ctx.allocate_output(0, x.dtype(), ys);
    const size_t es = dtype_size(x.dtype()), chunk = static_cast<size_t>(inner) * es;
    auto* src = static_cast<const unsigned char*>(x.raw());
    auto* dst = static_cast<unsigned char*>(y.raw());
    if (chunk)
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t p = 0; p < u; ++p)
          std::memcpy(dst + static_cast<size_t>(o * u + p) * chunk,
                      src + static_cast<size_t>(o * dim + first[gorder[static_cast<size_t>(p)]]) * chunk, chunk);
    if (ctx.num_outputs() > 1) {
      int64_t* pi = ctx.allocate_output(1, DType::i64, {u}).data<int64_t>();
      for (int64_t p = 0; p < u; ++p) pi[p] = first[gorder[static_cast<size_t>(p)]];
    }
    if (ctx.num_outputs() > 2) {
      int64_t* pv = ctx.allocate_output(2, DType::i64, {dim}).data<int64_t>();
      for (int64_t j = 0; j < dim; ++j) pv[j] = pos[static_cast<size_t>(group_of[static_cast<size_t>(j)])];
    }
    if (ctx.num_outputs() > 3) {
      int64_t* pc = ctx.allocate_output(3, DType::i64, {u}).data<int64_t>();
      for (int64_t p = 0; p < u; ++p) pc[p] = count[gorder[static_cast<size_t>(p)]];
    }
  };
  r.add(std::move(s));
}

}  // namespace

void register_index_ops(ir::OpRegistry& r) {
  add_gather(r);
  add_gather_elements(r);
  add_gather_nd(r);
  add_scatter_elements(r, "ScatterElements", 11);
  add_scatter_elements(r, "Scatter", 9);
  add_scatter_nd(r);
  add_one_hot(r);
  add_compress(r);
  add_non_zero(r);
  add_reverse_sequence(r);
  add_eye_like(r);
  add_trilu(r);
  add_unique(r);
}

}  // namespace kiln::ops::shape_detail
