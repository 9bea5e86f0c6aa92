#pragma once
// Element types. f16 / bf16 are stored as 16-bit patterns and computed in float by
// the reference kernels through the float16 / bfloat16 wrapper types below.
#include <cstdint>
#include <cstring>
#include <string>

namespace kiln {

enum class DType : uint8_t {
  undefined = 0,
  f32,
  f16,
  bf16,
  f64,
  i8,
  u8,
  i16,
  u16,
  i32,
  u32,
  i64,
  u64,
  boolean,
  string,  // std::string elements (ONNX STRING); only the ops that handle text take it
  // 8- and 4-bit number formats (ONNX FLOAT8*, UINT4, INT4, FLOAT4E2M1). kiln holds one element
  // per byte, as its bit pattern (4-bit ones in the low nibble; files pack two per byte), and
  // computes with them only in Cast, CastLike, QuantizeLinear and DequantizeLinear: see
  // is_narrow and src/core/narrow_types.hpp.
  f8e4m3fn,
  f8e4m3fnuz,
  f8e5m2,
  f8e5m2fnuz,
  u4,
  i4,
  f4e2m1,
};
constexpr DType kLastDType = DType::f4e2m1;

size_t dtype_size(DType t);
const char* dtype_name(DType t);  // "f32", "i64", "bool", ...
DType dtype_from_name(const std::string& name);  // throws kiln::Error
bool is_floating(DType t);
bool is_integral(DType t);  // integers and bool excluded? no: integers only
bool is_signed(DType t);
// The 8- and 4-bit formats above: stored and moved, converted by the cast and Q/DQ ops only.
bool is_narrow(DType t);

// IEEE half precision stored as bits; arithmetic happens in float.
struct float16 {
  uint16_t bits = 0;
  float16() = default;
  float16(float f) : bits(from_float(f)) {}  // NOLINT: implicit on purpose
  operator float() const { return to_float(bits); }  // NOLINT
  static uint16_t from_float(float f);
  static float to_float(uint16_t h);
};

// bfloat16: upper half of an IEEE float, round to nearest even.
struct bfloat16 {
  uint16_t bits = 0;
  bfloat16() = default;
  bfloat16(float f) : bits(from_float(f)) {}  // NOLINT
  operator float() const { return to_float(bits); }  // NOLINT
  static uint16_t from_float(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
  }
  static float to_float(uint16_t b) {
    uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

// An element of one of the 8- / 4-bit formats: its bit pattern. The values it stands for are
// computed by narrow_to_float / narrow_from_float (src/core/narrow_types.hpp).
template <DType D>
struct narrow_bits {
  uint8_t bits = 0;
};

// C++ type <-> DType mapping.
template <typename T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<float16> { static constexpr DType value = DType::f16; };
template <> struct dtype_of<bfloat16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::i8; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::u8; };
template <> struct dtype_of<int16_t> { static constexpr DType value = DType::i16; };
template <> struct dtype_of<uint16_t> { static constexpr DType value = DType::u16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<uint32_t> { static constexpr DType value = DType::u32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<uint64_t> { static constexpr DType value = DType::u64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::boolean; };
template <> struct dtype_of<std::string> { static constexpr DType value = DType::string; };
template <DType D> struct dtype_of<narrow_bits<D>> { static constexpr DType value = D; };

}  // namespace kiln
