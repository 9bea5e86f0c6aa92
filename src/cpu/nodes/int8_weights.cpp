#include "cpu/nodes/int8_weights.hpp"

#include "cpu/isa.hpp"

namespace kiln::cpu {

bool exact_int8_kernels() { return isa_at_least(Isa::avx512_core_vnni); }

Int8Weights s8_weights(const Tensor& w, bool split) {
  const bool u8 = w.dtype() == DType::u8;
  const size_t count = static_cast<size_t>(w.size());
  Int8Weights out;
  out.main.resize(count);
  if (split) out.hi.resize(count);
  for (size_t i = 0; i < count; ++i) {
    const int v = u8 ? static_cast<int>(w.data<uint8_t>()[i]) - 128 : static_cast<int>(w.data<int8_t>()[i]);
    if (split) {
      const int h = (v + 64) >> 7;  // floor: -1, 0 or 1
      out.main[i] = static_cast<int8_t>(v - 128 * h);
      out.hi[i] = static_cast<int8_t>(h);
    } else {
      out.main[i] = static_cast<int8_t>(v);
    }
  }
  return out;
}

std::vector<int32_t> weight_offsets(const Tensor& w, const Tensor* zw, int64_t channels) {
  const bool u8 = w.dtype() == DType::u8;
  std::vector<int32_t> c(static_cast<size_t>(channels), u8 ? 128 : 0);
  if (!zw) return c;
  for (int64_t m = 0; m < channels; ++m) {
    const int64_t i = zw->size() == 1 ? 0 : m;
    c[static_cast<size_t>(m)] -= u8 ? static_cast<int32_t>(zw->data<uint8_t>()[i]) : static_cast<int32_t>(zw->data<int8_t>()[i]);
  }
  return c;
}

}  // namespace kiln::cpu
