#pragma once
// kiln::Tensor: a dense, row-major n-d array. Either owns its storage (shared,
// so copies of a Tensor alias the same data) or wraps user memory without a copy.
// It also carries ONNX's other value types: a sequence of tensors, and an optional value
// (none, or one tensor or sequence); see kind().
#include <kiln/dtype.hpp>
#include <kiln/error.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

using Shape = std::vector<int64_t>;

// Product of dims (1 for a scalar). Throws kiln::Error when the dims other than 0 multiply
// to more than kMaxElements: no tensor is that large, and strides computed from such a shape
// would overflow (a crafted model may declare one).
int64_t shape_size(const Shape& s);
inline constexpr int64_t kMaxElements = int64_t(1) << 58;  // bytes of any element type fit in an int64
std::string shape_to_string(const Shape& s);  // "[1,3,224,224]"

// What a value is: a tensor, or one of ONNX's sequence and optional types.
enum class ValueKind : uint8_t { tensor, sequence, optional };

class Tensor {
 public:
  Tensor() = default;
  // Allocates zero-initialised storage.
  Tensor(DType dtype, Shape shape);
  // Allocates storage left uninitialised (for buffers about to be overwritten whole).
  static Tensor uninitialized(DType dtype, Shape shape);
  // Wraps memory the caller owns; the caller keeps it alive while the tensor is used.
  static Tensor wrap(DType dtype, Shape shape, void* data);
  // Wraps memory kept alive by `owner` (shared by every copy of the tensor).
  static Tensor adopt(DType dtype, Shape shape, std::shared_ptr<void> owner, void* data);
  // Copies a vector into a new tensor.
  template <typename T>
  static Tensor from_vector(const std::vector<T>& v, Shape shape);
  template <typename T>
  static Tensor scalar(T v) { return from_vector<T>(std::vector<T>{v}, Shape{}); }

  // A sequence of tensors of element type `elem` (each item a tensor of that type).
  static Tensor sequence(DType elem, std::vector<Tensor> items);
  // An optional value of element type `elem` holding nothing, or `value` (a tensor, or a
  // sequence when `of` is ValueKind::sequence).
  static Tensor optional(DType elem, std::optional<Tensor> value, ValueKind of = ValueKind::tensor);
  ValueKind kind() const { return kind_; }
  bool is_tensor() const { return kind_ == ValueKind::tensor; }
  // An optional's content kind (tensor or sequence); a sequence's items are tensors.
  ValueKind element_kind() const { return elem_kind_; }
  // A sequence's tensors, or what an optional holds (none or one); throws for a tensor.
  const std::vector<Tensor>& items() const;

  // For a sequence or an optional, dtype() is the element type, shape() is empty and size() 0.
  bool defined() const { return dtype_ != DType::undefined; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  size_t rank() const { return shape_.size(); }
  int64_t size() const { return kind_ == ValueKind::tensor ? shape_size(shape_) : 0; }  // element count
  size_t byte_size() const { return static_cast<size_t>(size()) * dtype_size(dtype_); }

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  template <typename T>
  T* data() {
    check_type(dtype_of<T>::value);
    return static_cast<T*>(data_);
  }
  template <typename T>
  const T* data() const {
    check_type(dtype_of<T>::value);
    return static_cast<const T*>(data_);
  }

  // How many tensors share this tensor's owned storage (0: wrapped memory, or undefined).
  long use_count() const { return owner_.use_count(); }

  // Deep copy into new owned storage.
  Tensor clone() const;
  // Same data, another shape with the same element count (no copy).
  Tensor reshaped(Shape shape) const;
  // Elements [first, first + shape_size(shape)) as a tensor of `shape`, sharing this tensor's
  // storage (no copy): consecutive rows of a table, say.
  Tensor subrange(int64_t first, Shape shape) const;
  // Values as int64 / double whatever the dtype (for shape inputs, attributes, printing).
  std::vector<int64_t> to_i64() const;
  std::vector<double> to_f64() const;
  std::string to_string(size_t max_elems = 8) const;

 private:
  void check_type(DType want) const;
  ValueKind kind_ = ValueKind::tensor;
  ValueKind elem_kind_ = ValueKind::tensor;
  std::shared_ptr<const std::vector<Tensor>> items_;  // sequence / optional contents
  DType dtype_ = DType::undefined;
  Shape shape_;
  std::shared_ptr<void> owner_;
  void* data_ = nullptr;
};

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& v, Shape shape) {
  Tensor t(dtype_of<T>::value, std::move(shape));
  if (static_cast<int64_t>(v.size()) != t.size())
    throw Error("Tensor::from_vector: " + std::to_string(v.size()) + " values for shape " +
                shape_to_string(t.shape()));
  T* d = t.data<T>();
  for (size_t i = 0; i < v.size(); ++i) d[i] = v[i];
  return t;
}

}  // namespace kiln
