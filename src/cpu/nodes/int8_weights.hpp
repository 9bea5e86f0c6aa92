#pragma once
// Integer weights as oneDNN's int8 kernels take them, shared by ConvInteger and MatMulInteger.
//
// oneDNN multiplies u8 activations by s8 weights. Weights w with zero point zw (u8 or s8,
// one per tensor or per output channel) become s8 weights w' plus a per-channel constant c,
// w - zw = w' + c[channel]:
//   u8 weights   w' = w - 128,  c = 128 - zw
//   s8 weights   w' = w,        c = -zw
// and a product sum over (x - zx)(w - zw) is the one over (x - zx) w' plus c times the sum of
// (x - zx): the node adds the second term in int32.
//
// Without VNNI, oneDNN's int8 kernels multiply with vpmaddubsw, which saturates pairs of
// products at 16 bits (255 * 128 * 2 > 32767): there w' is split once more, w' = lo + 128 hi,
// lo in [-64, 63] and hi in {-1, 0, 1}, and two products without saturation (255 * 64 * 2 <
// 32768) give the exact one.
#include <kiln/tensor.hpp>

#include <cstdint>
#include <vector>

namespace kiln::cpu {

// oneDNN's int8 kernels on the ISA in use multiply without saturating (VNNI or AMX).
bool exact_int8_kernels();

struct Int8Weights {
  std::vector<int8_t> main;  // w', or lo when split
  std::vector<int8_t> hi;    // empty unless split
  bool split() const { return !hi.empty(); }
};

// w' of `w` (u8 or s8, any shape, same element order), split when `split`.
Int8Weights s8_weights(const Tensor& w, bool split);

// c for `channels` output channels; `zw` (may be null: 0) holds 1 or `channels` values.
std::vector<int32_t> weight_offsets(const Tensor& w, const Tensor* zw, int64_t channels);

}  // namespace kiln::cpu
