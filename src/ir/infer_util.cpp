#include "ir/infer_util.hpp"

namespace kiln::ir {

PartialShape broadcast_shapes(const std::vector<PartialShape>& shapes, const Node& node) {
  size_t rank = 0;
  for (auto& s : shapes) {
    if (!s.rank_known) return PartialShape::unknown_rank();
    rank = std::max(rank, s.rank());
  }
  std::vector<Dim> out(rank, Dim(1));
  for (auto& s : shapes) {
    size_t off = rank - s.rank();
    for (size_t i = 0; i < s.rank(); ++i) {
      const Dim& d = s.dims[i];
      Dim& o = out[off + i];
      if (d.is_static() && d.value == 1) continue;
      if (o.is_static() && o.value == 1) {
        o = d;
      } else if (d.is_static() && o.is_static()) {
        if (d.value != o.value)
          throw Error(cat(node.describe(), ": shapes cannot be broadcast: dim ", d.value, " vs ", o.value));
      } else if (!(d == o)) {
        // one of them symbolic/unknown: keep the static one if any, else unknown
        if (d.is_static()) o = d;
        else if (!o.is_static()) o = Dim::unknown();
      }
    }
  }
  return PartialShape(out);
}

int64_t normalize_axis(int64_t axis, int64_t rank, const Node& node, bool allow_end) {
  int64_t hi = allow_end ? rank + 1 : rank;
  int64_t a = axis < 0 ? axis + hi : axis;
  if (a < 0 || a >= hi)
    throw Error(cat(node.describe(), ": axis ", axis, " is out of range for rank ", rank));
  return a;
}

std::vector<int64_t> transpose_perm(const Node& node, size_t rank) {
  std::vector<int64_t> perm;
  if (node.has_attr("perm")) {
    perm = node.attr_ints("perm");
    if (perm.size() != rank)
      throw Error(cat(node.describe(), ": perm [", join(perm), "] has ", perm.size(), " entries for rank ", rank));
    std::vector<bool> seen(rank, false);
    for (auto& p : perm) {
      int64_t q = p < 0 ? p + static_cast<int64_t>(rank) : p;
      if (q < 0 || q >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(q)])
        throw Error(cat(node.describe(), ": perm [", join(perm), "] is not a permutation of 0..", rank - 1));
      seen[static_cast<size_t>(q)] = true;
      p = q;
    }
  } else {
    for (size_t i = rank; i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  }
  return perm;
}

std::function<void(InferContext&)> infer_same_as_input(size_t i) {
  return [i](InferContext& ctx) { ctx.set_output(0, ctx.input_dtype(i), ctx.input_shape(i)); };
}

Dim dim_product(const std::vector<Dim>& dims) {
  int64_t p = 1;
  for (auto& d : dims) {
    if (!d.is_static()) return Dim::unknown();
    p *= d.value;
  }
  return Dim(p);
}

Dim dim_mul(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return Dim(a.value * b.value);
  if (a.is_static() && a.value == 1) return b;
  if (b.is_static() && b.value == 1) return a;
  return Dim::unknown();
}

Dim dim_add(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return Dim(a.value + b.value);
  return Dim::unknown();
}

}  // namespace kiln::ir
