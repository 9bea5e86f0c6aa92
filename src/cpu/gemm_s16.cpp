#include "cpu/gemm_s16.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <kiln/error.hpp>
#include "cpu/isa.hpp"
#include "cpu/simd_avx2.hpp"
#include "cpu/work_share.hpp"

namespace kiln::cpu::gemm_s16 {

namespace {

constexpr int64_t kCols = 16;  // columns per packed panel: two vectors of 8 int32 sums
constexpr int kRows = 6;       // rows per block: 6 x 2 accumulators, 12 of the 16 registers

int64_t pairs(int64_t K) { return widened_row(K) / 2; }

// Stores a block's sums: rows [0, MR) x the first `ncols` columns of C (`out` from column n0 on).
template <int MR>
KILN_AVX2 inline void store_block(__m256i (&acc)[MR][2], void* c, int64_t ldc, int64_t ncols, int64_t n0,
                                  const Output& out) {
#pragma GCC unroll 8
  for (int j = 0; j < 2; ++j) {
    const int64_t left = ncols - j * 8, col = n0 + j * 8;
    if (left <= 0) break;
    if (out.column_sums) {  // sum (a - za) b = sum a b - za * sum b
      const __m256i sums = left >= 8 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(out.column_sums + col))
                                     : _mm256_maskload_epi32(out.column_sums + col, simd::tail_mask8(left));
      const __m256i off = _mm256_mullo_epi32(sums, _mm256_set1_epi32(out.za));
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) acc[r][j] = _mm256_sub_epi32(acc[r][j], off);
    }
    if (out.requant) {
      const RequantV q = requant_v(*out.requant, col, left);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) store_requant(acc[r][j], q, left, static_cast<uint8_t*>(c) + r * ldc + j * 8);
      continue;
    }
    if (out.scale) {  // float(acc) * scale [+ bias]: three roundings, as the unfused ops
      const __m256 scale = out.scale_count == 1 ? _mm256_set1_ps(out.scale[0]) : simd::v_load8(out.scale + col, left);
      const __m256 bias = out.bias ? simd::v_load8(out.bias + col, left) : _mm256_setzero_ps();
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(acc[r][j]), scale);
        if (out.bias) v = _mm256_add_ps(v, bias);
        simd::v_store8(static_cast<float*>(c) + r * ldc + j * 8, left, v);
      }
      continue;
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      auto* cr = reinterpret_cast<__m256i*>(static_cast<int32_t*>(c) + r * ldc + j * 8);
      if (left >= 8)
        _mm256_storeu_si256(cr, acc[r][j]);
      else  // a masked store only for a last partial vector (microcode on AMD CPUs)
        _mm256_maskstore_epi32(reinterpret_cast<int*>(cr), simd::tail_mask8(left), acc[r][j]);
    }
  }
}

// One block: rows [0, MR) of the widened A (`lda` words apart) times one panel of `k2` pairs,
// stored to the first `ncols` columns of C (`out` from column n0 on). The sums depend only on
// vpaddd (one cycle), so even one row keeps the multiplier busy.
template <int MR>
KILN_AVX2 void block(const int32_t* a, int64_t lda, const int16_t* b, int64_t k2, void* c, int64_t ldc, int64_t ncols,
                     int64_t n0, const Output& out) {
  __m256i acc[MR][2];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (int64_t k = 0; k < k2; ++k) {
    const auto* bk = reinterpret_cast<const __m256i*>(b + k * 2 * kCols);
    const __m256i b0 = _mm256_loadu_si256(bk), b1 = _mm256_loadu_si256(bk + 1);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m256i av = _mm256_set1_epi32(a[r * lda + k]);  // (A[r][2k], A[r][2k + 1])
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(av, b0));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(av, b1));
    }
  }
  store_block<MR>(acc, c, ldc, ncols, n0, out);
}

// The u8 x s8 block: rows [0, MR) of A (u8, `lda` bytes apart) times one panel of `k4` quads
// (pack_b_u8s8). vpmaddubsw sums each pair of u8 x s8 products into 16 bits (exact: pair_safe
// B), vpmaddwd by ones each two pairs into int32: 32 products per two instructions, against
// vpmaddwd's 16 for the 16-bit operands.
template <int MR>
KILN_AVX2 void block_u8s8(const uint8_t* a, int64_t lda, const int8_t* b, int64_t k4, void* c, int64_t ldc,
                          int64_t ncols, int64_t n0, const Output& out) {
  __m256i acc[MR][2];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t k = 0; k < k4; ++k) {
    const auto* bk = reinterpret_cast<const __m256i*>(b + k * 4 * kCols);
    const __m256i b0 = _mm256_loadu_si256(bk), b1 = _mm256_loadu_si256(bk + 1);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      int32_t quad;  // (A[r][4k] .. A[r][4k + 3])
      std::memcpy(&quad, a + r * lda + k * 4, 4);
      const __m256i av = _mm256_set1_epi32(quad);
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(_mm256_maddubs_epi16(av, b0), ones));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(av, b1), ones));
    }
  }
  store_block<MR>(acc, c, ldc, ncols, n0, out);
}

using BlockFn = void (*)(const int32_t*, int64_t, const int16_t*, int64_t, void*, int64_t, int64_t, int64_t,
                         const Output&);
constexpr BlockFn kBlocks[kRows] = {block<1>, block<2>, block<3>, block<4>, block<5>, block<6>};
using BlockU8S8Fn = void (*)(const uint8_t*, int64_t, const int8_t*, int64_t, void*, int64_t, int64_t, int64_t,
                             const Output&);
constexpr BlockU8S8Fn kBlocksU8S8[kRows] = {block_u8s8<1>, block_u8s8<2>, block_u8s8<3>,
                                            block_u8s8<4>, block_u8s8<5>, block_u8s8<6>};

// Row m of A - za as pairs of 16-bit values, the odd K's last pair padded with 0.
template <typename T>
void widen_row(const T* a, int64_t K, int32_t za, int16_t* out) {
  widen(a, K, za, out);
  if (K % 2) out[K] = 0;
}

// below about a microsecond of work, starting the team costs more than it saves
bool parallel_worth(int64_t M, int64_t K, int64_t N) {
  return 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) >= 4e5 &&
         (M > kRows || N > kCols);
}

// Where block `w` of C's blocks (6 rows x one panel) lies. The operand read again for every
// block of the other is the smaller one: panel-major (a panel of B stays in L1 / L2 while the
// rows pass) when B is the larger, as in a transformer's projections; row-major (a block's rows
// stay in L1 while B, in L2, passes) when A is, as in a convolution's many output positions x
// few channels.
struct BlockAt {
  int64_t panel = 0, m0 = 0;  // its panel of B, its first row
  int rows = 0;               // 1..kRows
  int64_t ncols = 0;          // the panel's columns inside N
  int64_t c_offset = 0;       // bytes into C
};
BlockAt block_at(int64_t M, int64_t N, int64_t ldc, const Output& out, int64_t w) {
  const int64_t panels = (N + kCols - 1) / kCols, row_blocks = (M + kRows - 1) / kRows;
  const bool panel_major = panels * kCols >= M;  // B's columns against A's rows (both x K)
  BlockAt at;
  at.panel = panel_major ? w / row_blocks : w % panels;
  at.m0 = (panel_major ? w % row_blocks : w / panels) * kRows;
  at.rows = static_cast<int>(std::min<int64_t>(kRows, M - at.m0));
  at.ncols = std::min(kCols, N - at.panel * kCols);
  at.c_offset = (at.m0 * ldc + at.panel * kCols) * (out.requant ? 1 : 4);
  return at;
}

// Block `w` of the widened A times the packed B (pack_b).
void run_block(const int16_t* wide, int64_t M, int64_t K, const int16_t* packed_b, int64_t N, void* c, int64_t ldc,
               const Output& out, int64_t w) {
  const int64_t k2 = pairs(K);
  const BlockAt at = block_at(M, N, ldc, out, w);
  kBlocks[at.rows - 1](reinterpret_cast<const int32_t*>(wide) + at.m0 * k2, k2, packed_b + at.panel * k2 * 2 * kCols, k2,
                       static_cast<char*>(c) + at.c_offset, ldc, at.ncols, at.panel * kCols, out);
}

int64_t block_count(int64_t M, int64_t N) { return (N + kCols - 1) / kCols * ((M + kRows - 1) / kRows); }

// Block `w` of A (u8 rows `lda` bytes apart) times B from pack_b_u8s8.
void run_block_u8s8(const uint8_t* a, int64_t lda, int64_t M, int64_t K, const int8_t* packed_b, int64_t N, void* c,
                    int64_t ldc, const Output& out, int64_t w) {
  const int64_t k4 = quad_row(K) / 4;
  const BlockAt at = block_at(M, N, ldc, out, w);
  kBlocksU8S8[at.rows - 1](a + at.m0 * lda, lda, packed_b + at.panel * k4 * 4 * kCols, k4,
                           static_cast<char*>(c) + at.c_offset, ldc, at.ncols, at.panel * kCols, out);
}

}  // namespace

bool available() { return isa_at_least(Isa::avx2); }

const char* impl_name() { return "kiln_gemm:avx2_s16"; }

int64_t packed_size(int64_t K, int64_t N) { return (N + kCols - 1) / kCols * pairs(K) * 2 * kCols; }

void pack_b(const void* b, bool b_signed, int64_t K, int64_t N, const int32_t* zb, int16_t* out) {
  const int64_t k2 = pairs(K);
  std::fill(out, out + packed_size(K, N), int16_t{0});
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) {
      const int32_t v = b_signed ? static_cast<const int8_t*>(b)[k * N + n] : static_cast<const uint8_t*>(b)[k * N + n];
      // panel n / 16, pair k / 2: per column (B[2i][n], B[2i + 1][n]) next to each other
      out[n / kCols * k2 * 2 * kCols + k / 2 * 2 * kCols + n % kCols * 2 + k % 2] =
          static_cast<int16_t>(v - (zb ? zb[n] : 0));
    }
}

KILN_AVX2 void requantize(const int32_t* acc, int64_t count, const Requant& q, uint8_t* c) {
  for (int64_t n = 0; n < count; n += 8) {
    const int64_t left = count - n;
    const __m256i v = left >= 8 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + n))
                                : _mm256_maskload_epi32(acc + n, simd::tail_mask8(left));
    store_requant(v, requant_v(q, n, left), left, c + n);
  }
}

size_t scratch_bytes(int64_t M, int64_t K) { return static_cast<size_t>(std::max<int64_t>(M, 0) * pairs(K) * 4); }

void run(const void* a, bool a_signed, int32_t za, int64_t M, int64_t K, int64_t lda, const int16_t* packed_b,
         int64_t N, void* c, int64_t ldc, void* scratch, const Output& out) {
  KILN_CHECK(available(), "gemm_s16::run: the ISA in use has no AVX2");
  if (M <= 0 || N <= 0) return;
  auto* wide = static_cast<int16_t*>(scratch);
  const int64_t k2 = pairs(K);
  auto widen = [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      if (a_signed)
        widen_row(static_cast<const int8_t*>(a) + m * lda, K, za, wide + m * k2 * 2);
      else
        widen_row(static_cast<const uint8_t*>(a) + m * lda, K, za, wide + m * k2 * 2);
    }
  };
  if (!parallel_worth(M, K, N)) {
    widen(0, M);
    run_widened(wide, M, K, packed_b, N, c, ldc, out);
    return;
  }
  const int nthr = omp_get_max_threads();
  WorkShare blocks(block_count(M, N), nthr);  // each thread its share, then the others' leftovers
#pragma omp parallel num_threads(nthr)
  {
    const int64_t team = omp_get_num_threads(), ithr = omp_get_thread_num();
    widen(M * ithr / team, M * (ithr + 1) / team);
#pragma omp barrier
    blocks.run(static_cast<int>(ithr), [&](int64_t w) { run_block(wide, M, K, packed_b, N, c, ldc, out, w); });
  }
}

void run_widened(const int16_t* wide, int64_t M, int64_t K, const int16_t* packed_b, int64_t N, void* c, int64_t ldc,
                 const Output& out) {
  KILN_CHECK(available(), "gemm_s16::run_widened: the ISA in use has no AVX2");
  if (M <= 0 || N <= 0) return;
  if (!parallel_worth(M, K, N)) {
    for (int64_t w = 0, n = block_count(M, N); w < n; ++w) run_block(wide, M, K, packed_b, N, c, ldc, out, w);
    return;
  }
  const int nthr = omp_get_max_threads();
  WorkShare blocks(block_count(M, N), nthr);
#pragma omp parallel num_threads(nthr)
  blocks.run(omp_get_thread_num(), [&](int64_t w) { run_block(wide, M, K, packed_b, N, c, ldc, out, w); });
}

const char* impl_name_u8s8() { return "kiln_gemm:avx2_u8s8"; }

bool pair_safe(const int8_t* b, int64_t K, int64_t N) {
  for (int64_t k = 0; k < K; k += 2)
    for (int64_t n = 0; n < N; ++n) {
      const int32_t w0 = b[k * N + n], w1 = k + 1 < K ? b[(k + 1) * N + n] : 0;
      // 255 * (|w0| + |w1|) for two weights of one sign; one of each sign stays within
      // 255 * 128 = 32640 either way
      if (w0 * w1 > 0 && std::abs(w0) + std::abs(w1) > 128) return false;
    }
  return true;
}

int64_t packed_size_u8s8(int64_t K, int64_t N) { return (N + kCols - 1) / kCols * quad_row(K) * kCols; }

void pack_b_u8s8(const int8_t* b, int64_t K, int64_t N, int8_t* out, int32_t* column_sums) {
  const int64_t k4 = quad_row(K) / 4;
  std::fill(out, out + packed_size_u8s8(K, N), int8_t{0});
  if (column_sums) std::fill(column_sums, column_sums + N, 0);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) {
      // panel n / 16, quad k / 4: per column B[4i .. 4i + 3][n] next to each other
      out[n / kCols * k4 * 4 * kCols + k / 4 * 4 * kCols + n % kCols * 4 + k % 4] = b[k * N + n];
      if (column_sums) column_sums[n] += b[k * N + n];
    }
}

void run_u8s8(const uint8_t* a, int64_t M, int64_t K, int64_t lda, const int8_t* packed_b, int64_t N, void* c,
              int64_t ldc, const Output& out) {
  KILN_CHECK(available(), "gemm_s16::run_u8s8: the ISA in use has no AVX2");
  KILN_CHECK(lda >= quad_row(K), "gemm_s16::run_u8s8: rows of A shorter than K rounded up to 4");
  if (M <= 0 || N <= 0) return;
  const int64_t blocks = block_count(M, N);
  auto one = [&](int64_t w) { run_block_u8s8(a, lda, M, K, packed_b, N, c, ldc, out, w); };
  parallel_share(blocks, one, parallel_worth(M, K, N));
}

}  // namespace kiln::cpu::gemm_s16
