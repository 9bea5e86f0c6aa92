#pragma once
// Small helpers shared by the reduction family's files (reduction*.cpp).
#include <kiln/dtype.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace kiln::ops {

// Floating element types, including the 16-bit wrappers.
template <typename T>
inline constexpr bool is_fp_v =
    std::is_floating_point_v<T> || std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;

template <typename T>
inline double to_double(T v) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

// double -> element type; for integer types NaN gives 0 and out-of-range values
// saturate (a plain cast would be undefined behaviour).
template <typename T>
inline T from_double(double v) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
    return T(static_cast<float>(v));
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else {
    if (std::isnan(v)) return T(0);
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

}  // namespace kiln::ops
