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

// What run() stores: the int32 sums, or (`scale` set) float(sum) * scale[n] + bias[n], rounded
// per op as a Cast, a Mul and an Add would (MatMulIntegerToFloat).
struct Output {
  const float* scale = nullptr;  // null: int32 out; else N values (or one, scale_count 1)
  int64_t scale_count = 0;
  const float* bias = nullptr;  // N values or null
};

// C = (A - za) x packed B: A row-major [M, K] with leading dimension lda (s8 when `a_signed`,
// else u8), C (int32 or float, `out`) with ldc; `scratch` of scratch_bytes(M, K). Runs on the
// calling thread's OpenMP team. available() must hold.
void run(const void* a, bool a_signed, int32_t za, int64_t M, int64_t K, int64_t lda, const int16_t* packed_b,
         int64_t N, void* c, int64_t ldc, void* scratch, const Output& out = {});

}  // namespace kiln::cpu::gemm_s16
