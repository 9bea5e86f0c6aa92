#include <kiln/tensor.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <type_traits>

#include "core/dispatch.hpp"
#include "core/narrow_types.hpp"
#include "core/strings.hpp"

namespace kiln {

int64_t shape_size(const Shape& s) {
  // the magnitude of the non-zero dims first, checked; negative dims (unknown, in some
  // callers) give a negative product as they always did
  int64_t magnitude = 1;
  bool zero = false, negative = false;
  for (int64_t d : s) {
    if (d == 0) {
      zero = true;
      continue;
    }
    negative ^= d < 0;
    const int64_t a = d < 0 ? (d < -kMaxElements ? kMaxElements + 1 : -d) : d;
    if (__builtin_mul_overflow(magnitude, a, &magnitude) || magnitude > kMaxElements)
      throw Error(cat("shape ", shape_to_string(s), " has more than 2^58 elements (no tensor is that large)"));
  }
  return zero ? 0 : negative ? -magnitude : magnitude;
}

std::string shape_to_string(const Shape& s) { return "[" + join(s) + "]"; }

Tensor::Tensor(DType dtype, Shape shape) : Tensor(uninitialized(dtype, std::move(shape))) {
  if (dtype_ != DType::string) std::memset(data_, 0, ((byte_size() + 63) / 64) * 64);  // strings: constructed empty
}

Tensor Tensor::uninitialized(DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  for (int64_t d : t.shape_)
    KILN_CHECK(d >= 0, cat("Tensor: negative dimension in shape ", shape_to_string(t.shape_)));
  if (dtype == DType::string) {  // objects, not bytes: constructed (empty) and destroyed
    const size_t n = static_cast<size_t>(t.size());
    auto* p = new std::string[n == 0 ? 1 : n];
    t.owner_ = std::shared_ptr<void>(p, [](void* q) { delete[] static_cast<std::string*>(q); });
    t.data_ = p;
    return t;
  }
  const size_t bytes = t.byte_size();
  // Aligned for vector loads; at least one byte so data() is never null.
  size_t alloc = ((bytes + 63) / 64) * 64;
  if (alloc == 0) alloc = 64;
  void* p = std::aligned_alloc(64, alloc);
  if (!p) throw Error(cat("Tensor: cannot allocate ", bytes, " bytes"));
  t.owner_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  t.data_ = p;
  return t;
}

Tensor Tensor::wrap(DType dtype, Shape shape, void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  for (int64_t d : t.shape_)
    KILN_CHECK(d >= 0, cat("Tensor::wrap: negative dimension in shape ", shape_to_string(t.shape_)));
  KILN_CHECK(data != nullptr || t.size() == 0, "Tensor::wrap: null data pointer");
  t.data_ = data;
  return t;
}

Tensor Tensor::adopt(DType dtype, Shape shape, std::shared_ptr<void> owner, void* data) {
  Tensor t = wrap(dtype, std::move(shape), data);
  t.owner_ = std::move(owner);
  return t;
}

Tensor Tensor::sequence(DType elem, std::vector<Tensor> items) {
  for (const Tensor& i : items)
    KILN_CHECK(i.kind() == ValueKind::tensor && (i.dtype() == elem || elem == DType::undefined),
               cat("Tensor::sequence: an item of type ", dtype_name(i.dtype()), " in a sequence of ", dtype_name(elem)));
  Tensor t;
  t.kind_ = ValueKind::sequence;
  t.dtype_ = elem;
  t.items_ = std::make_shared<const std::vector<Tensor>>(std::move(items));
  return t;
}

Tensor Tensor::optional(DType elem, std::optional<Tensor> value, ValueKind of) {
  KILN_CHECK(of != ValueKind::optional, "Tensor::optional: an optional of an optional");
  std::vector<Tensor> items;
  if (value) {
    KILN_CHECK(value->kind() == of && (value->dtype() == elem || elem == DType::undefined),
               cat("Tensor::optional: a value of kind/type ", dtype_name(value->dtype()), " for an optional of ",
                   dtype_name(elem)));
    items.push_back(std::move(*value));
  }
  Tensor t;
  t.kind_ = ValueKind::optional;
  t.elem_kind_ = of;
  t.dtype_ = elem;
  t.items_ = std::make_shared<const std::vector<Tensor>>(std::move(items));
  return t;
}

const std::vector<Tensor>& Tensor::items() const {
  KILN_CHECK(kind_ != ValueKind::tensor && items_, "Tensor::items: a tensor has no items (not a sequence or an optional)");
  return *items_;
}

Tensor Tensor::clone() const {
  if (kind_ != ValueKind::tensor) {
    std::vector<Tensor> copies;
    for (const Tensor& i : items()) copies.push_back(i.clone());
    Tensor t = *this;
    t.items_ = std::make_shared<const std::vector<Tensor>>(std::move(copies));
    return t;
  }
  Tensor t(dtype_, shape_);
  if (dtype_ == DType::string) {
    const auto* s = static_cast<const std::string*>(data_);
    std::copy(s, s + size(), static_cast<std::string*>(t.data_));
  } else if (byte_size()) {
    std::memcpy(t.data_, data_, byte_size());
  }
  return t;
}

Tensor Tensor::reshaped(Shape shape) const {
  KILN_CHECK(shape_size(shape) == size(), cat("Tensor::reshaped: cannot view ", shape_to_string(shape_),
                                              " as ", shape_to_string(shape)));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::subrange(int64_t first, Shape shape) const {
  const int64_t n = shape_size(shape);
  KILN_CHECK(kind_ == ValueKind::tensor && first >= 0 && n >= 0 && first <= size() - n,
             cat("Tensor::subrange: elements [", first, ", ", first + n, ") of a tensor of ", size()));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  t.data_ = static_cast<char*>(data_) + static_cast<size_t>(first) * dtype_size(dtype_);
  return t;
}

void Tensor::check_type(DType want) const {
  KILN_CHECK(kind_ == ValueKind::tensor, cat("Tensor: a ", kind_ == ValueKind::sequence ? "sequence" : "optional",
                                             " value has no elements of its own (see items())"));
  KILN_CHECK(want == dtype_, cat("Tensor: element type is ", dtype_name(dtype_), ", accessed as ",
                                 dtype_name(want)));
}

std::vector<int64_t> Tensor::to_i64() const {
  std::vector<int64_t> out(static_cast<size_t>(size()));
  if (is_narrow(dtype_)) {  // 8- / 4-bit formats: their values
    const auto* d = static_cast<const uint8_t*>(data_);
    for (size_t i = 0; i < out.size(); ++i) {
      const float v = narrow_to_float(dtype_, d[i]);
      out[i] = std::isfinite(v) ? static_cast<int64_t>(v) : 0;
    }
    return out;
  }
  dispatch_all(dtype_, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* d = static_cast<const T*>(data_);
    // integers directly: through double, INT64_MAX (a common Slice end) would overflow
    for (size_t i = 0; i < out.size(); ++i) {
      if constexpr (std::is_integral_v<T>) out[i] = static_cast<int64_t>(d[i]);
      else out[i] = static_cast<int64_t>(static_cast<double>(d[i]));
    }
  });
  return out;
}

std::vector<double> Tensor::to_f64() const {
  std::vector<double> out(static_cast<size_t>(size()));
  if (is_narrow(dtype_)) {
    const auto* d = static_cast<const uint8_t*>(data_);
    for (size_t i = 0; i < out.size(); ++i) out[i] = narrow_to_float(dtype_, d[i]);
    return out;
  }
  dispatch_all(dtype_, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* d = static_cast<const T*>(data_);
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(d[i]);
  });
  return out;
}

std::string Tensor::to_string(size_t max_elems) const {
  std::ostringstream os;
  os << dtype_name(dtype_) << shape_to_string(shape_);
  if (!defined()) return os.str();
  if (kind_ != ValueKind::tensor) {
    std::ostringstream v;
    v << (kind_ == ValueKind::sequence ? "sequence(" : "optional(") << dtype_name(dtype_) << ") [";
    for (size_t i = 0; i < items().size(); ++i) v << (i ? ", " : "") << items()[i].to_string(max_elems);
    v << "]";
    return v.str();
  }
  if (dtype_ == DType::string) {
    const auto* s = static_cast<const std::string*>(data_);
    os << " {";
    for (int64_t i = 0; i < size() && i < static_cast<int64_t>(max_elems); ++i) os << (i ? ", \"" : "\"") << s[i] << '"';
    if (size() > static_cast<int64_t>(max_elems)) os << ", ...";
    os << "}";
    return os.str();
  }
  auto v = to_f64();
  os << " {";
  for (size_t i = 0; i < v.size() && i < max_elems; ++i) os << (i ? ", " : "") << v[i];
  if (v.size() > max_elems) os << ", ...";
  os << "}";
  return os.str();
}

}  // namespace kiln
