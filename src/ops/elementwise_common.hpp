#pragma once
// Helpers shared by the elementwise kernels (elementwise.cpp, elementwise_binary.cpp,
// elementwise_cast.cpp): compute types, element type sets and their checks, conversions.
#include <kiln/dtype.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

namespace kiln::ops::elementwise_detail {

template <class T>
constexpr bool is_half_v = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;
// Type a kernel computes in for element type T.
template <class T>
using calc_t = std::conditional_t<is_half_v<T>, float, T>;

// Compile-time element type sets.
enum TypeSet : unsigned {
  kFloat = 1,
  kSignedInt = 2,
  kUnsignedInt = 4,
  kBool = 8,
  kSigned = kFloat | kSignedInt,
  kNumeric = kFloat | kSignedInt | kUnsignedInt,
  kAll = kNumeric | kBool,
};

template <class T>
constexpr bool type_in(unsigned set) {
  if constexpr (std::is_same_v<T, bool>) return set & kBool;
  else if constexpr (std::is_floating_point_v<T> || is_half_v<T>) return set & kFloat;
  else if constexpr (std::is_signed_v<T>) return set & kSignedInt;
  else return set & kUnsignedInt;
}

inline bool dtype_in(DType t, unsigned set) {
  if (is_floating(t)) return set & kFloat;
  if (t == DType::boolean) return set & kBool;
  if (is_integral(t)) return set & (is_signed(t) ? kSignedInt : kUnsignedInt);
  return false;
}

inline std::string set_name(unsigned set) {
  if (set == kAll) return "any type";
  std::string s;
  auto add = [&](const char* n) { s += s.empty() ? n : std::string(" or ") + n; };
  if (set & kFloat) add("floating point");
  if ((set & kSignedInt) && (set & kUnsignedInt)) add("integer");
  else if (set & kSignedInt) add("signed integer");
  else if (set & kUnsignedInt) add("unsigned integer");
  if (set & kBool) add("bool");
  return s;
}

// Throws ctx.error when a known dtype is outside `set` (undefined = unknown: accepted).
template <class Ctx>
void check_dtype(const Ctx& ctx, DType t, unsigned set, size_t input) {
  if (t == DType::undefined || dtype_in(t, set)) return;
  throw ctx.error("input ", input, " has element type ", dtype_name(t), ", expected ", set_name(set));
}

// float -> integer: truncation toward zero; NaN -> 0; values beyond int64 saturate, others
// wrap modulo 2^bits (what a C cast does on common hardware for in-range values).
template <class To>
To float_to_int(double v) {
  if (std::isnan(v)) return To(0);
  if constexpr (std::is_same_v<To, uint64_t>) {
    if (v >= 18446744073709551616.0) return std::numeric_limits<uint64_t>::max();
    if (v >= 9223372036854775808.0) return static_cast<uint64_t>(v);
  }
  if (v >= 9223372036854775808.0) return static_cast<To>(std::numeric_limits<int64_t>::max());
  if (v < -9223372036854775808.0) return static_cast<To>(std::numeric_limits<int64_t>::min());
  return static_cast<To>(static_cast<int64_t>(v));
}

}  // namespace kiln::ops::elementwise_detail
