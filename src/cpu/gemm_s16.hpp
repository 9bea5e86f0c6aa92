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
};

// `count` int32 sums of columns [0, count) requantized by `q` into 8-bit `c` (the store of an
// Output::requant, for kernels that compute their sums otherwise: depthwise_s8).
void requantize(const int32_t* acc, int64_t count, const Requant& q, uint8_t* c);

// C = (A - za) x packed B: A row-major [M, K] with leading dimension lda (s8 when `a_signed`,
// else u8), C (int32, float or 8-bit: `out`) with ldc in elements; `scratch` of scratch_bytes(M, K). Runs on the
// calling thread's OpenMP team. available() must hold.
void run(const void* a, bool a_signed, int32_t za, int64_t M, int64_t K, int64_t lda, const int16_t* packed_b,
         int64_t N, void* c, int64_t ldc, void* scratch, const Output& out = {});

// Values per widened row of A: K rounded up to even (pairs of 16-bit values, the odd K's last
// one 0).
inline int64_t widened_row(int64_t K) { return (K + 1) / 2 * 2; }
// The same from A already widened by the caller (a convolution's im2col): rows of
// widened_row(K) 16-bit values A - za, 4-byte aligned.
void run_widened(const int16_t* wide, int64_t M, int64_t K, const int16_t* packed_b, int64_t N, void* c, int64_t ldc,
                 const Output& out = {});

}  // namespace kiln::cpu::gemm_s16
