// Shape / data-movement ops: Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Concat, Split,
// Slice, Shape, Size, ConstantOfShape, Expand, Tile, Range. Indexing ops (Gather*, Scatter*,
// OneHot, ...) live in shape_index.cpp; Pad / Resize / DepthToSpace in shape_resize.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"
#include "ops/op_families.hpp"
#include "ops/shape_common.hpp"

namespace kiln::ops {

namespace shape_detail {

using ir::Dim;
using ir::PartialShape;

void transpose_into(const Tensor& in, const Shape& in_shape, const std::vector<int64_t>& perm, Tensor& out) {
  const size_t r = in_shape.size();
  const int64_t n = shape_size(in_shape);
  if (n == 0) return;
  auto in_st = strides_of(in_shape);
  Shape out_shape(r);
  std::vector<int64_t> st(r);
  for (size_t i = 0; i < r; ++i) {
    out_shape[i] = in_shape[static_cast<size_t>(perm[i])];
    st[i] = in_st[static_cast<size_t>(perm[i])];
  }
  dispatch_bytes(in.dtype(), [&](auto tag) {
    using E = typename decltype(tag)::type;
    const E* src = raw_as<E>(in);
    E* dst = raw_as<E>(out);
    if (r == 0) {
      dst[0] = src[0];
      return;
    }
    const int64_t inner = out_shape[r - 1];
    const int64_t inner_st = st[r - 1];
    std::vector<int64_t> idx(r, 0);
    int64_t off = 0;
    for (int64_t o = 0; o < n; o += inner) {
      for (int64_t j = 0; j < inner; ++j) dst[o + j] = src[off + j * inner_st];
      for (size_t d = r - 1; d-- > 0;) {
        ++idx[d];
        off += st[d];
        if (idx[d] < out_shape[d]) break;
        off -= st[d] * idx[d];
        idx[d] = 0;
      }
    }
  });
}

bool const_ints(const ir::InferContext& ctx, size_t i, std::vector<int64_t>& out) {
  if (!ctx.has_input(i)) return false;
  const Tensor* t = ctx.input_constant(i);
  if (!t) return false;
  out = t->to_i64();
  return true;
}

void require_int_dtype(const RunContext& ctx, size_t i, const char* what) {
  DType t = ctx.input(i).dtype();
  if (t != DType::i64 && t != DType::i32)
    throw ctx.error(what, " must be int32 or int64, got ", dtype_name(t));
}

void require_int_dtype(const ir::InferContext& ctx, size_t i, const char* what) {
  DType t = ctx.input_dtype(i);
  if (t != DType::undefined && t != DType::i64 && t != DType::i32)
    throw ctx.error(what, " must be int32 or int64, got ", dtype_name(t));
}

std::vector<int64_t> index_values(const RunContext& ctx, size_t i) { return ctx.input(i).to_i64(); }

int64_t static_length(const ir::InferContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return -1;
  const PartialShape& s = ctx.input_shape(i);
  if (!s.rank_known) return -1;
  if (s.rank() == 0) return 1;
  if (s.rank() == 1 && s.dims[0].is_static()) return s.dims[0].value;
  return -1;
}

namespace {

constexpr size_t kVariadic = 1u << 20;

// Product of dims [b, e): a single non-1 dim passes through (symbolic kept).
Dim prod_range(const std::vector<Dim>& dims, size_t b, size_t e) {
  std::vector<Dim> sub;
  for (size_t i = b; i < e; ++i)
    if (!(dims[i].is_static() && dims[i].value == 1)) sub.push_back(dims[i]);
  if (sub.empty()) return Dim(1);
  if (sub.size() == 1) return sub[0];
  return ir::dim_product(sub);
}

// Copies with arbitrary (possibly negative or zero) input strides per output dim.
void strided_copy(const Tensor& in, int64_t base, const std::vector<int64_t>& st, Tensor& out) {
  const Shape& os = out.shape();
  const int64_t n = out.size();
  if (n == 0) return;
  const size_t r = os.size();
  dispatch_bytes(in.dtype(), [&](auto tag) {
    using E = typename decltype(tag)::type;
    const E* src = raw_as<E>(in);
    E* dst = raw_as<E>(out);
    if (r == 0) {
      dst[0] = src[base];
      return;
    }
    const int64_t inner = os[r - 1];
    const int64_t inner_st = st[r - 1];
    std::vector<int64_t> idx(r, 0);
    int64_t off = base;
    for (int64_t o = 0; o < n; o += inner) {
      for (int64_t j = 0; j < inner; ++j) dst[o + j] = src[off + j * inner_st];
      for (size_t d = r - 1; d-- > 0;) {
        ++idx[d];
        off += st[d];
        if (idx[d] < os[d]) break;
        off -= st[d] * idx[d];
        idx[d] = 0;
      }
    }
  });
}

// ---------------- Reshape ----------------

Shape reshape_target(const ir::Node& node, const Shape& in, const std::vector<int64_t>& spec, bool allowzero) {
  Shape out(spec.size());
  int64_t infer_at = -1;
  int64_t known = 1;
  bool has_zero = false;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t v = spec[i];
    if (v == -1) {
      if (infer_at >= 0) throw Error(cat(node.describe(), ": shape ", join(spec), " has more than one -1"));
      infer_at = static_cast<int64_t>(i);
      out[i] = 1;
      continue;
    }
    if (v < -1) throw Error(cat(node.describe(), ": shape ", join(spec), " has invalid dim ", v));
    if (v == 0 && !allowzero) {
      if (i >= in.size())
        throw Error(cat(node.describe(), ": shape ", join(spec), " copies dim ", i, " (0) but the input ",
                        shape_to_string(in), " has rank ", in.size()));
      v = in[i];
    }
    if (v == 0) has_zero = true;
    out[i] = v;
    if (__builtin_mul_overflow(known, v, &known))
      throw Error(cat(node.describe(), ": shape ", join(spec), " is too large"));
  }
  const int64_t total = shape_size(in);
  if (infer_at >= 0) {
    if (has_zero)
      throw Error(cat(node.describe(), ": shape ", join(spec), " mixes -1 with a zero dim (allowzero=1)"));
    if (known == 0 || total % known != 0)
      throw Error(cat(node.describe(), ": cannot reshape ", shape_to_string(in), " to ", join(spec)));
    out[static_cast<size_t>(infer_at)] = total / known;
  } else if (known != total) {
    throw Error(cat(node.describe(), ": cannot reshape ", shape_to_string(in), " (", total, " elements) to ",
                    shape_to_string(out), " (", known, " elements)"));
  }
  return out;
}

void add_reshape(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Reshape";
  s.since_version = 5;
  s.min_inputs = 2;
  s.max_inputs = 2;
  s.attrs = {{"allowzero", ir::AttrType::i}};
  s.infer = [](ir::InferContext& ctx) {
    DType dt = ctx.input_dtype(0);
    require_int_dtype(ctx, 1, "Reshape shape");
    std::vector<int64_t> spec;
    if (!const_ints(ctx, 1, spec)) {
      int64_t len = static_length(ctx, 1);
      ctx.set_output(0, dt, len >= 0 ? unknown_dims(static_cast<size_t>(len)) : PartialShape::unknown_rank());
      return;
    }
    const PartialShape& in = ctx.input_shape(0);
    bool allowzero = ctx.node().attr_i("allowzero", 0) != 0;
    std::vector<Dim> out(spec.size());
    int64_t infer_at = -1;
    for (size_t i = 0; i < spec.size(); ++i) {
      int64_t v = spec[i];
      if (v == -1) {
        if (infer_at >= 0) throw ctx.error("shape ", join(spec), " has more than one -1");
        infer_at = static_cast<int64_t>(i);
      } else if (v < -1) {
        throw ctx.error("shape ", join(spec), " has invalid dim ", v);
      } else if (v == 0 && !allowzero) {
        if (in.rank_known && i >= in.rank())
          throw ctx.error("shape ", join(spec), " copies dim ", i, " but the input has rank ", in.rank());
        out[i] = in.rank_known ? in.dims[i] : Dim::unknown();
      } else {
        out[i] = Dim(v);
      }
    }
    if (infer_at >= 0) {
      Dim d = Dim::unknown();
      if (in.rank_known && in.is_static()) {
        int64_t total = shape_size(in.to_shape());
        int64_t known = 1;
        bool ok = true;
        for (size_t i = 0; i < out.size(); ++i) {
          if (static_cast<int64_t>(i) == infer_at) continue;
          if (!out[i].is_static()) ok = false;
          else known *= out[i].value;
        }
        if (ok) {
          if (known == 0 || total % known != 0)
            throw ctx.error("cannot reshape ", in.to_string(), " to ", join(spec));
          d = Dim(total / known);
        }
      } else if (in.rank_known) {
        // Cancel equal dims between input and the known output dims: if what is left of
        // the input is one dim, that is the inferred dim (keeps symbolic batch dims).
        std::vector<Dim> rest = in.dims;
        bool ok = true;
        for (size_t i = 0; i < out.size() && ok; ++i) {
          if (static_cast<int64_t>(i) == infer_at) continue;
          auto it = std::find(rest.begin(), rest.end(), out[i]);
          if (it != rest.end()) rest.erase(it);
          else ok = false;
        }
        if (ok) {
          std::erase_if(rest, [](const Dim& x) { return x.is_static() && x.value == 1; });
          if (rest.size() == 1) d = rest[0];
          else d = ir::dim_product(rest);  // static product, or unknown
        }
      }
      out[static_cast<size_t>(infer_at)] = d;
    } else if (in.rank_known && in.is_static()) {
      bool all_static = std::all_of(out.begin(), out.end(), [](const Dim& x) { return x.is_static(); });
      if (all_static) {
        int64_t known = 1;
        for (auto& x : out) known *= x.value;
        if (known != shape_size(in.to_shape()))
          throw ctx.error("cannot reshape ", in.to_string(), " to ", PartialShape(out).to_string());
      }
    }
    ctx.set_output(0, dt, PartialShape(out));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    require_int_dtype(ctx, 1, "Reshape shape");
    if (ctx.input(1).rank() != 1) throw ctx.error("shape must be 1-D, got ", shape_to_string(ctx.input(1).shape()));
    bool allowzero = ctx.node().attr_i("allowzero", 0) != 0;
    Shape out = reshape_target(ctx.node(), x.shape(), ctx.input(1).to_i64(), allowzero);
    ctx.set_output(0, x.reshaped(out));
  };
  r.add(std::move(s));
}

// ---------------- Flatten ----------------

// Flatten's axis lies in [-rank, rank]; a negative axis counts from the end (-1 = rank-1).
int64_t flatten_axis(const ir::Node& n, int64_t rank) {
  int64_t axis = n.attr_i("axis", 1);
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a > rank) throw Error(cat(n.describe(), ": axis ", axis, " is out of range [-", rank, ", ", rank, "]"));
  return a;
}

void add_flatten(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Flatten";
  s.since_version = 1;
  s.attrs = {{"axis", ir::AttrType::i}};
  s.infer = [](ir::InferContext& ctx) {
    const PartialShape& in = ctx.input_shape(0);
    if (!in.rank_known) {
      ctx.set_output(0, ctx.input_dtype(0), unknown_dims(2));
      return;
    }
    int64_t rank = static_cast<int64_t>(in.rank());
    int64_t axis = flatten_axis(ctx.node(), rank);
    size_t a = static_cast<size_t>(axis);
    ctx.set_output(0, ctx.input_dtype(0), PartialShape({prod_range(in.dims, 0, a), prod_range(in.dims, a, in.rank())}));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    int64_t rank = static_cast<int64_t>(x.rank());
    int64_t axis = flatten_axis(ctx.node(), rank);
    int64_t outer = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= x.shape()[static_cast<size_t>(i)];
    int64_t inner = 1;
    for (int64_t i = axis; i < rank; ++i) inner *= x.shape()[static_cast<size_t>(i)];
    ctx.set_output(0, x.reshaped({outer, inner}));
  };
  r.add(std::move(s));
}

// ---------------- Transpose ----------------

void add_transpose(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Transpose";
  s.since_version = 1;
  s.attrs = {{"perm", ir::AttrType::ints}};
  s.infer = [](ir::InferContext& ctx) {
    const PartialShape& in = ctx.input_shape(0);
    if (!in.rank_known) {
      if (ctx.node().has_attr("perm"))
        ctx.set_output(0, ctx.input_dtype(0), unknown_dims(ctx.node().attr_ints("perm").size()));
      else
        ctx.set_output(0, ctx.input_dtype(0), PartialShape::unknown_rank());
      return;
    }
    auto perm = ir::transpose_perm(ctx.node(), in.rank());
    std::vector<Dim> out;
    for (auto p : perm) out.push_back(in.dims[static_cast<size_t>(p)]);
    ctx.set_output(0, ctx.input_dtype(0), PartialShape(out));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    auto perm = ir::transpose_perm(ctx.node(), x.rank());
    Shape os;
    for (auto p : perm) os.push_back(x.shape()[static_cast<size_t>(p)]);
    Tensor& y = ctx.allocate_output(0, x.dtype(), os);
    transpose_into(x, x.shape(), perm, y);
  };
  strings_as_indices(s, {0});
  r.add(std::move(s));
}

// ---------------- Squeeze / Unsqueeze ----------------

void add_squeeze(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Squeeze";
  s.since_version = 1;
  s.min_inputs = 1;
  s.max_inputs = 2;
  s.infer = [](ir::InferContext& ctx) {
    const PartialShape& in = ctx.input_shape(0);
    DType dt = ctx.input_dtype(0);
    std::vector<int64_t> axes;
    bool have_axes = ctx.has_input(1);
    if (have_axes && !const_ints(ctx, 1, axes)) {
      int64_t len = static_length(ctx, 1);
      ctx.set_output(0, dt, in.rank_known && len >= 0 && len <= static_cast<int64_t>(in.rank())
                                ? unknown_dims(in.rank() - static_cast<size_t>(len))
                                : PartialShape::unknown_rank());
      return;
    }
    if (!in.rank_known) {
      ctx.set_output(0, dt, PartialShape::unknown_rank());
      return;
    }
    int64_t rank = static_cast<int64_t>(in.rank());
    std::vector<bool> drop(in.rank(), false);
    if (have_axes) {
      for (auto a : axes) {
        size_t k = static_cast<size_t>(ir::normalize_axis(a, rank, ctx.node()));
        if (in.dims[k].is_static() && in.dims[k].value != 1)
          throw ctx.error("cannot squeeze axis ", a, " of size ", in.dims[k].value, " in ", in.to_string());
        drop[k] = true;
      }
    } else {
      for (size_t k = 0; k < in.rank(); ++k) {
        if (!in.dims[k].is_static()) {
          ctx.set_output(0, dt, PartialShape::unknown_rank());
          return;
        }
        drop[k] = in.dims[k].value == 1;
      }
    }
    std::vector<Dim> out;
    for (size_t k = 0; k < in.rank(); ++k)
      if (!drop[k]) out.push_back(in.dims[k]);
    ctx.set_output(0, dt, PartialShape(out));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Shape& in = x.shape();
    std::vector<bool> drop(in.size(), false);
    if (ctx.has_input(1)) {
      require_int_dtype(ctx, 1, "Squeeze axes");
      for (auto a : ctx.input(1).to_i64()) {
        size_t k = static_cast<size_t>(ir::normalize_axis(a, static_cast<int64_t>(in.size()), ctx.node()));
        if (in[k] != 1) throw ctx.error("cannot squeeze axis ", a, " of size ", in[k], " in ", shape_to_string(in));
        drop[k] = true;
      }
    } else {
      for (size_t k = 0; k < in.size(); ++k) drop[k] = in[k] == 1;
    }
    Shape out;
    for (size_t k = 0; k < in.size(); ++k)
      if (!drop[k]) out.push_back(in[k]);
    ctx.set_output(0, x.reshaped(out));
  };
  r.add(std::move(s));
}

// Output-rank positions of the inserted axes (sorted, checked unique).
std::vector<bool> unsqueeze_mask(const ir::Node& node, const std::vector<int64_t>& axes, int64_t out_rank) {
  std::vector<bool> ins(static_cast<size_t>(out_rank), false);
  for (auto a : axes) {
    size_t k = static_cast<size_t>(ir::normalize_axis(a, out_rank, node));
    if (ins[k]) throw Error(cat(node.describe(), ": axes [", join(axes), "] has duplicates"));
    ins[k] = true;
  }
  return ins;
}

void add_unsqueeze(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Unsqueeze";
  s.since_version = 1;
  s.min_inputs = 2;
  s.max_inputs = 2;
  s.infer = [](ir::InferContext& ctx) {
    const PartialShape& in = ctx.input_shape(0);
    DType dt = ctx.input_dtype(0);
    std::vector<int64_t> axes;
    if (!in.rank_known) {
      ctx.set_output(0, dt, PartialShape::unknown_rank());
      return;
    }
    if (!const_ints(ctx, 1, axes)) {
      int64_t len = static_length(ctx, 1);
      ctx.set_output(0, dt, len >= 0 ? unknown_dims(in.rank() + static_cast<size_t>(len)) : PartialShape::unknown_rank());
      return;
    }
    int64_t out_rank = static_cast<int64_t>(in.rank() + axes.size());
    auto mask = unsqueeze_mask(ctx.node(), axes, out_rank);
    std::vector<Dim> out;
    size_t j = 0;
    for (size_t k = 0; k < mask.size(); ++k) out.push_back(mask[k] ? Dim(1) : in.dims[j++]);
    ctx.set_output(0, dt, PartialShape(out));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    require_int_dtype(ctx, 1, "Unsqueeze axes");
    auto axes = ctx.input(1).to_i64();
    int64_t out_rank = static_cast<int64_t>(x.rank() + axes.size());
    auto mask = unsqueeze_mask(ctx.node(), axes, out_rank);
    Shape out;
    size_t j = 0;
    for (size_t k = 0; k < mask.size(); ++k) out.push_back(mask[k] ? 1 : x.shape()[j++]);
    ctx.set_output(0, x.reshaped(out));
  };
  r.add(std::move(s));
}

// ---------------- Concat ----------------

void add_concat(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Concat";
  s.since_version = 4;
  s.min_inputs = 1;
  s.max_inputs = kVariadic;
  s.attrs = {{"axis", ir::AttrType::i, true}};
  s.infer = [](ir::InferContext& ctx) {
    DType dt = DType::undefined;
    size_t rank = 0;
    bool rank_known = false;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      if (!ctx.has_input(i)) throw ctx.error("input ", i, " is missing");
      if (dt == DType::undefined) dt = ctx.input_dtype(i);
      else if (ctx.input_dtype(i) != DType::undefined && ctx.input_dtype(i) != dt)
        throw ctx.error("inputs have different element types ", dtype_name(dt), " and ", dtype_name(ctx.input_dtype(i)));
      const PartialShape& p = ctx.input_shape(i);
      if (p.rank_known) {
        if (rank_known && p.rank() != rank) throw ctx.error("inputs have different ranks ", rank, " and ", p.rank());
        rank = p.rank();
        rank_known = true;
      }
    }
    if (!rank_known) {
      ctx.set_output(0, dt, PartialShape::unknown_rank());
      return;
    }
    size_t axis = static_cast<size_t>(ir::normalize_axis(ctx.node().attr_i("axis"), static_cast<int64_t>(rank), ctx.node()));
    std::vector<Dim> out(rank, Dim::unknown());
    Dim sum(0);
    bool first = true;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      const PartialShape& p = ctx.input_shape(i);
      if (!p.rank_known) {
        sum = Dim::unknown();
        continue;
      }
      for (size_t k = 0; k < rank; ++k) {
        if (k == axis) continue;
        const Dim& d = p.dims[k];
        Dim& o = out[k];
        if (first) o = d;
        else if (d.is_static() && o.is_static() && d.value != o.value)
          throw ctx.error("input ", i, " has shape ", p.to_string(), " which does not match the other inputs except on axis ", axis);
        else if (d.is_static()) o = d;
        else if (o.is_unknown()) o = d;
      }
      first = false;
      sum = ir::dim_add(sum, p.dims[axis]);
    }
    out[axis] = sum;
    ctx.set_output(0, dt, PartialShape(out));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& x0 = ctx.input(0);
    const size_t rank = x0.rank();
    if (rank == 0) throw ctx.error("cannot concatenate scalars");
    size_t axis = static_cast<size_t>(normalize_axis(ctx.node().attr_i("axis"), static_cast<int64_t>(rank), ctx.node()));
    Shape os = x0.shape();
    os[axis] = 0;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& x = ctx.input(i);
      if (x.dtype() != x0.dtype())
        throw ctx.error("input ", i, " has element type ", dtype_name(x.dtype()), ", expected ", dtype_name(x0.dtype()));
      if (x.rank() != rank) throw ctx.error("input ", i, " has shape ", shape_to_string(x.shape()), ", expected rank ", rank);
      for (size_t k = 0; k < rank; ++k)
        if (k != axis && x.shape()[k] != x0.shape()[k])
          throw ctx.error("input ", i, " has shape ", shape_to_string(x.shape()), " which does not match ",
                          shape_to_string(x0.shape()), " except on axis ", axis);
      os[axis] += x.shape()[axis];
    }
    Tensor& y = ctx.allocate_output(0, x0.dtype(), os);
    int64_t outer = 1;
    for (size_t k = 0; k < axis; ++k) outer *= os[k];
    int64_t inner = 1;
    for (size_t k = axis + 1; k < rank; ++k) inner *= os[k];
    const size_t es = dtype_size(x0.dtype());
    const int64_t out_row = os[axis] * inner;
    auto* dst = static_cast<unsigned char*>(y.raw());
    int64_t col = 0;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& x = ctx.input(i);
      const int64_t row = x.shape()[axis] * inner;
      if (row == 0) continue;
      auto* src = static_cast<const unsigned char*>(x.raw());
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(dst + static_cast<size_t>(o * out_row + col) * es, src + static_cast<size_t>(o * row) * es,
                    static_cast<size_t>(row) * es);
      col += row;
    }
  };
  strings_as_indices(s, {kAllInputs});
  r.add(std::move(s));
}

// ---------------- Split ----------------

std::vector<int64_t> split_sizes(const ir::Node& node, int64_t dim, size_t nout, const std::vector<int64_t>* given) {
  std::vector<int64_t> sizes;
  if (given) {
    sizes = *given;
    if (sizes.size() != nout)
      throw Error(cat(node.describe(), ": split [", join(sizes), "] has ", sizes.size(), " entries for ", nout, " outputs"));
    int64_t sum = 0;
    for (auto v : sizes) {
      if (v < 0) throw Error(cat(node.describe(), ": split [", join(sizes), "] has a negative size"));
      sum += v;
    }
    if (sum != dim)
      throw Error(cat(node.describe(), ": split [", join(sizes), "] sums to ", sum, " but the axis has size ", dim));
    return sizes;
  }
  int64_t n = static_cast<int64_t>(nout);
  if (node.opset() >= 18 || node.has_attr("num_outputs")) {
    int64_t chunk = (dim + n - 1) / n;
    for (int64_t i = 0; i < n; ++i) sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - i * chunk)));
    return sizes;
  }
  if (dim % n != 0)
    throw Error(cat(node.describe(), ": axis of size ", dim, " cannot be split evenly into ", nout, " outputs"));
  return std::vector<int64_t>(nout, dim / n);
}

void add_split(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Split";
  s.since_version = 2;
  s.min_inputs = 1;
  s.max_inputs = 2;
  s.min_outputs = 1;
  s.max_outputs = kVariadic;
  s.attrs = {{"axis", ir::AttrType::i}, {"num_outputs", ir::AttrType::i}};
  s.validate = [](const ir::Node& n) {
    if (n.has_attr("num_outputs") && n.attr_i("num_outputs") != static_cast<int64_t>(n.num_outputs()))
      throw Error(cat(n.describe(), ": num_outputs=", n.attr_i("num_outputs"), " but the node has ", n.num_outputs(), " outputs"));
  };
  s.infer = [](ir::InferContext& ctx) {
    const PartialShape& in = ctx.input_shape(0);
    DType dt = ctx.input_dtype(0);
    const size_t nout = ctx.num_outputs();
    if (!in.rank_known) {
      for (size_t i = 0; i < nout; ++i) ctx.set_output(i, dt, PartialShape::unknown_rank());
      return;
    }
    size_t axis = static_cast<size_t>(ir::normalize_axis(ctx.node().attr_i("axis", 0), static_cast<int64_t>(in.rank()), ctx.node()));
    std::vector<int64_t> given;
    bool have_split = ctx.has_input(1);
    bool split_const = have_split && const_ints(ctx, 1, given);
    std::vector<Dim> sizes(nout, Dim::unknown());
    const Dim& d = in.dims[axis];
    if (split_const && d.is_static()) {
      auto v = split_sizes(ctx.node(), d.value, nout, &given);
      for (size_t i = 0; i < nout; ++i) sizes[i] = Dim(v[i]);
    } else if (split_const) {
      for (size_t i = 0; i < nout && i < given.size(); ++i) sizes[i] = Dim(given[i]);
    } else if (!have_split && d.is_static()) {
      auto v = split_sizes(ctx.node(), d.value, nout, nullptr);
      for (size_t i = 0; i < nout; ++i) sizes[i] = Dim(v[i]);
    } else if (!have_split && nout == 1) {
      sizes[0] = d;
    }
    for (size_t i = 0; i < nout; ++i) {
      std::vector<Dim> od = in.dims;
      od[axis] = sizes[i];
      ctx.set_output(i, dt, PartialShape(od));
    }
  };
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const size_t rank = x.rank();
    if (rank == 0) throw ctx.error("cannot split a scalar");
    size_t axis = static_cast<size_t>(normalize_axis(ctx.node().attr_i("axis", 0), static_cast<int64_t>(rank), ctx.node()));
    std::vector<int64_t> given;
    if (ctx.has_input(1)) {
      require_int_dtype(ctx, 1, "Split split");
      given = ctx.input(1).to_i64();
    }
    auto sizes = split_sizes(ctx.node(), x.shape()[axis], ctx.num_outputs(), ctx.has_input(1) ? &given : nullptr);
    int64_t outer = 1;
    for (size_t k = 0; k < axis; ++k) outer *= x.shape()[k];
    int64_t inner = 1;
    for (size_t k = axis + 1; k < rank; ++k) inner *= x.shape()[k];
    const size_t es = dtype_size(x.dtype());
    const int64_t in_row = x.shape()[axis] * inner;
    auto* src = static_cast<const unsigned char*>(x.raw());
    int64_t col = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      Shape os = x.shape();
      os[axis] = sizes[i];
      Tensor& y = ctx.allocate_output(i, x.dtype(), os);
      const int64_t row = sizes[i] * inner;
      auto* dst = static_cast<unsigned char*>(y.raw());
      if (row > 0)
        for (int64_t o = 0; o < outer; ++o)
          std::memcpy(dst + static_cast<size_t>(o * row) * es, src + static_cast<size_t>(o * in_row + col) * es,
                      static_cast<size_t>(row) * es);
      col += row;
    }
  };
  strings_as_indices(s, {0});
  r.add(std::move(s));
}

// ---------------- Slice ----------------

struct SliceAxis {
  int64_t start = 0, step = 1, count = 0;
};

// Clamps start/end per the ONNX spec and returns (start, step, count) for one axis.
SliceAxis slice_axis(int64_t start, int64_t end, int64_t step, int64_t dim) {
  SliceAxis a;
  a.step = step;
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    a.count = end > start ? (end - start - 1) / step + 1 : 0;
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    const int64_t neg = step == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max() : -step;
    a.count = start > end ? (start - end - 1) / neg + 1 : 0;
  }
  a.start = start;
  return a;
}

// Normalised axes for Slice: checks lengths, range and duplicates.
std::vector<int64_t> slice_axes(const ir::Node& node, size_t n, const std::vector<int64_t>* axes, int64_t rank) {
  std::vector<int64_t> out;
  if (axes) {
    if (axes->size() != n)
      throw Error(cat(node.describe(), ": axes [", join(*axes), "] has ", axes->size(), " entries, starts has ", n));
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    for (auto a : *axes) {
      int64_t k = ir::normalize_axis(a, rank, node);
      if (seen[static_cast<size_t>(k)]) throw Error(cat(node.describe(), ": axes [", join(*axes), "] has duplicates"));
      seen[static_cast<size_t>(k)] = true;
      out.push_back(k);
    }
  } else {
    if (static_cast<int64_t>(n) > rank)
      throw Error(cat(node.describe(), ": ", n, " starts given for rank ", rank));
    for (size_t i = 0; i < n; ++i) out.push_back(static_cast<int64_t>(i));
  }
  return out;
}

void add_slice(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Slice";
  s.since_version = 1;
  s.min_inputs = 3;
  s.max_inputs = 5;
  s.infer = [](ir::InferContext& ctx) {
    const PartialShape& in = ctx.input_shape(0);
    DType dt = ctx.input_dtype(0);
    if (!in.rank_known) {
      ctx.set_output(0, dt, PartialShape::unknown_rank());
      return;
    }
    const int64_t rank = static_cast<int64_t>(in.rank());
    std::vector<int64_t> starts, ends, axes, steps;
    bool have_se = const_ints(ctx, 1, starts) && const_ints(ctx, 2, ends);
    bool have_axes = !ctx.has_input(3) || const_ints(ctx, 3, axes);
    bool have_steps = !ctx.has_input(4) || const_ints(ctx, 4, steps);
    if (!have_axes) {
      ctx.set_output(0, dt, unknown_dims(in.rank()));
      return;
    }
    std::vector<Dim> out = in.dims;
    if (!have_se) {
      if (ctx.has_input(3)) {
        for (auto a : axes) out[static_cast<size_t>(ir::normalize_axis(a, rank, ctx.node()))] = Dim::unknown();
      } else {
        int64_t len = static_length(ctx, 1);
        if (len < 0) len = rank;
        for (int64_t k = 0; k < std::min(len, rank); ++k) out[static_cast<size_t>(k)] = Dim::unknown();
      }
      ctx.set_output(0, dt, PartialShape(out));
      return;
    }
    if (starts.size() != ends.size())
      throw ctx.error("starts [", join(starts), "] and ends [", join(ends), "] differ in length");
    auto ax = slice_axes(ctx.node(), starts.size(), ctx.has_input(3) ? &axes : nullptr, rank);
    if (ctx.has_input(4) && have_steps && steps.size() != starts.size())
      throw ctx.error("steps [", join(steps), "] has ", steps.size(), " entries, starts has ", starts.size());
    for (size_t i = 0; i < ax.size(); ++i) {
      size_t k = static_cast<size_t>(ax[i]);
      int64_t step = 1;
      if (ctx.has_input(4)) {
        if (!have_steps) {
          out[k] = Dim::unknown();
          continue;
        }
        step = steps[i];
      }
      if (step == 0) throw ctx.error("steps must not be 0");
      if (!in.dims[k].is_static()) {
        // slicing the whole axis keeps a symbolic dim
        bool whole = (step == 1 && starts[i] == 0 && ends[i] >= std::numeric_limits<int32_t>::max()) ||
                     (step == -1 && starts[i] == -1 && ends[i] <= std::numeric_limits<int32_t>::min());
        out[k] = whole ? in.dims[k] : Dim::unknown();
        continue;
      }
      out[k] = Dim(slice_axis(starts[i], ends[i], step, in.dims[k].value).count);
    }
    ctx.set_output(0, dt, PartialShape(out));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const int64_t rank = static_cast<int64_t>(x.rank());
    for (size_t i = 1; i < 5; ++i)
      if (ctx.has_input(i)) require_int_dtype(ctx, i, "Slice starts/ends/axes/steps");
    auto starts = ctx.input(1).to_i64();
    auto ends = ctx.input(2).to_i64();
    if (starts.size() != ends.size())
      throw ctx.error("starts [", join(starts), "] and ends [", join(ends), "] differ in length");
    std::vector<int64_t> axes_in = optional_ints(ctx, 3);
    auto ax = slice_axes(ctx.node(), starts.size(), ctx.has_input(3) ? &axes_in : nullptr, rank);
    std::vector<int64_t> steps = optional_ints(ctx, 4);
    if (ctx.has_input(4) && steps.size() != starts.size())
      throw ctx.error("steps [", join(steps), "] has ", steps.size(), " entries, starts has ", starts.size());
    const Shape& in = x.shape();
    auto st = strides_of(in);
    Shape os = in;
    std::vector<int64_t> ost = st;
    int64_t base = 0;
    for (size_t i = 0; i < ax.size(); ++i) {
      size_t k = static_cast<size_t>(ax[i]);
      int64_t step = ctx.has_input(4) ? steps[i] : 1;
      if (step == 0) throw ctx.error("steps must not be 0");
      SliceAxis a = slice_axis(starts[i], ends[i], step, in[k]);
      os[k] = a.count;
      ost[k] = a.count > 1 ? st[k] * step : 0;
      if (a.count > 0) base += a.start * st[k];
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), os);
    strided_copy(x, base, ost, y);
  };
  strings_as_indices(s, {0});
  r.add(std::move(s));
}

// ---------------- Shape / Size ----------------

std::pair<int64_t, int64_t> shape_range(const ir::Node& node, int64_t rank) {
  int64_t start = node.attr_i("start", 0);
  int64_t end = node.has_attr("end") ? node.attr_i("end") : rank;
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  return {start, std::max(start, end)};
}

void add_shape_size(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Shape";
  s.since_version = 1;
  s.attrs = {{"start", ir::AttrType::i}, {"end", ir::AttrType::i}};
  s.infer = [](ir::InferContext& ctx) {
    const PartialShape& in = ctx.input_shape(0);
    if (!in.rank_known) {
      ctx.set_output(0, DType::i64, unknown_dims(1));
      return;
    }
    auto [b, e] = shape_range(ctx.node(), static_cast<int64_t>(in.rank()));
    ctx.set_output(0, DType::i64, PartialShape({Dim(e - b)}));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    auto [b, e] = shape_range(ctx.node(), static_cast<int64_t>(x.rank()));
    Tensor& y = ctx.allocate_output(0, DType::i64, {e - b});
    int64_t* py = y.data<int64_t>();
    for (int64_t i = b; i < e; ++i) py[i - b] = x.shape()[static_cast<size_t>(i)];
  };
  r.add(std::move(s));

  ir::OpSchema z;
  z.name = "Size";
  z.since_version = 1;
  z.infer = [](ir::InferContext& ctx) { ctx.set_output(0, DType::i64, PartialShape(Shape{})); };
  z.run = [](RunContext& ctx) {
    Tensor& y = ctx.allocate_output(0, DType::i64, {});
    y.data<int64_t>()[0] = ctx.input(0).size();
  };
  r.add(std::move(z));
}

// ---------------- ConstantOfShape ----------------

void add_constant_of_shape(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "ConstantOfShape";
  s.since_version = 9;
  s.attrs = {{"value", ir::AttrType::tensor}};
  s.validate = [](const ir::Node& n) {
    if (n.has_attr("value") && n.attr_tensor("value").size() != 1)
      throw Error(cat(n.describe(), ": value must hold exactly one element, got shape ",
                      shape_to_string(n.attr_tensor("value").shape())));
  };
  s.infer = [](ir::InferContext& ctx) {
    DType dt = ctx.node().has_attr("value") ? ctx.node().attr_tensor("value").dtype() : DType::f32;
    std::vector<int64_t> shape;
    if (const_ints(ctx, 0, shape)) {
      for (auto d : shape)
        if (d < 0) throw ctx.error("shape [", join(shape), "] has a negative dim");
      ctx.set_output(0, dt, PartialShape(Shape(shape)));
      return;
    }
    int64_t len = static_length(ctx, 0);
    ctx.set_output(0, dt, len >= 0 ? unknown_dims(static_cast<size_t>(len)) : PartialShape::unknown_rank());
  };
  s.run = [](RunContext& ctx) {
    require_int_dtype(ctx, 0, "ConstantOfShape input");
    if (ctx.input(0).rank() > 1) throw ctx.error("shape input must be 1-D, got ", shape_to_string(ctx.input(0).shape()));
    Shape shape = ctx.input(0).to_i64();
    for (auto d : shape)
      if (d < 0) throw ctx.error("shape ", shape_to_string(shape), " has a negative dim");
    checked_numel(ctx, shape);
    if (!ctx.node().has_attr("value")) {
      ctx.allocate_output(0, DType::f32, shape);  // zero-filled
      return;
    }
    const Tensor& v = ctx.node().attr_tensor("value");
    Tensor& y = ctx.allocate_output(0, v.dtype(), shape);
    dispatch_bytes(v.dtype(), [&](auto tag) {
      using E = typename decltype(tag)::type;
      E val = raw_as<E>(v)[0];
      E* py = raw_as<E>(y);
      for (int64_t i = 0; i < y.size(); ++i) py[i] = val;
    });
  };
  r.add(std::move(s));
}

// ---------------- Expand / Tile ----------------

void add_expand(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Expand";
  s.since_version = 8;
  s.min_inputs = 2;
  s.max_inputs = 2;
  s.infer = [](ir::InferContext& ctx) {
    DType dt = ctx.input_dtype(0);
    require_int_dtype(ctx, 1, "Expand shape");
    const PartialShape& in = ctx.input_shape(0);
    std::vector<int64_t> shape;
    if (const_ints(ctx, 1, shape)) {
      ctx.set_output(0, dt, ir::broadcast_shapes({in, PartialShape(Shape(shape))}, ctx.node()));
      return;
    }
    int64_t len = static_length(ctx, 1);
    if (len < 0 || !in.rank_known) {
      ctx.set_output(0, dt, PartialShape::unknown_rank());
      return;
    }
    ctx.set_output(0, dt, unknown_dims(std::max(in.rank(), static_cast<size_t>(len))));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    require_int_dtype(ctx, 1, "Expand shape");
    Shape shape = ctx.input(1).to_i64();
    for (auto d : shape)
      if (d < 0) throw ctx.error("shape ", shape_to_string(shape), " has a negative dim");
    Shape os = broadcast_shape({x.shape(), shape}, ctx.node());
    checked_numel(ctx, os);
    Tensor& y = ctx.allocate_output(0, x.dtype(), os);
    strided_copy(x, 0, broadcast_strides(x.shape(), os), y);
  };
  strings_as_indices(s, {0});
  r.add(std::move(s));
}

void add_tile(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Tile";
  s.since_version = 6;
  s.min_inputs = 2;
  s.max_inputs = 2;
  s.infer = [](ir::InferContext& ctx) {
    DType dt = ctx.input_dtype(0);
    const PartialShape& in = ctx.input_shape(0);
    std::vector<int64_t> rep;
    if (!in.rank_known) {
      int64_t len = static_length(ctx, 1);
      ctx.set_output(0, dt, len >= 0 ? unknown_dims(static_cast<size_t>(len)) : PartialShape::unknown_rank());
      return;
    }
    if (!const_ints(ctx, 1, rep)) {
      ctx.set_output(0, dt, unknown_dims(in.rank()));
      return;
    }
    if (rep.size() != in.rank()) throw ctx.error("repeats [", join(rep), "] must have one entry per input dim (rank ", in.rank(), ")");
    std::vector<Dim> out;
    for (size_t k = 0; k < rep.size(); ++k) {
      if (rep[k] < 0) throw ctx.error("repeats [", join(rep), "] has a negative entry");
      out.push_back(ir::dim_mul(in.dims[k], Dim(rep[k])));
    }
    ctx.set_output(0, dt, PartialShape(out));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    require_int_dtype(ctx, 1, "Tile repeats");
    auto rep = ctx.input(1).to_i64();
    const Shape& in = x.shape();
    const size_t r = in.size();
    if (rep.size() != r) throw ctx.error("repeats [", join(rep), "] must have one entry per input dim (rank ", r, ")");
    Shape os(r);
    for (size_t k = 0; k < r; ++k) {
      if (rep[k] < 0) throw ctx.error("repeats [", join(rep), "] has a negative entry");
      if (in[k] != 0 && rep[k] > (int64_t{1} << 48) / in[k]) throw ctx.error("repeats [", join(rep), "] are too large");
      os[k] = in[k] * rep[k];
    }
    checked_numel(ctx, os);
    Tensor& y = ctx.allocate_output(0, x.dtype(), os);
    const int64_t n = y.size();
    if (n == 0) return;
    auto st = strides_of(in);
    dispatch_bytes(x.dtype(), [&](auto tag) {
      using E = typename decltype(tag)::type;
      const E* src = raw_as<E>(x);
      E* dst = raw_as<E>(y);
      if (r == 0) {
        dst[0] = src[0];
        return;
      }
      std::vector<int64_t> idx(r, 0), iidx(r, 0);
      int64_t off = 0;
      for (int64_t o = 0; o < n; ++o) {
        dst[o] = src[off];
        for (size_t d = r; d-- > 0;) {
          ++idx[d];
          ++iidx[d];
          off += st[d];
          if (iidx[d] == in[d]) {
            off -= st[d] * in[d];
            iidx[d] = 0;
          }
          if (idx[d] < os[d]) break;
          idx[d] = 0;
          off -= st[d] * iidx[d];
          iidx[d] = 0;
        }
      }
    });
  };
  strings_as_indices(s, {0});
  r.add(std::move(s));
}

// ---------------- Range ----------------

void add_range(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Range";
  s.since_version = 11;
  s.min_inputs = 3;
  s.max_inputs = 3;
  s.infer = [](ir::InferContext& ctx) {
    DType dt = ctx.input_dtype(0);
    const Tensor* a = ctx.input_constant(0);
    const Tensor* b = ctx.input_constant(1);
    const Tensor* c = ctx.input_constant(2);
    if (a && b && c && a->size() == 1 && b->size() == 1 && c->size() == 1) {
      double start = a->to_f64()[0], limit = b->to_f64()[0], delta = c->to_f64()[0];
      if (delta == 0) throw ctx.error("delta must not be 0");
      if (is_integral(dt)) {
        int64_t s0 = a->to_i64()[0], l0 = b->to_i64()[0], d0 = c->to_i64()[0];
        int64_t num = l0 - s0;
        int64_t n = d0 > 0 ? (num > 0 ? (num + d0 - 1) / d0 : 0) : (num < 0 ? (-num + (-d0) - 1) / (-d0) : 0);
        ctx.set_output(0, dt, PartialShape({Dim(n)}));
      } else {
        ctx.set_output(0, dt, PartialShape({Dim(static_cast<int64_t>(std::max(0.0, std::ceil((limit - start) / delta))))}));
      }
      return;
    }
    ctx.set_output(0, dt, unknown_dims(1));
  };
  s.run = [](RunContext& ctx) {
    DType dt = ctx.input(0).dtype();
    for (size_t i = 0; i < 3; ++i) {
      if (ctx.input(i).dtype() != dt)
        throw ctx.error("start, limit and delta must have one element type, got ", dtype_name(dt), " and ",
                        dtype_name(ctx.input(i).dtype()));
      if (ctx.input(i).size() != 1)
        throw ctx.error("input ", i, " must be a scalar, got shape ", shape_to_string(ctx.input(i).shape()));
    }
    auto run = [&](auto tag) {
      using T = typename decltype(tag)::type;
      T start = ctx.input(0).data<T>()[0], limit = ctx.input(1).data<T>()[0], delta = ctx.input(2).data<T>()[0];
      if (delta == T(0)) throw ctx.error("delta must not be 0");
      int64_t n;
      if constexpr (std::is_integral_v<T>) {
        int64_t num = static_cast<int64_t>(limit) - static_cast<int64_t>(start), d0 = delta;
        n = d0 > 0 ? (num > 0 ? (num + d0 - 1) / d0 : 0) : (num < 0 ? (-num + (-d0) - 1) / (-d0) : 0);
      } else {
        double q = std::ceil(static_cast<double>((limit - start) / delta));
        if (!(q < 1e12)) {
          if (q > 0) throw ctx.error("range of ", q, " elements is too large");
        }
        n = q > 0 ? static_cast<int64_t>(q) : 0;
      }
      checked_numel(ctx, {n});
      Tensor& y = ctx.allocate_output(0, dt, {n});
      T* py = y.data<T>();
      for (int64_t i = 0; i < n; ++i) py[i] = static_cast<T>(start + static_cast<T>(i) * delta);
    };
    switch (dt) {
      case DType::f32: run(TypeTag<float>{}); break;
      case DType::f64: run(TypeTag<double>{}); break;
      case DType::i16: run(TypeTag<int16_t>{}); break;
      case DType::i32: run(TypeTag<int32_t>{}); break;
      case DType::i64: run(TypeTag<int64_t>{}); break;
      default: throw ctx.error("element type ", dtype_name(dt), " is not supported (f32, f64, i16, i32, i64)");
    }
  };
  r.add(std::move(s));
}

}  // namespace
}  // namespace shape_detail

void register_shape_ops(ir::OpRegistry& r) {
  using namespace shape_detail;
  add_reshape(r);
  add_flatten(r);
  add_transpose(r);
  add_squeeze(r);
  add_unsqueeze(r);
  add_concat(r);
  add_split(r);
  add_slice(r);
  add_shape_size(r);
  add_constant_of_shape(r);
  add_expand(r);
  add_tile(r);
  add_range(r);
  register_index_ops(r);
  register_resize_ops(r);
  register_crop_ops(r);
}

}  // namespace kiln::ops
