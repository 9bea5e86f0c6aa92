#include "ir/types.hpp"

#include <kiln/error.hpp>

#include "core/strings.hpp"

namespace kiln::ir {

std::string Dim::to_string() const {
  if (is_static()) return std::to_string(value);
  if (is_symbolic()) return symbol;
  return "?";
}

bool PartialShape::is_static() const {
  if (!rank_known) return false;
  for (const Dim& d : dims)
    if (!d.is_static()) return false;
  return true;
}

Shape PartialShape::to_shape() const {
  KILN_CHECK(is_static(), cat("shape ", to_string(), " is not static"));
  Shape s(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) s[i] = dims[i].value;
  return s;
}

int64_t PartialShape::elements() const {
  KILN_CHECK(is_static(), cat("shape ", to_string(), " is not static"));
  // as shape_size: the non-zero dims' product is checked even when a dim is zero
  int64_t n = 1;
  bool zero = false;
  for (const Dim& d : dims) {
    if (d.value == 0) {
      zero = true;
      continue;
    }
    if (__builtin_mul_overflow(n, d.value, &n) || n > kMaxElements) return shape_size(to_shape());  // its error
  }
  return zero ? 0 : n;
}

std::string PartialShape::to_string() const {
  if (!rank_known) return "[...]";
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + dims[i].to_string();
  return s + "]";
}

std::string ValueType::to_string() const {
  const std::string t = std::string(dtype_name(dtype)) + shape.to_string();
  if (kind == ValueKind::sequence) return "seq(" + t + ")";
  if (kind == ValueKind::optional) return elem_kind == ValueKind::sequence ? "opt(seq(" + t + "))" : "opt(" + t + ")";
  return t;
}

}  // namespace kiln::ir
