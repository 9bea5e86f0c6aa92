#include "fuzz_util.hpp"

#include <cstring>


namespace kiln::fuzz {

void fill_pattern(Tensor& t, uint32_t seed) {
  uint32_t s = seed * 2654435761u + 1;
  auto next = [&] {
    s = s * 1664525u + 1013904223u;
    return s >> 8;
  };
  const int64_t n = t.size();
  char* p = static_cast<char*>(t.raw());
  const size_t es = dtype_size(t.dtype());
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t r = next();
    const double f = static_cast<double>(r % 4096) / 1024.0 - 2.0;
    const int64_t k = r % 4;
    char* e = p + static_cast<size_t>(i) * es;
    switch (t.dtype()) {
      case DType::f32: { float v = static_cast<float>(f); std::memcpy(e, &v, 4); break; }
      case DType::f64: std::memcpy(e, &f, 8); break;
      case DType::f16: { float16 v(static_cast<float>(f)); std::memcpy(e, &v, 2); break; }
      case DType::bf16: { bfloat16 v(static_cast<float>(f)); std::memcpy(e, &v, 2); break; }
      case DType::boolean: *e = static_cast<char>(k & 1); break;
      default:  // integers: little-endian k in the element's width
        std::memset(e, 0, es);
        *e = static_cast<char>(k);
    }
  }
}

void touch(const Tensor& t) {
  if (t.kind() != ValueKind::tensor || t.dtype() == DType::string) return;
  const unsigned char* p = static_cast<const unsigned char*>(t.raw());
  unsigned sum = 0;
  for (size_t i = 0; i < t.byte_size(); ++i) sum += p[i];
  volatile unsigned sink = sum;
  (void)sink;
}

}  // namespace kiln::fuzz
