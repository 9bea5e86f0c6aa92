#pragma once
// kiln's exact 8-bit integer GEMM for CPUs without VNNI (AVX2, AVX-512 without VNNI):
//   C[M, N] (int32) = (A - za)[M, K] x (B - zb)[K, N],   A and B u8 or s8.
// oneDNN's int8 kernels there multiply with vpmaddubsw, whose pairs of u8 x s8 products
// saturate at 16 bits, so an exact product took two of its passes (split weights). Here both
// operands, their zero points already subtracted, are 16-bit ([-255, 255]) and vpmaddwd sums
// pairs of 16 x 16-bit products into int32: no saturation (2 * 255 * 255 < 2^31), and the
// int32 sums wrap as the ONNX reference's do. On an AVX2 Zen 3, 2 threads: about 200 GOPS on
// BERT-base's projections, against 100-110 for oneDNN's split pair and 120 for kiln's f32 GEMM.
//
// B is packed once ([K, N] -> panels of 16 columns, each [ceil(K / 2)][16][2] 16-bit, zero-
// padded), A is widened per call into pairs of 16-bit values (rows of ceil(K / 2) int32 words);
// C comes in blocks of 6 rows x 16 columns (12 accumulators), the rows a call argument: nothing
// is generated or created per shape.
#include <cstddef>
#include <cstdint>

#include "cpu/simd_avx2.hpp"

namespace kiln::cpu::gemm_s16 {

// Whether the ISA in use (cpu/isa.hpp, with its cap) runs the kernel: AVX2.
bool available();
// The implementation name profiles show.
const char* impl_name();

// 16-bit values of the packed B for [K, N].
int64_t packed_size(int64_t K, int64_t N);
// Packs B - zb, where B(k, n) = b[k * N + n] (s8 when `b_signed`, else u8) and zb[n] is the
// column's zero point (`zb` null: 0), into `out` (packed_size values).
void pack_b(const void* b, bool b_signed, int64_t K, int64_t N, const int32_t* zb, int16_t* out);

// Bytes of working memory run() needs for M rows of K.
size_t scratch_bytes(int64_t M, int64_t K);

// An 8-bit output (`Output::requant`): a QLinearConv's requantization, as oneDNN's int8
// convolution computes it with output scales, zero points and post-ops (quantized_convolution.hpp):
//   v = float(sum + bias[n]) * mult[n]
//   with a fused residual sum: v = clip(round(v), own_lo, own_hi) * own_mult + other_mult * (c - other_zp),
//     c the 8-bit value C holds before the store (the other operand, in place)
//   v = clip(v, lo, hi);  C = saturate(round_half_even(v) + zp)
struct Requant {
  const int32_t* bias = nullptr;  // N values or null
  const float* mult = nullptr;    // N values, or one (mult_count 1)
  int64_t mult_count = 1;
  bool s8 = false;                // s8 output, else u8
  bool sum = false;
  float own_lo = 0, own_hi = 0, own_mult = 1, other_mult = 0, other_zp = 0;
  float lo = -1e30f, hi = 1e30f;  // a fused clamp, before the zero point
  float zp = 0;
};

// What run() stores: the int32 sums, (`scale` set) float(sum) * scale[n] + bias[n], rounded
// per op as a Cast, a Mul and an Add would (MatMulIntegerToFloat), or (`requant` set) 8 bits.
struct Output {
  const float* scale = nullptr;  // null: int32 out; else N values (or one, scale_count 1)
  int64_t scale_count = 0;
  const float* bias = nullptr;  // N values or null
  const Requant* requant = nullptr;
  // run_u8s8 with A's zero point za: za * column_sums[n] comes off every sum first (wrapping,
  // as the sums); null: none
  const int32_t* column_sums = nullptr;
  int32_t za = 0;
};

// The store of a Requant in AVX2 registers, for kiln's int8 kernels (gemm_s16, depthwise_s8):
// callers are KILN_AVX2 code that available() let through.
//
// A Requant for the 8 columns from `col`, in registers: loaded once per block column, applied
// to each row (the 8-bit stores could alias Requant's fields, so the compiler would reload them).
struct RequantV {
  __m256i bias;
  __m256 mult, own_lo, own_hi, own_mult, other_mult, other_zp, lo, hi, zp, qmin, qmax;
  bool has_bias, sum, s8, clamp;
};

KILN_AVX2 inline RequantV requant_v(const Requant& q, int64_t col, int64_t left) {
  RequantV v;
  v.has_bias = q.bias != nullptr, v.sum = q.sum, v.s8 = q.s8;
  v.bias = !q.bias ? _mm256_setzero_si256()
           : left >= 8 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q.bias + col))
                       : _mm256_maskload_epi32(q.bias + col, simd::tail_mask8(left));
  v.mult = q.mult_count == 1 ? _mm256_set1_ps(q.mult[0]) : simd::v_load8(q.mult + col, left);
  v.own_lo = _mm256_set1_ps(q.own_lo), v.own_hi = _mm256_set1_ps(q.own_hi), v.own_mult = _mm256_set1_ps(q.own_mult);
  v.other_mult = _mm256_set1_ps(q.other_mult), v.other_zp = _mm256_set1_ps(q.other_zp);
  v.clamp = q.lo > -1e29f || q.hi < 1e29f;
  v.lo = _mm256_set1_ps(q.lo), v.hi = _mm256_set1_ps(q.hi), v.zp = _mm256_set1_ps(q.zp);
  v.qmin = _mm256_set1_ps(q.s8 ? -128.0f : 0.0f), v.qmax = _mm256_set1_ps(q.s8 ? 127.0f : 255.0f);
  return v;
}

// 8 sums of columns [col, col + left) requantized (Requant, as requant_v) into 8-bit C at `c`.
KILN_AVX2 inline void store_requant(__m256i acc, const RequantV& q, int64_t left, uint8_t* c) {
  if (q.has_bias) acc = _mm256_add_epi32(acc, q.bias);
  __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(acc), q.mult);
  constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  if (q.sum) {  // the convolution's own 8-bit value less its zero point, then the Add's arithmetic
    v = _mm256_mul_ps(_mm256_min_ps(_mm256_max_ps(_mm256_round_ps(v, kNearest), q.own_lo), q.own_hi), q.own_mult);
    __m128i bytes;
    if (left >= 8) {
      bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(c));
    } else {
      alignas(16) uint8_t part[16] = {};
      for (int i = 0; i < left; ++i) part[i] = c[i];
      bytes = _mm_load_si128(reinterpret_cast<const __m128i*>(part));
    }
    const __m256i wide = q.s8 ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes);
    v = _mm256_add_ps(v, _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(wide), q.other_zp), q.other_mult));
  }
  if (q.clamp) v = _mm256_min_ps(_mm256_max_ps(v, q.lo), q.hi);
  // rounded (half to even) before the zero point is added, then saturated to 8 bits
  const __m256 r = _mm256_add_ps(_mm256_round_ps(v, kNearest), q.zp);
  const __m256i i32 = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, q.qmin), q.qmax));  // in range: packs exact
  const __m128i i16 = _mm_packs_epi32(_mm256_castsi256_si128(i32), _mm256_extracti128_si256(i32, 1));
  const __m128i i8 = q.s8 ? _mm_packs_epi16(i16, i16) : _mm_packus_epi16(i16, i16);
  if (left >= 8) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(c), i8);
  } else {
    alignas(16) uint8_t part[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(part), i8);
    for (int i = 0; i < left; ++i) c[i] = part[i];
  }
}

// `count` int32 sums of columns [0, count) requantized by `q` into 8-bit `c` (the store of an
// Output::requant, for kernels that compute their sums otherwise: depthwise_s8).
void requantize(const int32_t* acc, int64_t count, const Requant& q, uint8_t* c);

// C = (A - za) x packed B: A row-major [M, K] with leading dimension lda (s8 when `a_signed`,
// else u8), C (int32, float or 8-bit: `out`) with ldc in elements; `scratch` of scratch_bytes(M, K). Runs on the
// calling thread's OpenMP team. available() must hold.
void run(const void* a, bool a_signed, int32_t za, int64_t M, int64_t K, int64_t lda, const int16_t* packed_b,
         int64_t N, void* c, int64_t ldc, void* scratch, const Output& out = {});

// The u8 x s8 variant, for B whose products with u8 values never overflow vpmaddubsw's 16-bit
// pair sums (pair_safe: e.g. 7-bit weights, |w| <= 64, as `kiln quantize --reduce-range` and
// ONNX Runtime's reduce_range write them): A's u8 values as they are (a zero point za is the
// caller's: sum (a - za) b = sum a b - za * column_sums), B packed in quads of K
// ([K / 4][16][4] bytes per panel of 16 columns). Twice the products per instruction of the
// 16-bit operands, half their bytes; the same Output.
const char* impl_name_u8s8();
// Whether no pair of B(2i, n), B(2i + 1, n) of one sign sums to more than 128 in magnitude:
// then 255 * |B(2i, n)| + 255 * |B(2i + 1, n)| <= 32640 fits vpmaddubsw's signed 16 bits, and
// run_u8s8 is exact. B row-major [K, N] s8.
bool pair_safe(const int8_t* b, int64_t K, int64_t N);
// K rounded up to a multiple of 4: the bytes run_u8s8 reads per row of A.
inline int64_t quad_row(int64_t K) { return (K + 3) / 4 * 4; }
// Bytes of the packed B for [K, N].
int64_t packed_size_u8s8(int64_t K, int64_t N);
// Packs B [K, N] (s8, b[k * N + n]) into `out` (packed_size_u8s8 bytes); `column_sums` (N values
// or null): sum over k of B(k, n).
void pack_b_u8s8(const int8_t* b, int64_t K, int64_t N, int8_t* out, int32_t* column_sums);
// C = A x packed B: A u8 row-major [M, K] with lda >= quad_row(K) bytes (the values past K in
// each row are read and multiplied by B's zero padding), C as run()'s. pair_safe(B) must hold.
void run_u8s8(const uint8_t* a, int64_t M, int64_t K, int64_t lda, const int8_t* packed_b, int64_t N, void* c,
              int64_t ldc, const Output& out = {});

// Values per widened row of A: K rounded up to even (pairs of 16-bit values, the odd K's last
// one 0).
inline int64_t widened_row(int64_t K) { return (K + 1) / 2 * 2; }
// n values a[i] - za (u8 or s8 a) as 16-bit: what run() widens A into, for callers that widen
// their own (a convolution's im2col).
template <typename T>
inline void widen(const T* a, int64_t n, int32_t za, int16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int16_t>(static_cast<int32_t>(a[i]) - za);
}
// The same from A already widened by the caller (a convolution's im2col): rows of
// widened_row(K) 16-bit values A - za, 4-byte aligned.
void run_widened(const int16_t* wide, int64_t M, int64_t K, const int16_t* packed_b, int64_t N, void* c, int64_t ldc,
                 const Output& out = {});

}  // namespace kiln::cpu::gemm_s16
