#pragma once
// Type dispatch for kernels: call fn(TypeTag<T>{}) with the C++ type of a DType.
//   dispatch_all(t, [&](auto tag) { using T = typename decltype(tag)::type; ... });
// Variants restrict the set and throw kiln::Error naming the op for other types.
#include <kiln/dtype.hpp>
#include <kiln/error.hpp>

#include <string>

namespace kiln {

template <typename T>
struct TypeTag {
  using type = T;
};

[[noreturn]] inline void throw_unsupported_dtype(DType t, const char* what) {
  throw Error(std::string(what) + ": element type " + dtype_name(t) + " is not supported");
}

// Floating types: f32, f64, f16, bf16.
template <typename Fn>
decltype(auto) dispatch_float(DType t, Fn&& fn, const char* what = "operation") {
  switch (t) {
    case DType::f32: return fn(TypeTag<float>{});
    case DType::f64: return fn(TypeTag<double>{});
    case DType::f16: return fn(TypeTag<float16>{});
    case DType::bf16: return fn(TypeTag<bfloat16>{});
    default: throw_unsupported_dtype(t, what);
  }
}

// Integer types (no bool).
template <typename Fn>
decltype(auto) dispatch_int(DType t, Fn&& fn, const char* what = "operation") {
  switch (t) {
    case DType::i8: return fn(TypeTag<int8_t>{});
    case DType::u8: return fn(TypeTag<uint8_t>{});
    case DType::i16: return fn(TypeTag<int16_t>{});
    case DType::u16: return fn(TypeTag<uint16_t>{});
    case DType::i32: return fn(TypeTag<int32_t>{});
    case DType::u32: return fn(TypeTag<uint32_t>{});
    case DType::i64: return fn(TypeTag<int64_t>{});
    case DType::u64: return fn(TypeTag<uint64_t>{});
    default: throw_unsupported_dtype(t, what);
  }
}

// Numeric types: floating + integer (no bool).
template <typename Fn>
decltype(auto) dispatch_numeric(DType t, Fn&& fn, const char* what = "operation") {
  if (is_floating(t)) return dispatch_float(t, fn, what);
  return dispatch_int(t, fn, what);
}

// Every type including bool.
template <typename Fn>
decltype(auto) dispatch_all(DType t, Fn&& fn, const char* what = "operation") {
  if (t == DType::boolean) return fn(TypeTag<bool>{});
  return dispatch_numeric(t, fn, what);
}

}  // namespace kiln
