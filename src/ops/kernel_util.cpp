#include "ops/kernel_util.hpp"

namespace kiln::ops {

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

Shape broadcast_shape(const std::vector<Shape>& shapes, const ir::Node& node) {
  size_t rank = 0;
  for (auto& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (auto& s : shapes) {
    size_t off = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t d = s[i];
      int64_t& o = out[off + i];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::vector<std::string> all;
      for (auto& x : shapes) all.push_back(shape_to_string(x));
      throw Error(cat(node.describe(), ": shapes ", join(all, " and "), " cannot be broadcast together"));
    }
  }
  return out;
}

std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
  std::vector<int64_t> st(out.size(), 0);
  auto in_st = strides_of(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) st[off + i] = in[i] == 1 ? 0 : in_st[i];
  return st;
}

std::vector<int64_t> optional_ints(const RunContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return {};
  return ctx.input(i).to_i64();
}

const Tensor& one_value(const RunContext& ctx, const Tensor& t, const std::string& what) {
  if (t.size() != 1) throw ctx.error(what, " must hold one value, got shape ", shape_to_string(t.shape()));
  return t;
}

DType dtype_attr(const ir::Node& n, const char* attr) {
  return dtype_from_onnx_code(n.attr_i(attr), cat(n.describe(), ": attribute '", attr, "'"));
}

DType dtype_attr(const ir::Node& n, const char* attr, DType absent) {
  return n.has_attr(attr) ? dtype_attr(n, attr) : absent;
}

}  // namespace kiln::ops
