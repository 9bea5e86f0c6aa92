#include "cpu/depthwise_f32.hpp"

#include <algorithm>

#include <kiln/error.hpp>
#include "cpu/isa.hpp"
#include "cpu/simd_avx2.hpp"
#include "cpu/simd_avx512.hpp"

namespace kiln::cpu::depthwise_f32 {

namespace {

constexpr int64_t kPad = 16;  // the packed weights' channels: a multiple of this
int64_t padded_channels(int64_t c) { return (c + kPad - 1) / kPad * kPad; }

namespace v512 {
#define KILN_DW_TARGET KILN_AVX512
constexpr int64_t kLanes = 16;
using Reg = __m512;
using Mask = __mmask16;
KILN_AVX512 inline Mask lanes(int64_t left) { return simd::tail_mask(left); }
KILN_AVX512 inline Reg load(const float* p) { return _mm512_loadu_ps(p); }
KILN_AVX512 inline Reg load_tail(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
KILN_AVX512 inline void store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
KILN_AVX512 inline void store_tail(float* p, Mask m, Reg v) { _mm512_mask_storeu_ps(p, m, v); }
KILN_AVX512 inline Reg fma(Reg a, Reg b, Reg acc) { return _mm512_fmadd_ps(a, b, acc); }
KILN_AVX512 inline Reg zero() { return _mm512_setzero_ps(); }
KILN_AVX512 inline Reg broadcast(float f) { return _mm512_set1_ps(f); }
KILN_AVX512 inline Reg min(Reg a, Reg b) { return _mm512_min_ps(a, b); }
KILN_AVX512 inline Reg max(Reg a, Reg b) { return _mm512_max_ps(a, b); }
KILN_AVX512 inline Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
#include "cpu/depthwise_f32_row.inc"
#undef KILN_DW_TARGET
}  // namespace v512

namespace v256 {
#define KILN_DW_TARGET KILN_AVX2
constexpr int64_t kLanes = 8;
using Reg = __m256;
using Mask = __m256i;
// masked moves for the last partial vector only (AMD runs vmaskmovps stores in microcode)
KILN_AVX2 inline Mask lanes(int64_t left) { return simd::tail_mask8(left); }
KILN_AVX2 inline Reg load(const float* p) { return _mm256_loadu_ps(p); }
KILN_AVX2 inline Reg load_tail(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
KILN_AVX2 inline void store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
KILN_AVX2 inline void store_tail(float* p, Mask m, Reg v) { _mm256_maskstore_ps(p, m, v); }
KILN_AVX2 inline Reg fma(Reg a, Reg b, Reg acc) { return _mm256_fmadd_ps(a, b, acc); }
KILN_AVX2 inline Reg zero() { return _mm256_setzero_ps(); }
KILN_AVX2 inline Reg broadcast(float f) { return _mm256_set1_ps(f); }
KILN_AVX2 inline Reg min(Reg a, Reg b) { return _mm256_min_ps(a, b); }
KILN_AVX2 inline Reg max(Reg a, Reg b) { return _mm256_max_ps(a, b); }
KILN_AVX2 inline Reg mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
#include "cpu/depthwise_f32_row.inc"
#undef KILN_DW_TARGET
}  // namespace v256

using RowFn = void (*)(const Row&, const float* const*, const float*, const float*, float*);

// By [k == 5][stride == 2].
constexpr RowFn kRows512[2][2] = {{v512::row<3, 1>, v512::row<3, 2>}, {v512::row<5, 1>, v512::row<5, 2>}};
constexpr RowFn kRows256[2][2] = {{v256::row<3, 1>, v256::row<3, 2>}, {v256::row<5, 1>, v256::row<5, 2>}};

}  // namespace

bool available() { return isa_at_least(Isa::avx2); }

const char* impl_name() {
  return isa_at_least(Isa::avx512_core) ? "kiln_depthwise:avx512_core_f32" : "kiln_depthwise:avx2_f32";
}

bool supports(int64_t k, int64_t stride) { return (k == 3 || k == 5) && (stride == 1 || stride == 2); }

int64_t packed_size(int64_t channels, int64_t k) { return k * k * padded_channels(channels); }

int64_t weight_stride(int64_t channels) { return padded_channels(channels); }

void pack_weights(const float* w, int64_t channels, int64_t k, float* out) {
  const int64_t cp = padded_channels(channels);
  std::fill(out, out + k * k * cp, 0.0f);
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t t = 0; t < k * k; ++t) out[t * cp + c] = w[c * k * k + t];
}

void row(const Row& g, const float* const* rows, const float* packed, const float* bias, float* out) {
  KILN_CHECK(available() && supports(g.k, g.stride),
             "depthwise_f32::row: no kernel for this window and stride on the ISA in use");
  const RowFn fn = (isa_at_least(Isa::avx512_core) ? kRows512 : kRows256)[g.k == 5][g.stride == 2];
  fn(g, rows, packed, bias, out);
}

}  // namespace kiln::cpu::depthwise_f32
