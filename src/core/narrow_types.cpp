#include "core/narrow_types.hpp"

#include <kiln/error.hpp>

#include <array>
#include <cmath>
#include <limits>

namespace kiln {

namespace {

// A small binary float format: sign, exp_bits, man_bits; how it spells inf / NaN.
struct MiniFloat {
  enum class Specials { ieee, fn, fnuz, none };
  int exp_bits;
  int man_bits;
  int bias;
  Specials specials;
  uint8_t max_code;  // the largest finite magnitude's bits
  uint8_t sign_bit() const { return static_cast<uint8_t>(1u << (exp_bits + man_bits)); }
};

const MiniFloat* format_of(DType t) {
  static const MiniFloat e4m3fn{4, 3, 7, MiniFloat::Specials::fn, 0x7E};
  static const MiniFloat e4m3fnuz{4, 3, 8, MiniFloat::Specials::fnuz, 0x7F};
  static const MiniFloat e5m2{5, 2, 15, MiniFloat::Specials::ieee, 0x7B};
  static const MiniFloat e5m2fnuz{5, 2, 16, MiniFloat::Specials::fnuz, 0x7F};
  static const MiniFloat e2m1{2, 1, 1, MiniFloat::Specials::none, 0x07};
  switch (t) {
    case DType::f8e4m3fn: return &e4m3fn;
    case DType::f8e4m3fnuz: return &e4m3fnuz;
    case DType::f8e5m2: return &e5m2;
    case DType::f8e5m2fnuz: return &e5m2fnuz;
    case DType::f4e2m1: return &e2m1;
    default: return nullptr;
  }
}

// The value of a finite, non-negative magnitude code.
double magnitude(const MiniFloat& f, unsigned code) {
  const unsigned e = code >> f.man_bits, m = code & ((1u << f.man_bits) - 1);
  if (e == 0) return std::ldexp(static_cast<double>(m), 1 - f.bias - f.man_bits);
  return std::ldexp(static_cast<double>((1u << f.man_bits) + m), static_cast<int>(e) - f.bias - f.man_bits);
}

float decode(const MiniFloat& f, uint8_t bits) {
  const uint8_t sign = f.sign_bit();
  const unsigned mag = bits & (sign - 1u);
  const unsigned all_exp = (1u << f.exp_bits) - 1;
  switch (f.specials) {
    case MiniFloat::Specials::fnuz:
      if (bits == sign) return std::numeric_limits<float>::quiet_NaN();
      break;
    case MiniFloat::Specials::fn:
      if (mag == sign - 1u) return std::copysign(std::numeric_limits<float>::quiet_NaN(), (bits & sign) ? -1.0f : 1.0f);
      break;
    case MiniFloat::Specials::ieee:
      if ((mag >> f.man_bits) == all_exp) {
        const float s = (bits & sign) ? -1.0f : 1.0f;
        return (mag & ((1u << f.man_bits) - 1)) ? std::copysign(std::numeric_limits<float>::quiet_NaN(), s)
                                                 : s * std::numeric_limits<float>::infinity();
      }
      break;
    case MiniFloat::Specials::none: break;
  }
  const float v = static_cast<float>(magnitude(f, mag));
  return (bits & sign) ? -v : v;
}

uint8_t encode(const MiniFloat& f, double v, bool saturate) {
  const uint8_t sign = std::signbit(v) ? f.sign_bit() : 0;
  const uint8_t nan = f.specials == MiniFloat::Specials::fnuz ? f.sign_bit() : static_cast<uint8_t>(sign | (f.sign_bit() - 1u));
  const uint8_t largest = static_cast<uint8_t>(sign | f.max_code);
  auto overflow = [&]() -> uint8_t {
    if (saturate || f.specials == MiniFloat::Specials::none) return largest;
    if (f.specials == MiniFloat::Specials::ieee) return static_cast<uint8_t>(sign | (f.max_code + 1));  // inf
    return nan;
  };
  if (std::isnan(v)) return f.specials == MiniFloat::Specials::none ? f.max_code : nan;
  const double a = std::fabs(v);
  if (std::isinf(a)) return overflow();
  // the largest code whose value is <= a (codes 0..max_code increase with their values)
  unsigned lo = 0, hi = f.max_code;
  while (lo < hi) {
    const unsigned mid = (lo + hi + 1) / 2;
    if (magnitude(f, mid) <= a) lo = mid;
    else hi = mid - 1;
  }
  unsigned code = lo;
  const double below = magnitude(f, code);
  if (a > below) {
    // the next value up: the next code's, or past the largest one ulp further (overflow)
    const bool top = code == f.max_code;
    const double above = top ? below + std::ldexp(1.0, static_cast<int>(code >> f.man_bits) - f.bias - f.man_bits)
                             : magnitude(f, code + 1);
    const double d_below = a - below, d_above = above - a;
    const bool up = d_above < d_below || (d_above == d_below && (code & 1u));  // ties to even
    if (up) {
      if (top) return overflow();
      ++code;
    }
  }
  if (code == 0 && f.specials == MiniFloat::Specials::fnuz) return 0;  // no negative zero
  return static_cast<uint8_t>(sign | code);
}

}  // namespace

float narrow_to_float(DType t, uint8_t bits) {
  if (t == DType::u4) return static_cast<float>(bits & 0x0F);
  if (t == DType::i4) return static_cast<float>((bits & 0x08) ? static_cast<int>(bits & 0x0F) - 16 : bits & 0x0F);
  const MiniFloat* f = format_of(t);
  KILN_CHECK(f, std::string("narrow_to_float: ") + dtype_name(t) + " is not an 8- or 4-bit format");
  return decode(*f, bits);
}

uint8_t narrow_from_float(DType t, double v, bool saturate) {
  if (t == DType::u4 || t == DType::i4) {
    const double lo = t == DType::u4 ? 0.0 : -8.0, hi = t == DType::u4 ? 15.0 : 7.0;
    if (std::isnan(v)) return 0;
    const double r = std::nearbyint(std::fmin(std::fmax(v, lo), hi));  // half to even
    return static_cast<uint8_t>(static_cast<int>(r) & 0x0F);
  }
  const MiniFloat* f = format_of(t);
  KILN_CHECK(f, std::string("narrow_from_float: ") + dtype_name(t) + " is not an 8- or 4-bit format");
  return encode(*f, v, saturate);
}

uint8_t narrow_from_integer(DType t, int64_t v, bool saturate) {
  if (t == DType::u4 || t == DType::i4) return static_cast<uint8_t>(v & 0x0F);
  return narrow_from_float(t, static_cast<double>(v), saturate);
}

}  // namespace kiln
