#include "core/onnx_dtype.hpp"

#include <kiln/error.hpp>

#include "core/strings.hpp"

namespace kiln {

namespace {

// Names of the ONNX element types kiln does not support (nullptr: not an ONNX code).
const char* unsupported_onnx_type_name(int64_t code) {
  switch (code) {
    case 0: return "UNDEFINED";
    case 14: return "COMPLEX64";
    case 15: return "COMPLEX128";
    default: return nullptr;
  }
}

}  // namespace

DType dtype_from_onnx_code(int64_t code, const std::string& what) {
  switch (code) {
    case 1: return DType::f32;
    case 2: return DType::u8;
    case 3: return DType::i8;
    case 4: return DType::u16;
    case 5: return DType::i16;
    case 6: return DType::i32;
    case 7: return DType::i64;
    case 8: return DType::string;
    case 9: return DType::boolean;
    case 10: return DType::f16;
    case 11: return DType::f64;
    case 12: return DType::u32;
    case 13: return DType::u64;
    case 16: return DType::bf16;
    case 17: return DType::f8e4m3fn;
    case 18: return DType::f8e4m3fnuz;
    case 19: return DType::f8e5m2;
    case 20: return DType::f8e5m2fnuz;
    case 21: return DType::u4;
    case 22: return DType::i4;
    case 23: return DType::f4e2m1;
    default: break;
  }
  const char* name = unsupported_onnx_type_name(code);
  throw Error(cat(what, ": ONNX data type ", code, name ? cat(" (", name, ")") : std::string(), " is not supported"));
}

int dtype_to_onnx_code(DType t) {
  switch (t) {
    case DType::f32: return 1;
    case DType::u8: return 2;
    case DType::i8: return 3;
    case DType::u16: return 4;
    case DType::i16: return 5;
    case DType::i32: return 6;
    case DType::i64: return 7;
    case DType::boolean: return 9;
    case DType::string: return 8;
    case DType::f16: return 10;
    case DType::f64: return 11;
    case DType::u32: return 12;
    case DType::u64: return 13;
    case DType::bf16: return 16;
    case DType::f8e4m3fn: return 17;
    case DType::f8e4m3fnuz: return 18;
    case DType::f8e5m2: return 19;
    case DType::f8e5m2fnuz: return 20;
    case DType::u4: return 21;
    case DType::i4: return 22;
    case DType::f4e2m1: return 23;
    case DType::undefined: break;
  }
  return 0;
}

}  // namespace kiln
