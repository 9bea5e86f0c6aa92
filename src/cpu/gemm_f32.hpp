#pragma once
// kiln's own f32 GEMM for FullyConnected in graphs whose shapes vary: C[M, N] = A[M, K] x B[K, N]
// with B packed once, then an epilogue (bias, activations, per-column binary ops) on each
// block while it is in registers. The rows M are a call argument, so nothing is generated or
// created per shape: oneDNN 2.6 makes a matmul primitive (its brgemm kernels) for every M,
// 0.3-0.8 ms each, which a stream of new sequence lengths pays for every FullyConnected.
// Measured against that primitive on [8..256, 384..3072] x [384..3072, 384..3072], 2 threads:
// equal within about 5%.
//
// The kernel: B in panels of 64 columns (zero-padded), C in blocks of 6 rows x 64 columns (24
// accumulators), K in slices of 512 with AVX-512 and 2048 with AVX2 (gemm_f32.cpp, kSlice). Work
// items (panel, 6-row block) are shared by the OpenMP team, rows in a band per thread or by
// panels (run_blocks says which).
// AVX-512, or AVX2 (the panel 16 columns at a time: 6 x 2 accumulators) where the CPU has no
// AVX-512 (available()); below AVX2 oneDNN's primitive runs instead. The AVX2 6-row block's loop
// over K is written out in assembly (k4_6x16: GCC spilled or re-addressed otherwise) and
// carries the block's share of prefetches of the thread's next panel, two lines per four steps,
// so that the weights' misses overlap the products instead of stalling a burst before them.
// A panel is stored as groups of group_width() columns, each group [K][width] contiguous, so
// that a block's pass over K reads B as one sequential stream per group: [panel][K][64] for
// AVX-512, [panel][4][K][16] for AVX2. (With AVX2 reading 16 of each 64-column row, the
// hardware prefetcher did not follow: BERT's FullyConnected nodes, weights from memory, ran
// at half the FMA peak.)
#include <kiln/tensor.hpp>
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cpu::gemm_f32 {

// Whether the ISA in use (cpu/isa.hpp, with its cap) runs the kernel.
bool available();
// The implementation name profiles show.
const char* impl_name();

// Columns per packed panel, and per group of a panel (64 or 16: the ISA in use).
constexpr int64_t kPanel = 64;
int64_t group_width();

// Floats of the packed B for [K, N].
int64_t packed_size(int64_t K, int64_t N);
// Packs alpha * B, where B(k, n) = b[k * stride_k + n * stride_n], into `out` (packed_size floats),
// in the layout of the ISA in use: element (k, n) at packed_offset(K, k, n, group_width()).
void pack_b(const float* b, int64_t K, int64_t N, int64_t stride_k, int64_t stride_n, float alpha, float* out);

// Where the packed B of [K, N] in groups `width` columns wide holds element (k, n).
inline int64_t packed_offset(int64_t K, int64_t k, int64_t n, int64_t width) {
  const int64_t p = n / kPanel, g = n % kPanel / width;
  return p * K * kPanel + g * K * width + k * width + n % width;
}

// One step of the epilogue, applied after the bias in order.
struct EpilogueOp {
  enum class Kind { eltwise, binary } kind = Kind::eltwise;
  dnnl::algorithm alg = dnnl::algorithm::undef;
  float alpha = 0.0f, beta = 0.0f;  // eltwise parameters (oneDNN's meaning)
  // binary: the operand, one value (operand_count 1) or one per column (N), f32, in
  // `operand_storage` (shared with the constant it comes from: no copy per plan)
  Tensor operand_storage;
  const float* operand = nullptr;
  int64_t operand_count = 0;
  void set_operand(Tensor t) {  // f32
    operand_storage = std::move(t);
    operand = static_cast<const float*>(operand_storage.raw());
    operand_count = operand_storage.size();
  }
};
// Whether the epilogue can compute `alg` (eltwise) / `alg` with such an operand (binary).
bool supports_eltwise(dnnl::algorithm alg);
bool supports_binary(dnnl::algorithm alg);
// Whether `ops` are all ReLUs without slope and Clips, and then, as one clamp, to [*lo, *hi]
// (none: -inf, +inf): what the blocks apply in registers, and the depthwise kernel as it stores.
bool as_clamp(const std::vector<EpilogueOp>& ops, float* lo, float* hi);
// Whether `ops` are one Swish of alpha 1 (SiLU), which the AVX2 epilogue applies over stored rows
// in a loop of its own (after the asm passes of bias and store, or in apply_epilogue).
bool is_lone_swish(const std::vector<EpilogueOp>& ops);

struct Epilogue {
  const float* bias = nullptr;  // [N] or null
  std::vector<EpilogueOp> ops;
  bool accumulate = false;  // C += A x B (then the bias and ops), else C = A x B
};

// C = epilogue(A x B): A row-major with leading dimension lda, C with ldc; `packed_b` from
// pack_b. Runs on the calling thread's OpenMP team. available() must hold.
void run(const float* a, int64_t M, int64_t K, int64_t lda, const float* packed_b, int64_t N, float* c, int64_t ldc,
         const Epilogue& epilogue);
// The same on the calling thread only (for a caller that splits its own work over the team).
void run_serial(const float* a, int64_t M, int64_t K, int64_t lda, const float* packed_b, int64_t N, float* c,
                int64_t ldc, const Epilogue& epilogue);

// A 1x1 convolution over channel blocks of 8 (nChw8c in and out) as the GEMM, read and written
// in place: C(m, n) = epilogue(sum_k A(m, k) B(k, n)) with A(m, k) = a[(k / 8) * a_plane + m * 8
// + k % 8] (m a pixel of a plane of a_plane floats, k a channel) and C(m, n) = c[(n / 8) * c_plane
// + m * 8 + n % 8]; `packed_b` from pack_b. Where blocked8_supports(): AVX2 without AVX-512 (B
// packed in groups of 16), K and N multiples of 8, the ops a clamp (as_clamp; a bias and
// `accumulate` too); M a multiple of 6. On the calling thread; only C's columns [n_begin, n_end)
// (multiples of 16, n_end also N; -1: N), for a caller that splits the columns over its team.
bool blocked8_supports(const Epilogue& epilogue, int64_t K, int64_t N);
void run_serial_blocked8(const float* a, int64_t M, int64_t K, int64_t a_plane, const float* packed_b, int64_t N,
                         float* c, int64_t c_plane, const Epilogue& epilogue, int64_t n_begin = 0, int64_t n_end = -1);

// AVX-512: the product with A, C or both in channel blocks of 16 (nChw16c planes), read and
// written in place: no gather of A's rows, no scatter of C's. A(m, k) = a[(k / 16) * a_plane +
// m * 16 + k % 16] where a_plane > 0 (a 1x1 convolution reading its producer's blocks), else
// a[m * lda + k] (an im2col row block of a window); C(m, n) = c[(n / 16) * c_plane + m * 16 + n %
// 16] where c_plane > 0, else c[m * ldc + n]. Any epilogue (bias, ops, `accumulate`: C's values
// where it lies the summand). Where blocked16_supports(): AVX-512, K a multiple of 16 where A is
// in blocks, N where C is; any M. On the calling thread; only C's columns [n_begin, n_end)
// (multiples of 64, n_end also N; -1: N), for a caller that splits the columns over its team.
bool blocked16_supports(bool a_in_blocks, bool c_in_blocks, int64_t K, int64_t N);
void run_serial_blocked16(const float* a, int64_t M, int64_t K, int64_t lda, int64_t a_plane, const float* packed_b,
                          int64_t N, float* c, int64_t ldc, int64_t c_plane, const Epilogue& epilogue,
                          int64_t n_begin = 0, int64_t n_end = -1);

// The same product from A in rows (row-major, lda; any K) into C in channel blocks of 8: an
// im2col row block's product stored straight into the output's nChw8c, where
// blocked8_supports(epilogue, 8, N) holds; M a multiple of 6.
void run_serial_to_blocked8(const float* a, int64_t M, int64_t K, int64_t lda, const float* packed_b, int64_t N,
                            float* c, int64_t c_plane, const Epilogue& epilogue, int64_t n_begin = 0,
                            int64_t n_end = -1);

// C = epilogue(C) on rows x ncols of C (ldc apart), column j taking the bias and operands of
// column j (`accumulate` has no meaning here): for a kernel that computes C another way (the
// depthwise convolution of depthwise_f32.hpp). available() must hold.
void apply_epilogue(float* c, int64_t rows, int64_t ncols, int64_t ldc, const Epilogue& epilogue);

}  // namespace kiln::cpu::gemm_f32
