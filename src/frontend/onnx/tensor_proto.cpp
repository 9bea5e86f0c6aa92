#include "frontend/onnx/tensor_proto.hpp"

#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/dispatch.hpp"
#include "core/onnx_dtype.hpp"
#include "core/strings.hpp"
#include "frontend/onnx/external_data.hpp"

namespace kiln::frontend {

DType dtype_from_onnx(int t, const std::string& what) { return dtype_from_onnx_code(t, what); }

int dtype_to_onnx(DType t) { return dtype_to_onnx_code(t); }

// Copies typed repeated-field values into the tensor, checking the count.
template <typename Field>
static void copy_field(const Field& field, Tensor& t, const std::string& what) {
  KILN_CHECK(static_cast<int64_t>(field.size()) == t.size(),
             cat(what, ": has ", field.size(), " values for shape ", shape_to_string(t.shape())));
  dispatch_all(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* d = t.data<T>();
    for (int i = 0; i < field.size(); ++i) {
      if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
        // 16-bit floats are stored as their bit patterns in int32_data
        d[i].bits = static_cast<uint16_t>(field.Get(i));
      } else {
        d[i] = static_cast<T>(field.Get(i));
      }
    }
  });
}

// dtype and shape of a TensorProto, validated, as a tensor over no data
static Tensor tensor_from_proto_shape(const onnx::TensorProto& p) {
  std::string what = cat("tensor '", p.name(), "'");
  KILN_CHECK(!p.has_segment(), cat(what, ": segmented tensors are not supported"));
  DType dt = dtype_from_onnx(p.data_type(), what);
  Shape shape;
  for (int64_t d : p.dims()) {
    KILN_CHECK(d >= 0, cat(what, ": negative dimension ", d));
    KILN_CHECK(d < (int64_t(1) << 40), cat(what, ": dimension ", d, " is too large"));
    shape.push_back(d);
  }
  static char no_data;
  return Tensor::wrap(dt, shape, &no_data);
}

// The number of values a TensorProto holds in the typed field its dtype uses.
static int64_t typed_values(const onnx::TensorProto& p, DType dt) {
  switch (dt) {
    case DType::f32: return p.float_data_size();
    case DType::f64: return p.double_data_size();
    case DType::i64: return p.int64_data_size();
    case DType::u32: case DType::u64: return p.uint64_data_size();
    default: return p.int32_data_size();
  }
}

static bool is_four_bit(DType t) { return t == DType::u4 || t == DType::i4 || t == DType::f4e2m1; }

// 4-bit tensors: files pack two elements a byte, the first in the low nibble; kiln holds one
// a byte. `packed` has (n + 1) / 2 bytes.
static Tensor unpack_four_bit(DType dt, const Shape& shape, const uint8_t* packed) {
  Tensor t = Tensor::uninitialized(dt, shape);
  auto* d = static_cast<uint8_t*>(t.raw());
  for (int64_t i = 0; i < t.size(); ++i) d[i] = static_cast<uint8_t>((packed[i / 2] >> ((i % 2) * 4)) & 0x0F);
  return t;
}

static Tensor four_bit_from_proto(const onnx::TensorProto& p, const Tensor& shell, const std::string& base_dir,
                                  const std::string& what) {
  const size_t packed = static_cast<size_t>((shell.size() + 1) / 2);
  std::string data;
  if (p.data_location() == onnx::TensorProto::EXTERNAL) {
    data = read_external_data(p, base_dir, packed);
  } else if (p.has_raw_data()) {
    KILN_CHECK(p.raw_data().size() == packed,
               cat(what, ": raw_data has ", p.raw_data().size(), " bytes, shape ", shape_to_string(shell.shape()),
                   " of ", dtype_name(shell.dtype()), " needs ", packed, " (two elements a byte)"));
    data = p.raw_data();
  } else {
    KILN_CHECK(static_cast<size_t>(p.int32_data_size()) == packed,
               cat(what, ": has ", p.int32_data_size(), " packed bytes in int32_data, shape ",
                   shape_to_string(shell.shape()), " needs ", packed, " (two elements a byte)"));
    for (int32_t v : p.int32_data()) data.push_back(static_cast<char>(v & 0xFF));
  }
  return unpack_four_bit(shell.dtype(), shell.shape(), reinterpret_cast<const uint8_t*>(data.data()));
}

Tensor tensor_from_proto(const onnx::TensorProto& p, const std::string& base_dir) {
  std::string what = cat("tensor '", p.name(), "'");
  // shape (element count checked) and the data's presence are validated before anything
  // is allocated: a crafted model may declare gigabytes over a few bytes of data
  Tensor shell = tensor_from_proto_shape(p);
  DType dt = shell.dtype();
  const Shape& shape = shell.shape();
  if (dt == DType::string) {  // string_data only
    KILN_CHECK(p.data_location() != onnx::TensorProto::EXTERNAL && !p.has_raw_data(),
               cat(what, ": string tensors hold their values in string_data"));
    KILN_CHECK(p.string_data_size() == shell.size(),
               cat(what, ": has ", p.string_data_size(), " strings for shape ", shape_to_string(shape)));
    Tensor t(dt, shape);
    auto* d = t.data<std::string>();
    for (int i = 0; i < p.string_data_size(); ++i) d[i] = p.string_data(i);
    return t;
  }
  if (is_four_bit(dt)) return four_bit_from_proto(p, shell, base_dir, what);
  const size_t bytes = shell.byte_size();
  if (p.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string data = read_external_data(p, base_dir, bytes);  // checks the file holds them first
    Tensor t = Tensor::uninitialized(dt, shape);
    if (bytes) std::memcpy(t.raw(), data.data(), bytes);
    return t;
  }
  if (p.has_raw_data()) {
    KILN_CHECK(p.raw_data().size() == bytes, cat(what, ": raw_data has ", p.raw_data().size(), " bytes, shape ",
                                                 shape_to_string(shape), " of ", dtype_name(dt), " needs ", bytes));
    Tensor t = Tensor::uninitialized(dt, shape);
    if (bytes) std::memcpy(t.raw(), p.raw_data().data(), bytes);
    return t;
  }
  KILN_CHECK(typed_values(p, dt) == shell.size(),
             cat(what, ": has ", typed_values(p, dt), " values for shape ", shape_to_string(shape)));
  Tensor t(dt, shape);
  if (is_narrow(dt)) {  // float8: the bit patterns in int32_data
    auto* d = static_cast<uint8_t*>(t.raw());
    for (int i = 0; i < p.int32_data_size(); ++i) d[i] = static_cast<uint8_t>(p.int32_data(i) & 0xFF);
    return t;
  }
  switch (dt) {
    case DType::f32: copy_field(p.float_data(), t, what); break;
    case DType::f64: copy_field(p.double_data(), t, what); break;
    case DType::i64: copy_field(p.int64_data(), t, what); break;
    case DType::u32: case DType::u64: copy_field(p.uint64_data(), t, what); break;
    default: copy_field(p.int32_data(), t, what); break;  // i8/u8/i16/u16/i32/bool/f16/bf16
  }
  return t;
}

Tensor take_tensor_from_proto(onnx::TensorProto& p, const std::string& base_dir) {
  if (!p.has_raw_data() || p.data_location() == onnx::TensorProto::EXTERNAL ||
      p.data_type() == dtype_to_onnx(DType::u4) || p.data_type() == dtype_to_onnx(DType::i4) ||
      p.data_type() == dtype_to_onnx(DType::f4e2m1))  // packed: unpacked by the copying path
    return tensor_from_proto(p, base_dir);
  // validate type, dims and size exactly as the copying path does, on an empty shell
  Tensor checked_shape = tensor_from_proto_shape(p);
  size_t bytes = checked_shape.byte_size();
  KILN_CHECK(p.raw_data().size() == bytes,
             cat("tensor '", p.name(), "': raw_data has ", p.raw_data().size(), " bytes, shape ",
                 shape_to_string(checked_shape.shape()), " of ", dtype_name(checked_shape.dtype()), " needs ", bytes));
  auto owner = std::make_shared<std::string>(std::move(*p.mutable_raw_data()));
  p.clear_raw_data();
  void* data = owner->data();
  return Tensor::adopt(checked_shape.dtype(), checked_shape.shape(), std::move(owner), data);
}

Tensor tensor_from_proto_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  KILN_CHECK(f, cat("cannot open tensor file '", path, "'"));
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  onnx::TensorProto p;
  KILN_CHECK(p.ParseFromString(bytes), cat("'", path, "' is not a serialized ONNX TensorProto"));
  KILN_CHECK(p.has_data_type(), cat("'", path, "' is not a serialized ONNX TensorProto (no data type)"));
  return tensor_from_proto(p, std::filesystem::path(path).parent_path().string());
}

namespace {

Tensor sequence_from_proto(const onnx::SequenceProto& s, DType elem, const std::string& base_dir) {
  KILN_CHECK(s.elem_type() == onnx::SequenceProto::TENSOR || s.elem_type() == onnx::SequenceProto::UNDEFINED,
             cat("sequence '", s.name(), "': only sequences of tensors are supported"));
  std::vector<Tensor> items;
  for (const auto& t : s.tensor_values()) items.push_back(tensor_from_proto(t, base_dir));
  if (!items.empty()) elem = items[0].dtype();
  return Tensor::sequence(elem, std::move(items));
}

}  // namespace

Tensor value_from_proto_file(const std::string& path, ValueKind kind, DType elem, ValueKind of) {
  if (kind == ValueKind::tensor) return tensor_from_proto_file(path);
  std::ifstream f(path, std::ios::binary);
  KILN_CHECK(f, cat("cannot open '", path, "'"));
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const std::string dir = std::filesystem::path(path).parent_path().string();
  if (kind == ValueKind::sequence) {
    onnx::SequenceProto s;
    KILN_CHECK(s.ParseFromString(bytes), cat("'", path, "' is not a serialized ONNX SequenceProto"));
    return sequence_from_proto(s, elem, dir);
  }
  onnx::OptionalProto o;
  KILN_CHECK(o.ParseFromString(bytes), cat("'", path, "' is not a serialized ONNX OptionalProto"));
  if (of == ValueKind::sequence && o.elem_type() == onnx::OptionalProto::TENSOR) {
    // not an OptionalProto but the SequenceProto of the value (ONNX's own test data has such)
    onnx::SequenceProto s;
    KILN_CHECK(s.ParseFromString(bytes), cat("'", path, "' is not a serialized ONNX OptionalProto or SequenceProto"));
    Tensor v = sequence_from_proto(s, elem, dir);
    return Tensor::optional(v.dtype(), v, ValueKind::sequence);
  }
  if (o.elem_type() == onnx::OptionalProto::SEQUENCE || o.has_sequence_value()) {
    if (!o.has_sequence_value()) return Tensor::optional(elem, std::nullopt, ValueKind::sequence);
    Tensor s = sequence_from_proto(o.sequence_value(), elem, dir);
    return Tensor::optional(s.dtype(), s, ValueKind::sequence);
  }
  if (!o.has_tensor_value()) return Tensor::optional(elem, std::nullopt, ValueKind::tensor);
  Tensor t = tensor_from_proto(o.tensor_value(), dir);
  return Tensor::optional(t.dtype(), t, ValueKind::tensor);
}

void tensor_to_proto(const Tensor& t, onnx::TensorProto& p) {
  p.set_data_type(dtype_to_onnx(t.dtype()));
  p.clear_dims();
  for (int64_t d : t.shape()) p.add_dims(d);
  if (t.dtype() == DType::string) {
    p.clear_string_data();
    for (int64_t i = 0; i < t.size(); ++i) p.add_string_data(t.data<std::string>()[i]);
    return;
  }
  if (is_four_bit(t.dtype())) {  // two elements a byte, the first in the low nibble
    std::string packed(static_cast<size_t>((t.size() + 1) / 2), '\0');
    const auto* d = static_cast<const uint8_t*>(t.raw());
    for (int64_t i = 0; i < t.size(); ++i)
      packed[static_cast<size_t>(i / 2)] = static_cast<char>(packed[static_cast<size_t>(i / 2)] | ((d[i] & 0x0F) << ((i % 2) * 4)));
    p.set_raw_data(std::move(packed));
    return;
  }
  p.set_raw_data(std::string(static_cast<const char*>(t.raw()), t.byte_size()));
}

}  // namespace kiln::frontend
