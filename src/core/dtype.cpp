#include <kiln/dtype.hpp>
#include <kiln/error.hpp>

#include <cmath>

namespace kiln {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: case DType::i32: case DType::u32: return 4;
    case DType::f16: case DType::bf16: case DType::i16: case DType::u16: return 2;
    case DType::f64: case DType::i64: case DType::u64: return 8;
    case DType::i8: case DType::u8: case DType::boolean: return 1;
    case DType::f8e4m3fn: case DType::f8e4m3fnuz: case DType::f8e5m2: case DType::f8e5m2fnuz:
    case DType::u4: case DType::i4: case DType::f4e2m1: return 1;  // one element per byte in memory
    case DType::string: return sizeof(std::string);
    case DType::undefined: return 0;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f64: return "f64";
    case DType::i8: return "i8";
    case DType::u8: return "u8";
    case DType::i16: return "i16";
    case DType::u16: return "u16";
    case DType::i32: return "i32";
    case DType::u32: return "u32";
    case DType::i64: return "i64";
    case DType::u64: return "u64";
    case DType::boolean: return "bool";
    case DType::string: return "string";
    case DType::f8e4m3fn: return "f8e4m3fn";
    case DType::f8e4m3fnuz: return "f8e4m3fnuz";
    case DType::f8e5m2: return "f8e5m2";
    case DType::f8e5m2fnuz: return "f8e5m2fnuz";
    case DType::u4: return "u4";
    case DType::i4: return "i4";
    case DType::f4e2m1: return "f4e2m1";
    case DType::undefined: return "undefined";
  }
  return "?";
}

DType dtype_from_name(const std::string& n) {
  for (int i = 1; i <= static_cast<int>(kLastDType); ++i) {
    auto t = static_cast<DType>(i);
    if (n == dtype_name(t)) return t;
  }
  if (n == "float32" || n == "float") return DType::f32;
  if (n == "float16") return DType::f16;
  if (n == "float64" || n == "double") return DType::f64;
  if (n == "int64") return DType::i64;
  if (n == "int32") return DType::i32;
  throw Error("unknown dtype '" + n + "'");
}

bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f16 || t == DType::bf16 || t == DType::f64;
}
bool is_integral(DType t) {
  switch (t) {
    case DType::i8: case DType::u8: case DType::i16: case DType::u16:
    case DType::i32: case DType::u32: case DType::i64: case DType::u64: return true;
    default: return false;
  }
}
bool is_narrow(DType t) {
  switch (t) {
    case DType::f8e4m3fn: case DType::f8e4m3fnuz: case DType::f8e5m2: case DType::f8e5m2fnuz:
    case DType::u4: case DType::i4: case DType::f4e2m1: return true;
    default: return false;
  }
}
bool is_signed(DType t) {
  return is_floating(t) || t == DType::i8 || t == DType::i16 || t == DType::i32 || t == DType::i64;
}

uint16_t float16::from_float(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mant = x & 0x007fffffu;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xffu);
  if (exp == 0xff) {  // inf / nan
    return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
  }
  int32_t e = exp - 127 + 15;
  if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (e <= 0) {  // subnormal or zero
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x00800000u;
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // may carry into exp: fine
  return static_cast<uint16_t>(half);
}

float float16::to_float(uint16_t h) {
  uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t out;
  if (exp == 0) {
    if (mant == 0) {
      out = sign;
    } else {  // subnormal
      float f = std::ldexp(static_cast<float>(mant), -24);
      return sign ? -f : f;
    }
  } else if (exp == 0x1f) {
    out = sign | 0x7f800000u | (mant << 13);
  } else {
    out = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &out, 4);
  return f;
}

}  // namespace kiln
