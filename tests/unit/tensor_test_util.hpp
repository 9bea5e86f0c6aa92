#pragma once
// Random f32 and 8-bit integer tensors for the unit tests (cpu_test_util.hpp, transforms_test_util.hpp).
#include <kiln/tensor.hpp>

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace kiln::test {

// An f32 tensor of shape `s` filled uniformly from [lo, hi) by an mt19937 seeded with `seed`.
inline Tensor random_tensor(Shape s, uint32_t seed, float lo, float hi) {
  Tensor t(DType::f32, std::move(s));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.size(); ++i) p[i] = u(rng);
  return t;
}

// The same over [-scale, scale).
inline Tensor random_tensor(Shape s, uint32_t seed, float scale = 1.0f) {
  return random_tensor(std::move(s), seed, -scale, scale);
}

// n floats uniform in [lo, hi), reproducible from the seed.
inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// A u8 or i8 tensor of shape `s`, values uniform in [lo, hi] (as ints, stored as their byte) by
// an mt19937 seeded with `seed`.
inline Tensor random_ints(DType t, Shape s, uint32_t seed, int lo, int hi) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  Tensor v(t, std::move(s));
  auto* p = static_cast<uint8_t*>(v.raw());
  for (int64_t i = 0; i < v.size(); ++i) p[i] = static_cast<uint8_t>(d(rng));
  return v;
}

}  // namespace kiln::test
