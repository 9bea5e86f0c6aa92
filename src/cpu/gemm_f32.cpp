#include "cpu/gemm_f32.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include <kiln/error.hpp>
#include "cpu/isa.hpp"
#include "cpu/simd_avx2.hpp"
#include "cpu/simd_avx512.hpp"
#include "cpu/work_share.hpp"

namespace kiln::cpu::gemm_f32 {

namespace {

using namespace simd;

constexpr int64_t kGroupAvx2 = 16;  // columns per group of a panel on AVX2 (gemm_f32.hpp)
constexpr int kRows = 6;         // rows per block: 6 x 4 accumulators
// K per pass over C: AVX-512 512 (as first tuned); AVX2 2048, so that the 6-row passes take every
// product with K up to 2048 in one go (and its epilogue in registers: run_blocks' `lean`) instead
// of storing C and adding to it per slice. Zen 2, 2 threads, the bias epilogue, C and A out of
// cache, 512 -> 2048: [560, 1536] x [1536, 384] (BERT-6's FFN down-projection) 3494 -> 3417 us,
// [1072, 1536] x [1536, 384] 6794 -> 6519, [338, 672] x [672, 112] (an EfficientNet-B0
// projection) 290 -> 280, [3136, 1152] x [1152, 128] 5110 -> 4769, [196, 4608] x [4608, 512]
// 5252 -> 4984; none slower (1024 and 1536 in between).
constexpr int64_t kSlice = 512;
constexpr int64_t kSliceAvx2 = 2048;
constexpr int kPrefetch = 8;     // packed rows of B ahead (AVX-512 block) ...
// ... but not in a K this short: 1x1 convolutions over 16-32 channels ran 15-30% faster without
// (the prefetches took load slots from the broadcasts of A, and the panel was in L1 already)
constexpr int64_t kShortK = 32;
// Packed B up to this size is read row block by row block from L2 where a band's rows of A pass
// it (run_blocks' `rows_first`)
constexpr int64_t kRowsFirstMaxB = 256 << 10;

// GELU by erf and HardSwish (x * clamp(alpha x + beta, 0, 1); ONNX's: 1/6, 1/2) on a vector:
// eltwise16_n's and lone_op's one arithmetic.
KILN_AVX512 inline __m512 v_gelu_erf(__m512 x) {
  return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x),
                       _mm512_add_ps(_mm512_set1_ps(1.0f), v_erf(_mm512_mul_ps(x, _mm512_set1_ps(0.70710678f)))));
}
KILN_AVX512 inline __m512 v_hardswish(__m512 x, __m512 alpha, __m512 beta) {
  return _mm512_mul_ps(x, _mm512_min_ps(_mm512_max_ps(_mm512_fmadd_ps(x, alpha, beta), _mm512_setzero_ps()),
                                        _mm512_set1_ps(1.0f)));
}

// A Swish (SiLU) on v[0, n), n at most 4, the vectors' chains together (one vector's chain
// alone waits on each of its 17 steps).
KILN_AVX512 inline void swish_up_to_4(__m512* v, int n) {
  switch (n) {
    case 4: return v_swish_n<4>(v);
    case 3: return v_swish_n<3>(v);
    case 2: return v_swish_n<2>(v);
    case 1: return v_swish_n<1>(v);
    default: return;
  }
}

// `op` on v[0, n): the algorithm chosen once, then a loop over the vectors (a call and a switch
// per vector cost a 1x1 convolution's product over 32 channels about a third again).
KILN_AVX512 void eltwise16_n(__m512* v, int n, const EpilogueOp& op) {
  using A = dnnl::algorithm;
  const __m512 alpha = _mm512_set1_ps(op.alpha), beta = _mm512_set1_ps(op.beta);
  const __m512 zero = _mm512_setzero_ps(), half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
#define KILN_EACH(expr)         \
  for (int i = 0; i < n; ++i) { \
    const __m512 x = v[i];      \
    v[i] = (expr);              \
  }                             \
  return
  switch (op.alg) {
    case A::eltwise_relu:
      KILN_EACH(_mm512_mask_mul_ps(x, _mm512_cmp_ps_mask(x, zero, _CMP_LT_OQ), x, alpha));
    case A::eltwise_linear: KILN_EACH(_mm512_fmadd_ps(x, alpha, beta));
    case A::eltwise_clip:
    case A::eltwise_clip_v2: KILN_EACH(_mm512_min_ps(_mm512_max_ps(x, alpha), beta));
    case A::eltwise_gelu_erf: KILN_EACH(v_gelu_erf(x));
    case A::eltwise_gelu_tanh:
      KILN_EACH(_mm512_mul_ps(
          _mm512_mul_ps(half, x),
          _mm512_add_ps(one, v_tanh(_mm512_mul_ps(_mm512_set1_ps(0.79788456f),
                                                  _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(0.044715f), x),
                                                                  _mm512_mul_ps(x, x), x))))));
    case A::eltwise_logistic: KILN_EACH(v_logistic(x));
    case A::eltwise_tanh: KILN_EACH(v_tanh(x));
    case A::eltwise_swish:  // alpha 1 (SiLU, ONNX Swish's default): v_swish_n, no division
      if (op.alpha == 1.0f) {
        int i = 0;
        for (; i + 4 <= n; i += 4) v_swish_n<4>(v + i);
        swish_up_to_4(v + i, n - i);  // the last ones together too
        return;
      }
      KILN_EACH(_mm512_mul_ps(x, v_logistic(_mm512_mul_ps(alpha, x))));
    case A::eltwise_hardswish: KILN_EACH(v_hardswish(x, alpha, beta));
    case A::eltwise_abs: KILN_EACH(v_abs(x));
    case A::eltwise_square: KILN_EACH(_mm512_mul_ps(x, x));
    case A::eltwise_exp: KILN_EACH(v_exp(x));
    case A::eltwise_elu:
      KILN_EACH(_mm512_mask_mul_ps(x, _mm512_cmp_ps_mask(x, zero, _CMP_LE_OQ), alpha, _mm512_sub_ps(v_exp(x), one)));
    default: return;  // not reached: supports_eltwise() filtered the list
  }
#undef KILN_EACH
}

KILN_AVX512 __m512 v_binary(__m512 x, const EpilogueOp& op, int64_t n0, __mmask16 m) {
  using A = dnnl::algorithm;
  const __m512 y = op.operand_count == 1 ? _mm512_set1_ps(op.operand[0]) : _mm512_maskz_loadu_ps(m, op.operand + n0);
  switch (op.alg) {
    case A::binary_add: return _mm512_add_ps(x, y);
    case A::binary_sub: return _mm512_sub_ps(x, y);
    case A::binary_mul: return _mm512_mul_ps(x, y);
    case A::binary_div: return _mm512_mask_div_ps(x, m, x, y);  // no division in the padding lanes
    case A::binary_max: return _mm512_max_ps(x, y);
    case A::binary_min: return _mm512_min_ps(x, y);
    default: return x;
  }
}

// Lines of the thread's next panel a block brings into L2 while it runs (run_blocks).
struct Prefetch {
  const char* p = nullptr;
  int64_t lines = 0;
  void burst() const {
    for (int64_t l = 0; l < lines; ++l) _mm_prefetch(p + l * 64, _MM_HINT_T1);
  }
};

// One step of K for the AVX-512 block: row k of the packed panel (`b`, 64 floats a row; its
// first NV vectors) times the element of A at column k in each of the MR rows (lda apart), into
// the MR x NV accumulators; B's row kPrefetch ahead brought into L1. HALF: the last vector holds
// 8 columns, its loads and multiply-adds 8 lanes wide (the upper 8 lanes of its accumulators
// zero, never stored). A core that splits a 16-lane multiply-add in two halves (AMD Zen 4) does
// half the work for it: a last panel of 24 columns (a 1x1 convolution into 24 channels,
// MobileNet's and EfficientNet's) 3 halves where 4 computed 8 columns for nothing.
template <int MR, int NV, bool PREFETCH = true, bool HALF = false>
KILN_AVX512 inline __attribute__((always_inline)) void step512(const float* a, int64_t lda, const float* b, int64_t k,
                                                               __m512 (&acc)[MR][NV]) {
  const float* bk = b + k * kPanel;
  __m512 bv[NV];
#pragma GCC unroll 8
  for (int j = 0; j < NV; ++j) {
    if (PREFETCH) _mm_prefetch(reinterpret_cast<const char*>(bk + kPrefetch * kPanel + 16 * j), _MM_HINT_T0);
    if (HALF && j == NV - 1)
      bv[j] = _mm512_zextps256_ps512(_mm256_loadu_ps(bk + 16 * j));
    else
      bv[j] = _mm512_loadu_ps(bk + 16 * j);
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    const __m512 av = _mm512_set1_ps(a[r * lda + k]);
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) {
      if (HALF && j == NV - 1)
        acc[r][j] = _mm512_zextps256_ps512(_mm256_fmadd_ps(_mm512_castps512_ps256(av), _mm512_castps512_ps256(bv[j]),
                                                           _mm512_castps512_ps256(acc[r][j])));
      else
        acc[r][j] = _mm512_fmadd_ps(av, bv[j], acc[r][j]);
    }
  }
}

// Whether a panel of `ncols` columns ends in a vector of at most 8 of them (the HALF blocks)
constexpr bool half_last_vector(int64_t ncols) { return ncols % 16 != 0 && ncols % 16 <= 8; }

// Steps [0, kc) of K, the first 2 * spread of them each pair bringing a line of `next` into L2.
template <int MR, int NV, bool PREFETCH, bool HALF = false>
KILN_AVX512 inline __attribute__((always_inline)) void steps512(const float* a, int64_t lda, const float* b, int64_t kc,
                                                                int64_t spread, Prefetch next, __m512 (&acc)[MR][NV]) {
  int64_t k = 0;
  for (int64_t line = 0; line < spread; ++line, k += 2) {
    _mm_prefetch(next.p + line * 64, _MM_HINT_T1);
    step512<MR, NV, PREFETCH, HALF>(a, lda, b, k, acc);
    step512<MR, NV, PREFETCH, HALF>(a, lda, b, k + 1, acc);
  }
  for (; k < kc; ++k) step512<MR, NV, PREFETCH, HALF>(a, lda, b, k, acc);
}

// The epilogue of a block whose ops are not all clamps: `out` [rows][NV] the products, nv of the
// NV vectors with columns; C added (unless `first` without accumulate), the bias, the ops, stored.
KILN_AVX512 void epilogue_in_memory(__m512* out, int rows, int NV, int nv, float* c, int64_t ldc, int64_t ncols,
                                    int64_t n0, bool first, const Epilogue& ep, int64_t vs = 16) {
  for (int j = 0; j < nv; ++j) {
    const int64_t col = j * 16;
    const __mmask16 m = tail_mask(ncols - col);
    const __m512 bias = ep.bias ? _mm512_maskz_loadu_ps(m, ep.bias + n0 + col) : _mm512_setzero_ps();
    for (int r = 0; r < rows; ++r) {
      __m512& v = out[r * NV + j];
      if (!first || ep.accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, c + r * ldc + j * vs));
      v = _mm512_add_ps(v, bias);
    }
  }
  for (const EpilogueOp& op : ep.ops) {
    if (op.kind == EpilogueOp::Kind::eltwise) {
      eltwise16_n(out, rows * NV, op);  // the vectors without columns too: never stored
      continue;
    }
    for (int j = 0; j < nv; ++j)
      for (int r = 0; r < rows; ++r)
        out[r * NV + j] = v_binary(out[r * NV + j], op, n0 + j * 16, tail_mask(ncols - j * 16));
  }
  for (int j = 0; j < nv; ++j) {
    const __mmask16 m = tail_mask(ncols - j * 16);
    for (int r = 0; r < rows; ++r) _mm512_mask_storeu_ps(c + r * ldc + j * vs, m, out[r * NV + j]);
  }
}

// Returns STORE<MR, NV, ADD_C, ADD_BIAS, CLAMP>(args...) for the epilogue's case: each case its
// own straight-line store, without a test per accumulator (a macro, not a template taking the
// store: the stores carry their ISA's target attribute, which a generic dispatcher would lose).
#define KILN_STORE_CASE(STORE, MR, NV, ADD_C, ADD_BIAS, CLAMP, ...)                      \
  switch (((ADD_C) ? 4 : 0) | ((ADD_BIAS) ? 2 : 0) | ((CLAMP) ? 1 : 0)) {                \
    case 0: return STORE<MR, NV, false, false, false>(__VA_ARGS__);                      \
    case 1: return STORE<MR, NV, false, false, true>(__VA_ARGS__);                       \
    case 2: return STORE<MR, NV, false, true, false>(__VA_ARGS__);                       \
    case 3: return STORE<MR, NV, false, true, true>(__VA_ARGS__);                        \
    case 4: return STORE<MR, NV, true, false, false>(__VA_ARGS__);                       \
    case 5: return STORE<MR, NV, true, false, true>(__VA_ARGS__);                        \
    case 6: return STORE<MR, NV, true, true, false>(__VA_ARGS__);                        \
    default: return STORE<MR, NV, true, true, true>(__VA_ARGS__);                        \
  }

// The AVX-512 block's store where its epilogue stays in registers: the nv vectors with columns
// of each row, C added (ADD_C), the bias (ADD_BIAS), clamped to [lo, hi] (CLAMP).
// (`vs`: the floats between C's vectors of a row: 16, or a plane of channel blocks of 16)
template <int MR, int NV, bool ADD_C, bool ADD_BIAS, bool CLAMP>
KILN_AVX512 inline __attribute__((always_inline)) void store_block(const __m512 (&acc)[MR][NV], int nv, float* c,
                                                                   int64_t ldc, int64_t ncols, int64_t n0,
                                                                   const float* bias, __m512 lo, __m512 hi,
                                                                   int64_t vs = 16) {
#pragma GCC unroll 8
  for (int j = 0; j < NV; ++j) {
    if (j >= nv) break;
    const int64_t col = j * 16;
    const __mmask16 m = ncols - col >= 16 ? static_cast<__mmask16>(0xFFFF) : tail_mask(ncols - col);
    __m512 b = _mm512_setzero_ps();
    if constexpr (ADD_BIAS) b = _mm512_maskz_loadu_ps(m, bias + n0 + col);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      float* cr = c + r * ldc + j * vs;
      __m512 v = acc[r][j];
      if constexpr (ADD_C) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, cr));
      if constexpr (ADD_BIAS) v = _mm512_add_ps(v, b);
      if constexpr (CLAMP) v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
      _mm512_mask_storeu_ps(cr, m, v);
    }
  }
}

// How a block's epilogue runs: through memory (epilogue_in_memory), in registers (C, the bias,
// clamps: store_block), or one Swish, GELU or HardSwish over each row's vectors in registers
// (through memory, an array of the block's vectors and eltwise16_n, the product and a Swish at
// EfficientNet's expansions, K 16 and 24, took about twice the time: BM_GemmKilnSwish, one
// thread, 20800 x 16 x 96 2.9 ms against 1.3-1.5).
enum Epi { kEpiMemory, kEpiRegisters, kEpiSwish, kEpiGelu, kEpiHardSwish };

// The lone op an epilogue's ops are, taken in registers (kEpiSwish: SiLU; kEpiGelu: GELU by erf,
// a BERT's FFN; kEpiHardSwish: MobileNet-v3's), else kEpiMemory.
Epi lone_op_epi(const std::vector<EpilogueOp>& ops) {
  if (is_lone_swish(ops)) return kEpiSwish;
  if (ops.size() != 1 || ops[0].kind != EpilogueOp::Kind::eltwise) return kEpiMemory;
  if (ops[0].alg == dnnl::algorithm::eltwise_gelu_erf) return kEpiGelu;
  if (ops[0].alg == dnnl::algorithm::eltwise_hardswish) return kEpiHardSwish;
  return kEpiMemory;
}

// `op` (lone_op_epi's EPI) on a row's vectors in registers: eltwise16_n's arithmetic.
template <Epi EPI, int NV>
KILN_AVX512 inline __attribute__((always_inline)) void lone_op(__m512 (&v)[NV], const EpilogueOp& op) {
  if constexpr (EPI == kEpiSwish) {
    v_swish_n<NV>(v);
  } else if constexpr (EPI == kEpiGelu) {
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) v[j] = v_gelu_erf(v[j]);
  } else {
    const __m512 alpha = _mm512_set1_ps(op.alpha), beta = _mm512_set1_ps(op.beta);
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) v[j] = v_hardswish(v[j], alpha, beta);
  }
}

// The epilogue a block's last slice of K runs (every slice before it only stores its sums, in
// registers): `lo` and `hi` set where its ops are clamps.
Epi epi_of(const Epilogue& ep, bool last, float* lo, float* hi) {
  return !last || as_clamp(ep.ops, lo, hi) ? kEpiRegisters : lone_op_epi(ep.ops);
}

// The block's products and epilogue, B fetched ahead or not (PREFETCH), the epilogue as EPI
// says. The accumulators stay in registers from the
// first product to the store only where each case is its own straight-line code and every loop
// over them is unrolled, so that each index is a constant (GCC kept them on the stack otherwise:
// ~100 vector loads and stores a block; K = 16, N = 96 ran at 75 GF/s a core, now 90).
// A in rows (lda apart), or where `a_plane` > 0 in channel blocks of 16 (run_serial_blocked16:
// each plane of 16 channels a run of steps with its pixels 16 floats apart); C's rows ldc apart,
// a row's vectors `vs` (16, or a plane of channel blocks of 16 with ldc 16). (block() passes
// a_plane 0 and vs 16, constants once inlined.)
template <int MR, int NV, bool PREFETCH, Epi EPI, bool HALF = false>
KILN_AVX512 inline __attribute__((always_inline)) void block_body(const float* a, int64_t lda, const float* b, int64_t kc,
                                                                  float* c, int64_t ldc, int64_t ncols, int64_t n0,
                                                                  bool first, bool last, const Epilogue& ep,
                                                                  int64_t spread, Prefetch next, float lo, float hi,
                                                                  int64_t a_plane = 0, int64_t vs = 16) {
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) acc[r][j] = _mm512_setzero_ps();
  if (a_plane == 0) {
    steps512<MR, NV, PREFETCH, HALF>(a, lda, b, kc, spread, next, acc);
  } else {
    for (int64_t q = 0; q < kc; q += 16)
      steps512<MR, NV, PREFETCH, HALF>(a + q / 16 * a_plane, 16, b + q * kPanel, 16, 0, next, acc);
  }
  const int nv = static_cast<int>(std::min<int64_t>(NV, (ncols + 15) / 16));  // vectors with columns
  if constexpr (EPI == kEpiMemory) {
    __m512 out[MR * NV];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) out[r * NV + j] = acc[r][j];
    epilogue_in_memory(out, MR, NV, nv, c, ldc, ncols, n0, first, ep, vs);
  } else if constexpr (EPI != kEpiRegisters) {  // the last slice of K: C added where it holds a sum, the bias, the op
    const bool add_c = !first || ep.accumulate;
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      __m512 v[NV];
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) {
        const __mmask16 m = j < nv ? tail_mask(ncols - j * 16) : static_cast<__mmask16>(0);
        v[j] = acc[r][j];
        if (add_c) v[j] = _mm512_add_ps(v[j], _mm512_maskz_loadu_ps(m, c + r * ldc + j * vs));
        if (ep.bias) v[j] = _mm512_add_ps(v[j], _mm512_maskz_loadu_ps(m, ep.bias + n0 + j * 16));
      }
      lone_op<EPI, NV>(v, ep.ops[0]);
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j)
        if (j < nv) _mm512_mask_storeu_ps(c + r * ldc + j * vs, tail_mask(ncols - j * 16), v[j]);
    }
  } else {
    const __m512 lov = _mm512_set1_ps(lo), hiv = _mm512_set1_ps(hi);
    const bool add_c = !first || ep.accumulate, add_bias = last && ep.bias, clamp = last && !ep.ops.empty();
    KILN_STORE_CASE(store_block, MR, NV, add_c, add_bias, clamp, acc, nv, c, ldc, ncols, n0, ep.bias, lov, hiv, vs);
  }
}

// block_body for the epilogue `epi` (decided before the accumulators live: a call after the
// products would spill all of them, every vector register being the caller's to save).
template <int MR, int NV, bool PREFETCH, bool HALF = false>
KILN_AVX512 inline __attribute__((always_inline)) void block_epi(Epi epi, const float* a, int64_t lda, const float* b,
                                                                 int64_t kc, float* c, int64_t ldc, int64_t ncols,
                                                                 int64_t n0, bool first, bool last, const Epilogue& ep,
                                                                 int64_t spread, Prefetch next, float lo, float hi,
                                                                 int64_t a_plane, int64_t vs) {
#define KILN_BODY(E) \
  return block_body<MR, NV, PREFETCH, E, HALF>(a, lda, b, kc, c, ldc, ncols, n0, first, last, ep, spread, next, lo, hi, a_plane, vs)
  switch (epi) {
    case kEpiRegisters: KILN_BODY(kEpiRegisters);
    case kEpiSwish: KILN_BODY(kEpiSwish);
    case kEpiGelu: KILN_BODY(kEpiGelu);
    case kEpiHardSwish: KILN_BODY(kEpiHardSwish);
    default: KILN_BODY(kEpiMemory);
  }
#undef KILN_BODY
}

// One block: rows [0, MR) of a (lda apart) times a panel slice of kc packed rows, into C.
// `first`: C is written, else added to; `last`: the epilogue runs (bias before the ops).
// (`gstride`, the floats between groups of a panel, is the AVX2 block's: here a panel is one group)
// NV: the vectors of 16 columns computed, 4 but in a last panel of at most 48 columns (a 1x1
// convolution's 16, 24 or 32 output channels: computing the whole panel did 2-4x the products);
// HALF: the last of them 8 columns (step512).
template <int MR, int NV = 4, bool HALF = false>
KILN_AVX512 void block(const float* a, int64_t lda, const float* b, int64_t /*gstride*/, int64_t kc, float* c, int64_t ldc,
                       int64_t ncols, int64_t n0, bool first, bool last, const Epilogue& ep, Prefetch next) {
  // the full block spreads `next` over its loop (a line per 2 steps of K, so that the misses
  // overlap the products instead of filling the miss buffers ahead of them), the rest of it
  // at once; blocks of fewer rows all at once
  const int64_t spread = MR == kRows ? std::min(next.lines, kc / 2) : 0;
  Prefetch{next.p + spread * 64, next.lines - spread}.burst();
  // The epilogue: in registers where it only adds (C, the bias) and clamps (most often) or is one
  // Swish, GELU or HardSwish, else through memory (block_epi).
  float lo = -INFINITY, hi = INFINITY;
  const Epi epi = epi_of(ep, last, &lo, &hi);
  // K <= kShortK: the panel's few rows stay in L1 from the block before, B not fetched ahead
  if (kc <= kShortK)
    return block_epi<MR, NV, false, HALF>(epi, a, lda, b, kc, c, ldc, ncols, n0, first, last, ep, spread, next, lo, hi, 0, 16);
  block_epi<MR, NV, true, HALF>(epi, a, lda, b, kc, c, ldc, ncols, n0, first, last, ep, spread, next, lo, hi, 0, 16);
}

// run_serial_blocked16's block (block_body's A in blocks or rows, C's vectors `vs` apart): as
// block(), B's rows fetched ahead where K is long, nothing brought into L2 ahead.
template <int MR, int NV, bool HALF = false>
KILN_AVX512 void block16(const float* a, int64_t lda, int64_t a_plane, const float* b, int64_t kc, float* c, int64_t ldc,
                         int64_t vs, int64_t ncols, int64_t n0, bool first, bool last, const Epilogue& ep) {
  float lo = -INFINITY, hi = INFINITY;
  const Epi epi = epi_of(ep, last, &lo, &hi);
  if (kc <= kShortK)
    return block_epi<MR, NV, false, HALF>(epi, a, lda, b, kc, c, ldc, ncols, n0, first, last, ep, 0, Prefetch{}, lo, hi, a_plane, vs);
  block_epi<MR, NV, true, HALF>(epi, a, lda, b, kc, c, ldc, ncols, n0, first, last, ep, 0, Prefetch{}, lo, hi, a_plane, vs);
}

using Block16Fn = void (*)(const float*, int64_t, int64_t, const float*, int64_t, float*, int64_t, int64_t, int64_t,
                           int64_t, bool, bool, const Epilogue&);
// By the vectors of 16 columns the panel has, then rows.
constexpr Block16Fn kBlocks16[4][kRows] = {
    {block16<1, 1>, block16<2, 1>, block16<3, 1>, block16<4, 1>, block16<5, 1>, block16<6, 1>},
    {block16<1, 2>, block16<2, 2>, block16<3, 2>, block16<4, 2>, block16<5, 2>, block16<6, 2>},
    {block16<1, 3>, block16<2, 3>, block16<3, 3>, block16<4, 3>, block16<5, 3>, block16<6, 3>},
    {block16<1, 4>, block16<2, 4>, block16<3, 4>, block16<4, 4>, block16<5, 4>, block16<6, 4>}};
// C in rows whose last vector has at most 8 columns: that vector 8 lanes wide (step512's HALF)
constexpr Block16Fn kBlocks16Half[4][kRows] = {
    {block16<1, 1, true>, block16<2, 1, true>, block16<3, 1, true>, block16<4, 1, true>, block16<5, 1, true>, block16<6, 1, true>},
    {block16<1, 2, true>, block16<2, 2, true>, block16<3, 2, true>, block16<4, 2, true>, block16<5, 2, true>, block16<6, 2, true>},
    {block16<1, 3, true>, block16<2, 3, true>, block16<3, 3, true>, block16<4, 3, true>, block16<5, 3, true>, block16<6, 3, true>},
    {block16<1, 4, true>, block16<2, 4, true>, block16<3, 4, true>, block16<4, 4, true>, block16<5, 4, true>, block16<6, 4, true>}};

// Columns [n_begin, n_end) of run_serial_blocked16's product: panel by panel, each over A's rows
// in blocks of 6 (the last fewer), K in slices.
KILN_AVX512 void run_blocked16_avx512(const float* a, int64_t M, int64_t K, int64_t lda, int64_t a_plane,
                                      const float* packed_b, float* c, int64_t ldc, int64_t c_plane, const Epilogue& ep,
                                      int64_t n_begin, int64_t n_end) {
  const int64_t row = c_plane ? 16 : ldc, vs = c_plane ? c_plane : 16;  // C's rows, and a row's vectors, apart
  for (int64_t n0 = n_begin; n0 < n_end; n0 += kPanel) {
    const int64_t ncols = std::min(kPanel, n_end - n0);
    const float* panel = packed_b + n0 / kPanel * K * kPanel;
    float* c_panel = c + (c_plane ? n0 / 16 * c_plane : n0);
    for (int64_t m0 = 0; m0 < M; m0 += kRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kRows, M - m0));
      const Block16Fn fn = (half_last_vector(ncols) ? kBlocks16Half : kBlocks16)[(ncols + 15) / 16 - 1][rows - 1];
      for (int64_t k0 = 0; k0 < K; k0 += kSlice) {
        const int64_t kc = std::min(kSlice, K - k0);
        const float* ak = a_plane ? a + m0 * 16 + k0 / 16 * a_plane : a + m0 * lda + k0;
        fn(ak, lda, a_plane, panel + k0 * kPanel, kc, c_panel + m0 * row, row, vs, ncols, n0, k0 == 0, k0 + kSlice >= K,
           ep);
      }
    }
  }
}

// `op` on the U vectors v[0, U), which the caller holds in registers (inlined: a call through
// memory, with the vectors in an array, cost the Swish 5.7 ns a vector where streaming two at
// a time from C and back costs 3.3: Zen 2, 48 x 96 in L1). The multi-vector forms of the long
// chains (Swish, GELU: a division and an exponential) interleave their U vectors.
// HardSwish, oneDNN's form: x * clamp(alpha x + beta, 0, 1) (ONNX's: alpha 1/6, beta 1/2).
KILN_AVX2 inline __m256 v_hardswish8(__m256 x, __m256 alpha, __m256 beta) {
  return _mm256_mul_ps(x, _mm256_min_ps(_mm256_max_ps(_mm256_fmadd_ps(x, alpha, beta), _mm256_setzero_ps()),
                                        _mm256_set1_ps(1.0f)));
}

template <int U>
KILN_AVX2 inline __attribute__((always_inline)) void eltwise8_u(__m256* v, const EpilogueOp& op) {
  using A = dnnl::algorithm;
  const __m256 alpha = _mm256_set1_ps(op.alpha), beta = _mm256_set1_ps(op.beta);
  const __m256 zero = _mm256_setzero_ps(), half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
#define KILN_EACH(expr)             \
  for (int i = 0; i < U; ++i) {     \
    const __m256 x = v[i];          \
    v[i] = (expr);                  \
  }                                 \
  return
  switch (op.alg) {
    case A::eltwise_relu: KILN_EACH(_mm256_blendv_ps(x, _mm256_mul_ps(x, alpha), _mm256_cmp_ps(x, zero, _CMP_LT_OQ)));
    case A::eltwise_linear: KILN_EACH(_mm256_fmadd_ps(x, alpha, beta));
    case A::eltwise_clip:
    case A::eltwise_clip_v2: KILN_EACH(_mm256_min_ps(_mm256_max_ps(x, alpha), beta));
    case A::eltwise_gelu_erf: v_gelu_erf8_n<U>(v); return;
    case A::eltwise_gelu_tanh:
      KILN_EACH(_mm256_mul_ps(_mm256_mul_ps(half, x),
                              _mm256_add_ps(one, v_tanh8(_mm256_mul_ps(_mm256_set1_ps(0.79788456f),
                                                                      _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(0.044715f), x),
                                                                                      _mm256_mul_ps(x, x), x))))));
    case A::eltwise_logistic: KILN_EACH(v_logistic8(x));
    case A::eltwise_tanh: KILN_EACH(v_tanh8(x));
    case A::eltwise_swish:
      if (op.alpha == 1.0f) {
        v_swish8_n<U>(v);
        return;
      }
      KILN_EACH(_mm256_mul_ps(x, v_logistic8(_mm256_mul_ps(alpha, x))));
    case A::eltwise_hardswish: KILN_EACH(v_hardswish8(x, alpha, beta));
    case A::eltwise_abs: KILN_EACH(v_abs8(x));
    case A::eltwise_square: KILN_EACH(_mm256_mul_ps(x, x));
    case A::eltwise_exp: KILN_EACH(v_exp8(x));
    case A::eltwise_elu:
      KILN_EACH(_mm256_blendv_ps(x, _mm256_mul_ps(alpha, _mm256_sub_ps(v_exp8(x), one)), _mm256_cmp_ps(x, zero, _CMP_LE_OQ)));
    default: return;  // not reached: supports_eltwise() filtered the list
  }
#undef KILN_EACH
}

// `op` on v[0, n) (an array: the GEMM block's products where its epilogue is not streamed):
// the long chains (Swish, GELU) four vectors at a time, whose chains overlap in the core (one at
// a time through a call each, GELU after a K = 96 product cost about as much as the product,
// BM_GemmKilnGelu; Swish four at a time: EfficientNet-B0's stem block 0.93 of two at a time),
// the other ops one at a time.
KILN_AVX2 void eltwise8_n(__m256* v, int n, const EpilogueOp& op) {
  int i = 0;
  if (op.alg == dnnl::algorithm::eltwise_gelu_erf || (op.alg == dnnl::algorithm::eltwise_swish && op.alpha == 1.0f)) {
    for (; i + 4 <= n; i += 4) eltwise8_u<4>(v + i, op);
    for (; i + 2 <= n; i += 2) eltwise8_u<2>(v + i, op);
  }
  for (; i < n; ++i) eltwise8_u<1>(v + i, op);
}

// `left`: the columns from n0 on (the lanes past them are not stored)
KILN_AVX2 __m256 v_binary8(__m256 x, const EpilogueOp& op, int64_t n0, int64_t left) {
  using A = dnnl::algorithm;
  const __m256 y = op.operand_count == 1 ? _mm256_set1_ps(op.operand[0]) : simd::v_load8(op.operand + n0, left);
  switch (op.alg) {
    case A::binary_add: return _mm256_add_ps(x, y);
    case A::binary_sub: return _mm256_sub_ps(x, y);
    case A::binary_mul: return _mm256_mul_ps(x, y);
    case A::binary_div: return _mm256_div_ps(x, y);  // padding lanes are not stored
    case A::binary_max: return _mm256_max_ps(x, y);
    case A::binary_min: return _mm256_min_ps(x, y);
    default: return x;
  }
}

// The ops an AVX2 epilogue may apply to stored rows in a loop of their own (stream_rows_avx2).
enum class Streamed { none, swish, gelu_erf, hardswish };

// Rows [0, rows) x cols [0, ncols) of c (ldc apart), two vectors at a time, then one: loaded,
// the bias added (when given), `f.apply<U>(v, column, columns left)` on the U vectors in
// registers, stored back.
template <class F>
KILN_AVX2 inline __attribute__((always_inline)) void rows_by_two_avx2(float* c, int64_t rows, int64_t ncols, int64_t ldc,
                                                                      const float* bias, const F& f) {
  for (int64_t r = 0; r < rows; ++r) {
    float* p = c + r * ldc;
    int64_t j = 0;
    for (; j + 16 <= ncols; j += 16) {
      __m256 v[2] = {_mm256_loadu_ps(p + j), _mm256_loadu_ps(p + j + 8)};
      if (bias) {
        v[0] = _mm256_add_ps(v[0], _mm256_loadu_ps(bias + j));
        v[1] = _mm256_add_ps(v[1], _mm256_loadu_ps(bias + j + 8));
      }
      f.template apply<2>(v, j, ncols - j);
      _mm256_storeu_ps(p + j, v[0]);
      _mm256_storeu_ps(p + j + 8, v[1]);
    }
    for (; j < ncols; j += 8) {
      __m256 v[1] = {simd::v_load8(p + j, ncols - j)};
      if (bias) v[0] = _mm256_add_ps(v[0], simd::v_load8(bias + j, ncols - j));
      f.template apply<1>(v, j, ncols - j);
      simd::v_store8(p + j, ncols - j, v[0]);
    }
  }
}

// `S` on U vectors (rows_by_two_avx2's `f`).
template <Streamed S>
struct StreamedOp {
  template <int U>
  KILN_AVX2 inline __attribute__((always_inline)) void apply(__m256* v, int64_t, int64_t) const {
    static_assert(S != Streamed::none);
    if constexpr (S == Streamed::swish) {
      v_swish8_n<U>(v);
    } else if constexpr (S == Streamed::hardswish) {  // ONNX's
      const __m256 sixth = _mm256_set1_ps(1.0f / 6.0f), half = _mm256_set1_ps(0.5f);
      for (int i = 0; i < U; ++i) v[i] = v_hardswish8(v[i], sixth, half);
    } else {
      v_gelu_erf8_n<U>(v);
    }
  }
};

// `S` over rows [0, rows) x cols [0, ncols) of c, two vectors at a time, streamed: a Swish 3.3
// ns a vector where the op loop of apply_epilogue_avx2 takes 4.6 and chunks of 16 vectors through
// an array 5.8 (Zen 2, 48 x 96 in L1); GELU 4.0 where chunks took 6.2. (Four at a time, from
// memory, ran 12: the compiler moved the array in halves.)
KILN_AVX2 void stream_rows_avx2(Streamed s, float* c, int64_t rows, int64_t ncols, int64_t ldc) {
  if (s == Streamed::swish) rows_by_two_avx2(c, rows, ncols, ldc, nullptr, StreamedOp<Streamed::swish>{});
  else if (s == Streamed::gelu_erf) rows_by_two_avx2(c, rows, ncols, ldc, nullptr, StreamedOp<Streamed::gelu_erf>{});
  else if (s == Streamed::hardswish) rows_by_two_avx2(c, rows, ncols, ldc, nullptr, StreamedOp<Streamed::hardswish>{});
}

// The epilogue's ops, in order, on U vectors in registers whose first column is `col` (of the
// operands) and of which `left` columns are stored.
template <int U>
KILN_AVX2 inline __attribute__((always_inline)) void ops8_u(__m256* v, const Epilogue& ep, int64_t col, int64_t left) {
  for (const EpilogueOp& op : ep.ops) {
    if (op.kind == EpilogueOp::Kind::eltwise) {
      eltwise8_u<U>(v, op);
      continue;
    }
    for (int i = 0; i < U; ++i) v[i] = v_binary8(v[i], op, col + 8 * i, left - 8 * i);
  }
}
// The epilogue's ops (rows_by_two_avx2's `f`).
struct EpilogueOps {
  const Epilogue& ep;
  template <int U>
  KILN_AVX2 inline __attribute__((always_inline)) void apply(__m256* v, int64_t col, int64_t left) const {
    ops8_u<U>(v, ep, col, left);
  }
};

// One step of K for the AVX2 block: a row of the pass's NV vectors of B (`bk`, groups `gstride`
// floats apart) times the element of A at `ak` in each of the MR rows (lda apart), into the
// MR x NV accumulators.
template <int MR, int NV>
KILN_AVX2 inline __attribute__((always_inline)) void fma_step(const float* ak, int64_t lda, const float* bk,
                                                               int64_t gstride, __m256 (&acc)[MR][NV]) {
  __m256 bv[NV];
#pragma GCC unroll 8
  for (int j = 0; j < NV; ++j) bv[j] = _mm256_loadu_ps(bk + j / 2 * gstride + j % 2 * 8);
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    const __m256 av = _mm256_broadcast_ss(ak + r * lda);
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) acc[r][j] = _mm256_fmadd_ps(av, bv[j], acc[r][j]);
  }
}

// The full AVX2 block's loop over K, 4 steps per iteration, `steps4` iterations: rows [0, 6)
// of A (lda floats apart, from `a`) times a group's 16 columns ([k][16] from `b`), into the 12
// accumulators, which stay in registers before and after it (operands of the asm, not memory).
// Written out because GCC, given the unrolled loop in C++, hoists the loads of B ahead, runs out
// of the 16 registers and spills accumulators, or recomputes the rows' addresses at every step.
// Rows 0-2 are addressed from `a`, rows 3-5 from a + 3 lda, both with lda in bytes as index.
KILN_AVX2 inline __attribute__((always_inline)) void k4_6x16(const float* a, int64_t lda, const float* b,
                                                              int64_t steps4, __m256 (&acc)[6][2], const char* pf) {
  const float* a3 = a + 3 * lda;
  const int64_t ldb = lda * static_cast<int64_t>(sizeof(float));
  __m256 c0 = acc[0][0], c1 = acc[0][1], c2 = acc[1][0], c3 = acc[1][1], c4 = acc[2][0], c5 = acc[2][1];
  __m256 c6 = acc[3][0], c7 = acc[3][1], c8 = acc[4][0], c9 = acc[4][1], c10 = acc[5][0], c11 = acc[5][1];
  // accumulators acc[r][j] in %[c(2r + j)], B in ymm12-13, A broadcast in ymm14-15
#define KILN_STEP(OA, OB)                            \
  "vmovups " #OB "(%[b]), %%ymm12\n\t"               \
  "vmovups " #OB "+32(%[b]), %%ymm13\n\t"            \
  "vbroadcastss " #OA "(%[a]), %%ymm14\n\t"          \
  "vbroadcastss " #OA "(%[a],%[l],1), %%ymm15\n\t"   \
  "vfmadd231ps %%ymm12, %%ymm14, %[c0]\n\t"          \
  "vfmadd231ps %%ymm13, %%ymm14, %[c1]\n\t"          \
  "vbroadcastss " #OA "(%[a],%[l],2), %%ymm14\n\t"   \
  "vfmadd231ps %%ymm12, %%ymm15, %[c2]\n\t"          \
  "vfmadd231ps %%ymm13, %%ymm15, %[c3]\n\t"          \
  "vbroadcastss " #OA "(%[a3]), %%ymm15\n\t"         \
  "vfmadd231ps %%ymm12, %%ymm14, %[c4]\n\t"          \
  "vfmadd231ps %%ymm13, %%ymm14, %[c5]\n\t"          \
  "vbroadcastss " #OA "(%[a3],%[l],1), %%ymm14\n\t"  \
  "vfmadd231ps %%ymm12, %%ymm15, %[c6]\n\t"          \
  "vfmadd231ps %%ymm13, %%ymm15, %[c7]\n\t"          \
  "vbroadcastss " #OA "(%[a3],%[l],2), %%ymm15\n\t"  \
  "vfmadd231ps %%ymm12, %%ymm14, %[c8]\n\t"          \
  "vfmadd231ps %%ymm13, %%ymm14, %[c9]\n\t"          \
  "vfmadd231ps %%ymm12, %%ymm15, %[c10]\n\t"         \
  "vfmadd231ps %%ymm13, %%ymm15, %[c11]\n\t"
  // one asm statement per 4 steps (12 accumulators in and out are 24 of the 30 operands an asm
  // may have: the loop's pointers are inputs, stepped here)
  for (int64_t i = 0; i < steps4; ++i, a += 4, a3 += 4, b += 64, pf += 128)
    asm volatile(KILN_STEP(0, 0) KILN_STEP(4, 64) "prefetcht1 (%[pf])\n\t" KILN_STEP(8, 128) KILN_STEP(12, 192)
                 "prefetcht1 64(%[pf])\n\t"
                 : [c0] "+x"(c0), [c1] "+x"(c1), [c2] "+x"(c2), [c3] "+x"(c3), [c4] "+x"(c4), [c5] "+x"(c5),
                   [c6] "+x"(c6), [c7] "+x"(c7), [c8] "+x"(c8), [c9] "+x"(c9), [c10] "+x"(c10), [c11] "+x"(c11)
                 : [a] "r"(a), [a3] "r"(a3), [b] "r"(b), [l] "r"(ldb), [pf] "r"(pf)
                 : "xmm12", "xmm13", "xmm14", "xmm15", "memory");
#undef KILN_STEP
  acc[0][0] = c0, acc[0][1] = c1, acc[1][0] = c2, acc[1][1] = c3, acc[2][0] = c4, acc[2][1] = c5;
  acc[3][0] = c6, acc[3][1] = c7, acc[4][0] = c8, acc[4][1] = c9, acc[5][0] = c10, acc[5][1] = c11;
}

// The epilogue of an AVX2 pass whose ops are not all clamps: `out` [rows][NV] the products, nv
// of the NV vectors with columns (`ncols` from the pass's first on); C added (unless `first`
// without accumulate), the bias, the ops, stored. `n0`: the pass's first column in the operands.
KILN_AVX2 void epilogue_in_memory_avx2(__m256* out, int rows, int NV, int nv, float* c, int64_t ldc, int64_t ncols,
                                       int64_t n0, bool first, const Epilogue& ep) {
  for (int j = 0; j < nv; ++j) {
    const int64_t col = j * 8, left = ncols - col;  // masked moves only for a last partial vector
    const __m256 bias = ep.bias ? simd::v_load8(ep.bias + n0 + col, left) : _mm256_setzero_ps();
    for (int r = 0; r < rows; ++r) {
      __m256& v = out[r * NV + j];
      if (!first || ep.accumulate) v = _mm256_add_ps(v, simd::v_load8(c + r * ldc + col, left));
      v = _mm256_add_ps(v, bias);
    }
  }
  for (const EpilogueOp& op : ep.ops) {
    if (op.kind == EpilogueOp::Kind::eltwise) {
      eltwise8_n(out, rows * NV, op);  // the vectors without columns too: never stored
      continue;
    }
    for (int j = 0; j < nv; ++j)
      for (int r = 0; r < rows; ++r) out[r * NV + j] = v_binary8(out[r * NV + j], op, n0 + j * 8, ncols - j * 8);
  }
  for (int j = 0; j < nv; ++j)
    for (int r = 0; r < rows; ++r) simd::v_store8(c + r * ldc + j * 8, ncols - j * 8, out[r * NV + j]);
}

// The AVX2 pass's store where its epilogue stays in registers: the nv vectors with columns of
// each row (`ncols` from the pass's first on), C added (ADD_C), the bias (ADD_BIAS, from
// `bias`, the pass's first column), clamped to [lo, hi] (CLAMP).
template <int MR, int NV, bool ADD_C, bool ADD_BIAS, bool CLAMP>
KILN_AVX2 inline __attribute__((always_inline)) void store_block_avx2(const __m256 (&acc)[MR][NV], int nv, float* c,
                                                                       int64_t ldc, int64_t ncols, const float* bias,
                                                                       __m256 lo, __m256 hi) {
#pragma GCC unroll 8
  for (int j = 0; j < NV; ++j) {
    if (j >= nv) break;
    const int64_t col = j * 8, left = ncols - col;
    __m256 b = _mm256_setzero_ps();
    if constexpr (ADD_BIAS) b = simd::v_load8(bias + col, left);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      float* cr = c + r * ldc + col;
      __m256 v = acc[r][j];
      if constexpr (ADD_C) v = _mm256_add_ps(v, simd::v_load8(cr, left));
      if constexpr (ADD_BIAS) v = _mm256_add_ps(v, b);
      if constexpr (CLAMP) v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
      simd::v_store8(cr, left, v);
    }
  }
}

// The two asm passes below (pass_6x16_asm, pass_6x8_asm) address a block's 6 rows of A and C
// from a and c (rows 0-2) and a3 and c3 (rows 3-5), the row strides in bytes (la, lc) as index
// at scale 1 and 2; K goes in n4 steps of 4, then n1 single steps. Their `flags`: bit 0 adds C,
// bit 1 starts from the bias, bit 2 clamps from below to lohi[0], bit 3 from above to lohi[1].
struct AsmBlock {
  const float* a3;
  float* c3;
  int64_t la, lc, n4, n1;
  AsmBlock(const float* a, int64_t lda, float* c, int64_t ldc, int64_t kc)
      : a3(a + 3 * lda), c3(c + 3 * ldc), la(lda * 4), lc(ldc * 4), n4(kc / 4), n1(kc % 4) {}
};
// asm text shared by the two passes: a register zeroed or copied; six registers, one a row of C
// (at byte offset OFF), stored there or with C added to them; the clamps (MAXES, MINS: the
// passes' vmaxps / vminps of every accumulator with ymm14 / ymm15)
#define KILN_XOR(R) "vxorps %%ymm" #R ", %%ymm" #R ", %%ymm" #R "\n\t"
#define KILN_COPY(S, R) "vmovaps %%ymm" #S ", %%ymm" #R "\n\t"
#define KILN_STORE6(OFF, R0, R1, R2, R3, R4, R5)                                                           \
  "vmovups %%ymm" #R0 ", " #OFF "(%[c])\n\t"                                                               \
  "vmovups %%ymm" #R1 ", " #OFF "(%[c],%[lc],1)\n\t"                                                       \
  "vmovups %%ymm" #R2 ", " #OFF "(%[c],%[lc],2)\n\t"                                                       \
  "vmovups %%ymm" #R3 ", " #OFF "(%[c3])\n\t"                                                              \
  "vmovups %%ymm" #R4 ", " #OFF "(%[c3],%[lc],1)\n\t"                                                      \
  "vmovups %%ymm" #R5 ", " #OFF "(%[c3],%[lc],2)\n\t"
#define KILN_ADD_C6(OFF, R0, R1, R2, R3, R4, R5)                                                           \
  "vaddps " #OFF "(%[c]), %%ymm" #R0 ", %%ymm" #R0 "\n\t"                                                  \
  "vaddps " #OFF "(%[c],%[lc],1), %%ymm" #R1 ", %%ymm" #R1 "\n\t"                                          \
  "vaddps " #OFF "(%[c],%[lc],2), %%ymm" #R2 ", %%ymm" #R2 "\n\t"                                          \
  "vaddps " #OFF "(%[c3]), %%ymm" #R3 ", %%ymm" #R3 "\n\t"                                                 \
  "vaddps " #OFF "(%[c3],%[lc],1), %%ymm" #R4 ", %%ymm" #R4 "\n\t"                                         \
  "vaddps " #OFF "(%[c3],%[lc],2), %%ymm" #R5 ", %%ymm" #R5 "\n\t"
#define KILN_OP6(OP, S, R0, R1, R2, R3, R4, R5)                                                            \
  OP " %%ymm" #S ", %%ymm" #R0 ", %%ymm" #R0 "\n\t" OP " %%ymm" #S ", %%ymm" #R1 ", %%ymm" #R1 "\n\t"     \
  OP " %%ymm" #S ", %%ymm" #R2 ", %%ymm" #R2 "\n\t" OP " %%ymm" #S ", %%ymm" #R3 ", %%ymm" #R3 "\n\t"     \
  OP " %%ymm" #S ", %%ymm" #R4 ", %%ymm" #R4 "\n\t" OP " %%ymm" #S ", %%ymm" #R5 ", %%ymm" #R5 "\n\t"
#define KILN_CLAMPS(MAXES, MINS)                                                                           \
  "test $4, %[fl]\n\t"                                                                                     \
  "jz 6f\n\t"                                                                                              \
  "vbroadcastss (%[lohi]), %%ymm14\n\t" MAXES                                                              \
  "6:\n\t"                                                                                                 \
  "test $8, %[fl]\n\t"                                                                                     \
  "jz 7f\n\t"                                                                                              \
  "vbroadcastss 4(%[lohi]), %%ymm15\n\t" MINS "7:\n\t"
// the steps of K after the last 4, one at a time (BODY: a step at a, a3 and b)
#define KILN_STEPS1(BODY)                                                                                  \
  "test %[n1], %[n1]\n\t"                                                                                 \
  "jz 4f\n\t"                                                                                              \
  "3:\n\t" BODY                                                                                            \
  "add $4, %[a]\n\t"                                                                                       \
  "add $4, %[a3]\n\t"                                                                                      \
  "add $64, %[b]\n\t"                                                                                      \
  "dec %[n1]\n\t"                                                                                          \
  "jnz 3b\n\t"                                                                                             \
  "4:\n\t"
#define KILN_ASM_OPERANDS                                                                                  \
  : [a] "+r"(a), [a3] "+r"(k.a3), [b] "+r"(b), [n4] "+r"(k.n4), [n1] "+r"(k.n1)                           \
  : [la] "r"(k.la), [c] "r"(c), [c3] "r"(k.c3), [lc] "r"(k.lc), [bias] "r"(bias), [lohi] "r"(lohi),        \
    [fl] "r"(flags), [pf] "r"(pf)                                                                          \
  : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", \
    "xmm13", "xmm14", "xmm15", "memory", "cc"

// The asm passes' `flags` for an epilogue in registers: C added, the bias, and the clamps that
// [lo, hi] holds (an infinite end clamps nothing)
inline int64_t asm_flags(bool add_c, bool add_bias, float lo, float hi) {
  return (add_c ? 1 : 0) | (add_bias ? 2 : 0) | (lo > -INFINITY ? 4 : 0) | (hi < INFINITY ? 8 : 0);
}

// A whole pass of the full AVX2 block (6 rows x 16 columns, every column there, the epilogue in
// registers) as one asm statement: the accumulators set to the bias or zero, K in steps of 4
// then 1, C added, clamped, stored (AsmBlock's flags). The accumulators are ymm0-11 (acc[r][j]
// in ymm(2r + j)), B in ymm12-13, A in ymm14-15. Where K is short (a 1x1 convolution over 32
// channels: 8 iterations of 4 steps), the C++ pass around k4_6x16 spent a fifth of its time
// outside the products: the 12 rows' C pointers and the pass's state kept on the stack, the
// accumulators moved in and out of the asm. `pf`: two lines prefetched a 4 steps, 128 bytes on
// each time (the panel's next lines, or B's own).
KILN_AVX2 inline __attribute__((always_inline)) void pass_6x16_asm(const float* a, int64_t lda, const float* b,
                                                                    int64_t kc, float* c, int64_t ldc,
                                                                    const float* bias, const float* lohi,
                                                                    int64_t flags, const char* pf) {
  AsmBlock k(a, lda, c, ldc, kc);
#define KILN_STEP(OA, OB)                            \
  "vmovups " #OB "(%[b]), %%ymm12\n\t"               \
  "vmovups " #OB "+32(%[b]), %%ymm13\n\t"            \
  "vbroadcastss " #OA "(%[a]), %%ymm14\n\t"          \
  "vbroadcastss " #OA "(%[a],%[la],1), %%ymm15\n\t"  \
  "vfmadd231ps %%ymm12, %%ymm14, %%ymm0\n\t"         \
  "vfmadd231ps %%ymm13, %%ymm14, %%ymm1\n\t"         \
  "vbroadcastss " #OA "(%[a],%[la],2), %%ymm14\n\t"  \
  "vfmadd231ps %%ymm12, %%ymm15, %%ymm2\n\t"         \
  "vfmadd231ps %%ymm13, %%ymm15, %%ymm3\n\t"         \
  "vbroadcastss " #OA "(%[a3]), %%ymm15\n\t"         \
  "vfmadd231ps %%ymm12, %%ymm14, %%ymm4\n\t"         \
  "vfmadd231ps %%ymm13, %%ymm14, %%ymm5\n\t"         \
  "vbroadcastss " #OA "(%[a3],%[la],1), %%ymm14\n\t" \
  "vfmadd231ps %%ymm12, %%ymm15, %%ymm6\n\t"         \
  "vfmadd231ps %%ymm13, %%ymm15, %%ymm7\n\t"         \
  "vbroadcastss " #OA "(%[a3],%[la],2), %%ymm15\n\t" \
  "vfmadd231ps %%ymm12, %%ymm14, %%ymm8\n\t"         \
  "vfmadd231ps %%ymm13, %%ymm14, %%ymm9\n\t"         \
  "vfmadd231ps %%ymm12, %%ymm15, %%ymm10\n\t"        \
  "vfmadd231ps %%ymm13, %%ymm15, %%ymm11\n\t"
  asm volatile(
      "test $2, %[fl]\n\t"
      "jz 8f\n\t"
      "vmovups (%[bias]), %%ymm0\n\t"
      "vmovups 32(%[bias]), %%ymm1\n\t" KILN_COPY(0, 2) KILN_COPY(1, 3) KILN_COPY(0, 4) KILN_COPY(1, 5) KILN_COPY(0, 6)
          KILN_COPY(1, 7) KILN_COPY(0, 8) KILN_COPY(1, 9) KILN_COPY(0, 10) KILN_COPY(1, 11)
      "jmp 9f\n\t"
      "8:\n\t" KILN_XOR(0) KILN_XOR(1) KILN_XOR(2) KILN_XOR(3) KILN_XOR(4) KILN_XOR(5) KILN_XOR(6) KILN_XOR(7)
          KILN_XOR(8) KILN_XOR(9) KILN_XOR(10) KILN_XOR(11)
      "9:\n\t"
      "mov %[pf], %%r11\n\t"
      "test %[n4], %[n4]\n\t"
      "jz 2f\n\t"
      "1:\n\t" KILN_STEP(0, 0) KILN_STEP(4, 64) "prefetcht1 (%%r11)\n\t" KILN_STEP(8, 128) KILN_STEP(12, 192)
      "prefetcht1 64(%%r11)\n\t"
      "add $16, %[a]\n\t"
      "add $16, %[a3]\n\t"
      "add $256, %[b]\n\t"
      "add $128, %%r11\n\t"
      "dec %[n4]\n\t"
      "jnz 1b\n\t"
      "2:\n\t" KILN_STEPS1(KILN_STEP(0, 0))
      "test $1, %[fl]\n\t"
      "jz 5f\n\t" KILN_ADD_C6(0, 0, 2, 4, 6, 8, 10) KILN_ADD_C6(32, 1, 3, 5, 7, 9, 11)
      "5:\n\t" KILN_CLAMPS(KILN_OP6("vmaxps", 14, 0, 2, 4, 6, 8, 10) KILN_OP6("vmaxps", 14, 1, 3, 5, 7, 9, 11),
                           KILN_OP6("vminps", 15, 0, 2, 4, 6, 8, 10) KILN_OP6("vminps", 15, 1, 3, 5, 7, 9, 11))
          KILN_STORE6(0, 0, 2, 4, 6, 8, 10) KILN_STORE6(32, 1, 3, 5, 7, 9, 11) KILN_ASM_OPERANDS, "r11");
}

// The same for a last group of 8 columns (a panel of 40, 104 or 440 columns): 6 rows x 8
// columns in two sets of accumulators, even steps of K into ymm0-5, odd ones into ymm6-11 (12
// chains in flight, as the full pass has), summed before the epilogue. Through block_avx2 such a
// group took a full pass of 16 columns, half of them padding.
KILN_AVX2 inline __attribute__((always_inline)) void pass_6x8_asm(const float* a, int64_t lda, const float* b,
                                                                   int64_t kc, float* c, int64_t ldc,
                                                                   const float* bias, const float* lohi,
                                                                   int64_t flags) {
  AsmBlock k(a, lda, c, ldc, kc);
  const char* pf = nullptr;  // (no prefetch: KILN_ASM_OPERANDS names it)
  // steps k (even, B row in ymm12, into ymm0-5) and k + 1 (odd, ymm13, into ymm6-11) at A
  // offset OA, B offset OB (a row of a group: 64 bytes)
#define KILN_STEP2(OA, OB)                              \
  "vmovups " #OB "(%[b]), %%ymm12\n\t"                  \
  "vmovups " #OB "+64(%[b]), %%ymm13\n\t"               \
  "vbroadcastss " #OA "(%[a]), %%ymm14\n\t"             \
  "vbroadcastss " #OA "+4(%[a]), %%ymm15\n\t"           \
  "vfmadd231ps %%ymm12, %%ymm14, %%ymm0\n\t"            \
  "vfmadd231ps %%ymm13, %%ymm15, %%ymm6\n\t"            \
  "vbroadcastss " #OA "(%[a],%[la],1), %%ymm14\n\t"     \
  "vbroadcastss " #OA "+4(%[a],%[la],1), %%ymm15\n\t"   \
  "vfmadd231ps %%ymm12, %%ymm14, %%ymm1\n\t"            \
  "vfmadd231ps %%ymm13, %%ymm15, %%ymm7\n\t"            \
  "vbroadcastss " #OA "(%[a],%[la],2), %%ymm14\n\t"     \
  "vbroadcastss " #OA "+4(%[a],%[la],2), %%ymm15\n\t"   \
  "vfmadd231ps %%ymm12, %%ymm14, %%ymm2\n\t"            \
  "vfmadd231ps %%ymm13, %%ymm15, %%ymm8\n\t"            \
  "vbroadcastss " #OA "(%[a3]), %%ymm14\n\t"            \
  "vbroadcastss " #OA "+4(%[a3]), %%ymm15\n\t"          \
  "vfmadd231ps %%ymm12, %%ymm14, %%ymm3\n\t"            \
  "vfmadd231ps %%ymm13, %%ymm15, %%ymm9\n\t"            \
  "vbroadcastss " #OA "(%[a3],%[la],1), %%ymm14\n\t"    \
  "vbroadcastss " #OA "+4(%[a3],%[la],1), %%ymm15\n\t"  \
  "vfmadd231ps %%ymm12, %%ymm14, %%ymm4\n\t"            \
  "vfmadd231ps %%ymm13, %%ymm15, %%ymm10\n\t"           \
  "vbroadcastss " #OA "(%[a3],%[la],2), %%ymm14\n\t"    \
  "vbroadcastss " #OA "+4(%[a3],%[la],2), %%ymm15\n\t"  \
  "vfmadd231ps %%ymm12, %%ymm14, %%ymm5\n\t"            \
  "vfmadd231ps %%ymm13, %%ymm15, %%ymm11\n\t"
  // one step k into the even set (the steps after the last 4)
#define KILN_STEP1(R, ADDR) "vbroadcastss " ADDR ", %%ymm14\n\tvfmadd231ps %%ymm12, %%ymm14, %%ymm" #R "\n\t"
  asm volatile(
      KILN_XOR(6) KILN_XOR(7) KILN_XOR(8) KILN_XOR(9) KILN_XOR(10) KILN_XOR(11)
      "test $2, %[fl]\n\t"
      "jz 8f\n\t"
      "vmovups (%[bias]), %%ymm0\n\t" KILN_COPY(0, 1) KILN_COPY(0, 2) KILN_COPY(0, 3) KILN_COPY(0, 4) KILN_COPY(0, 5)
      "jmp 9f\n\t"
      "8:\n\t" KILN_XOR(0) KILN_XOR(1) KILN_XOR(2) KILN_XOR(3) KILN_XOR(4) KILN_XOR(5)
      "9:\n\t"
      "test %[n4], %[n4]\n\t"
      "jz 2f\n\t"
      "1:\n\t" KILN_STEP2(0, 0) KILN_STEP2(8, 128)
      "add $16, %[a]\n\t"
      "add $16, %[a3]\n\t"
      "add $256, %[b]\n\t"
      "dec %[n4]\n\t"
      "jnz 1b\n\t"
      "2:\n\t" KILN_STEPS1("vmovups (%[b]), %%ymm12\n\t" KILN_STEP1(0, "(%[a])") KILN_STEP1(1, "(%[a],%[la],1)")
                                 KILN_STEP1(2, "(%[a],%[la],2)") KILN_STEP1(3, "(%[a3])")
                                     KILN_STEP1(4, "(%[a3],%[la],1)") KILN_STEP1(5, "(%[a3],%[la],2)"))
      "vaddps %%ymm6, %%ymm0, %%ymm0\n\t"
      "vaddps %%ymm7, %%ymm1, %%ymm1\n\t"
      "vaddps %%ymm8, %%ymm2, %%ymm2\n\t"
      "vaddps %%ymm9, %%ymm3, %%ymm3\n\t"
      "vaddps %%ymm10, %%ymm4, %%ymm4\n\t"
      "vaddps %%ymm11, %%ymm5, %%ymm5\n\t"
      "test $1, %[fl]\n\t"
      "jz 5f\n\t" KILN_ADD_C6(0, 0, 1, 2, 3, 4, 5)
      "5:\n\t" KILN_CLAMPS(KILN_OP6("vmaxps", 14, 0, 1, 2, 3, 4, 5), KILN_OP6("vminps", 15, 0, 1, 2, 3, 4, 5))
          KILN_STORE6(0, 0, 1, 2, 3, 4, 5) KILN_ASM_OPERANDS);
#undef KILN_STEP2
#undef KILN_STEP1
}
// The two passes into channel blocks below: the 12 accumulators from the bias or zero (flags
// bit 1); their rows of C, the even accumulators at c, the odd ones at c2, a row 32 bytes on;
// C added (bit 0), the clamps (bits 2, 3), the store; what they clobber.
#define KILN_INIT12                                                                                     \
  "test $2, %[fl]\n\t"                                                                                  \
  "jz 8f\n\t"                                                                                           \
  "vmovups (%[bias]), %%ymm0\n\t"                                                                       \
  "vmovups 32(%[bias]), %%ymm1\n\t" KILN_COPY(0, 2) KILN_COPY(1, 3) KILN_COPY(0, 4) KILN_COPY(1, 5)      \
      KILN_COPY(0, 6) KILN_COPY(1, 7) KILN_COPY(0, 8) KILN_COPY(1, 9) KILN_COPY(0, 10) KILN_COPY(1, 11) \
  "jmp 9f\n\t"                                                                                          \
  "8:\n\t" KILN_XOR(0) KILN_XOR(1) KILN_XOR(2) KILN_XOR(3) KILN_XOR(4) KILN_XOR(5) KILN_XOR(6)          \
      KILN_XOR(7) KILN_XOR(8) KILN_XOR(9) KILN_XOR(10) KILN_XOR(11)                                    \
  "9:\n\t"
#define KILN_BROWS(OP)                                                                                 \
  OP("(%[c])", 0) OP("32(%[c])", 2) OP("64(%[c])", 4) OP("96(%[c])", 6) OP("128(%[c])", 8)              \
  OP("160(%[c])", 10) OP("(%[c2])", 1) OP("32(%[c2])", 3) OP("64(%[c2])", 5) OP("96(%[c2])", 7)         \
  OP("128(%[c2])", 9) OP("160(%[c2])", 11)
#define KILN_BADD(M, R) "vaddps " M ", %%ymm" #R ", %%ymm" #R "\n\t"
#define KILN_BSTORE(M, R) "vmovups %%ymm" #R ", " M "\n\t"
#define KILN_BLOCKS_OUT                                                                                 \
  "test $1, %[fl]\n\t"                                                                                  \
  "jz 5f\n\t" KILN_BROWS(KILN_BADD)                                                                     \
  "5:\n\t" KILN_CLAMPS(KILN_OP6("vmaxps", 14, 0, 2, 4, 6, 8, 10) KILN_OP6("vmaxps", 14, 1, 3, 5, 7, 9, 11), \
                       KILN_OP6("vminps", 15, 0, 2, 4, 6, 8, 10) KILN_OP6("vminps", 15, 1, 3, 5, 7, 9, 11))  \
      KILN_BROWS(KILN_BSTORE)
#define KILN_CLOBBER12                                                                                 \
  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", \
      "xmm13", "xmm14", "xmm15", "memory", "cc"

// A 6-pixel x 16-channel block of a 1x1 convolution over channel blocks of 8 (nChw8c in and
// out): A's rows are 6 consecutive pixels of a plane (32 bytes apart), its K in planes of 8
// channels `pa` bytes apart, each plane's 8 steps at offsets 0-28 of the row; C's 16 columns are
// two channel blocks of the output, rows 32 bytes apart from `c` (the first 8) and `c2` (the
// next 8). No gather into rows, no scatter back: the convolution reads and writes the blocks
// themselves. Accumulators as pass_6x16_asm's (acc[r][j] in ymm(2r + j)), the same `flags`;
// n8: K / 8 (at least 1).
KILN_AVX2 inline __attribute__((always_inline)) void pass_6x16_blocked8_asm(const float* a, int64_t pa,
                                                                             const float* b, int64_t n8, float* c,
                                                                             float* c2, const float* bias,
                                                                             const float* lohi, int64_t flags) {
#define KILN_BSTEP(OA, OB)                          \
  "vmovups " #OB "(%[b]), %%ymm12\n\t"              \
  "vmovups " #OB "+32(%[b]), %%ymm13\n\t"           \
  "vbroadcastss " #OA "(%[a]), %%ymm14\n\t"         \
  "vbroadcastss " #OA "+32(%[a]), %%ymm15\n\t"      \
  "vfmadd231ps %%ymm12, %%ymm14, %%ymm0\n\t"        \
  "vfmadd231ps %%ymm13, %%ymm14, %%ymm1\n\t"        \
  "vbroadcastss " #OA "+64(%[a]), %%ymm14\n\t"      \
  "vfmadd231ps %%ymm12, %%ymm15, %%ymm2\n\t"        \
  "vfmadd231ps %%ymm13, %%ymm15, %%ymm3\n\t"        \
  "vbroadcastss " #OA "+96(%[a]), %%ymm15\n\t"      \
  "vfmadd231ps %%ymm12, %%ymm14, %%ymm4\n\t"        \
  "vfmadd231ps %%ymm13, %%ymm14, %%ymm5\n\t"        \
  "vbroadcastss " #OA "+128(%[a]), %%ymm14\n\t"     \
  "vfmadd231ps %%ymm12, %%ymm15, %%ymm6\n\t"        \
  "vfmadd231ps %%ymm13, %%ymm15, %%ymm7\n\t"        \
  "vbroadcastss " #OA "+160(%[a]), %%ymm15\n\t"     \
  "vfmadd231ps %%ymm12, %%ymm14, %%ymm8\n\t"        \
  "vfmadd231ps %%ymm13, %%ymm14, %%ymm9\n\t"        \
  "vfmadd231ps %%ymm12, %%ymm15, %%ymm10\n\t"       \
  "vfmadd231ps %%ymm13, %%ymm15, %%ymm11\n\t"
  asm volatile(
      KILN_INIT12
      "1:\n\t" KILN_BSTEP(0, 0) KILN_BSTEP(4, 64) KILN_BSTEP(8, 128) KILN_BSTEP(12, 192) KILN_BSTEP(16, 256)
          KILN_BSTEP(20, 320) KILN_BSTEP(24, 384) KILN_BSTEP(28, 448)
      "add %[pa], %[a]\n\t"
      "add $512, %[b]\n\t"
      "dec %[n8]\n\t"
      "jnz 1b\n\t"
      KILN_BLOCKS_OUT
      : [a] "+r"(a), [b] "+r"(b), [n8] "+r"(n8)
      : [pa] "r"(pa), [c] "r"(c), [c2] "r"(c2), [bias] "r"(bias), [lohi] "r"(lohi), [fl] "r"(flags)
      : KILN_CLOBBER12);
#undef KILN_BSTEP
}

// pass_6x16_asm's A (rows `lda` apart, K in steps of 4 then 1: its KILN_STEP) into pass_6x16_blocked8_asm's C
// (two channel blocks of 8, rows 32 bytes apart from c and c2): an im2col row block's product
// stored straight into the output's channel blocks. No prefetch of a next panel.
KILN_AVX2 inline __attribute__((always_inline)) void pass_6x16_to_blocked8_asm(const float* a, int64_t lda,
                                                                                const float* b, int64_t kc, float* c,
                                                                                float* c2, const float* bias,
                                                                                const float* lohi, int64_t flags) {
  const float* a3 = a + 3 * lda;
  int64_t n4 = kc / 4, n1 = kc % 4;
  const int64_t la = lda * 4;
  asm volatile(
      KILN_INIT12
      "test %[n4], %[n4]\n\t"
      "jz 2f\n\t"
      "1:\n\t" KILN_STEP(0, 0) KILN_STEP(4, 64) KILN_STEP(8, 128) KILN_STEP(12, 192)
      "add $16, %[a]\n\t"
      "add $16, %[a3]\n\t"
      "add $256, %[b]\n\t"
      "dec %[n4]\n\t"
      "jnz 1b\n\t"
      "2:\n\t"
      "test %[n1], %[n1]\n\t"
      "jz 4f\n\t"
      "3:\n\t" KILN_STEP(0, 0)
      "add $4, %[a]\n\t"
      "add $4, %[a3]\n\t"
      "add $64, %[b]\n\t"
      "dec %[n1]\n\t"
      "jnz 3b\n\t"
      "4:\n\t"
      KILN_BLOCKS_OUT
      : [a] "+r"(a), [a3] "+r"(a3), [b] "+r"(b), [n4] "+r"(n4), [n1] "+r"(n1)
      : [la] "r"(la), [c] "r"(c), [c2] "r"(c2), [bias] "r"(bias), [lohi] "r"(lohi), [fl] "r"(flags)
      : KILN_CLOBBER12);
}

#undef KILN_STEP
#undef KILN_INIT12
#undef KILN_BROWS
#undef KILN_BADD
#undef KILN_BSTORE
#undef KILN_BLOCKS_OUT
#undef KILN_CLOBBER12
#undef KILN_XOR
#undef KILN_COPY
#undef KILN_STORE6
#undef KILN_ADD_C6
#undef KILN_OP6
#undef KILN_CLAMPS
#undef KILN_STEPS1
#undef KILN_ASM_OPERANDS

// Whether the AVX2 block of MR x NV runs the written-out loop (k4_6x16), which prefetches the
// next panel as it goes: block_avx2 spreads those lines over its passes only for it.
template <int MR, int NV>
constexpr bool kAvx2Full = MR == 6 && NV == 2;

// One pass of the AVX2 block: rows [0, MR) times NV vectors of 8 columns from `bg` (the pass's
// first group of 16, groups `gstride` floats apart), into C from `c` (the pass's first column,
// `ncols` from it on, column n0 of the operands); the epilogue in registers (IN_REGISTERS: it
// only adds C and the bias and clamps to [lo, hi]) or through memory. As the AVX-512 block's
// body: straight-line code per case, every loop over the accumulators unrolled, so that they
// stay in registers from the first product to the store (kept on the stack around the K loop
// and the epilogue, K = 16, N = 96 ran at 62 GF/s a core).
template <int MR, int NV, bool IN_REGISTERS>
KILN_AVX2 inline __attribute__((always_inline)) void pass_avx2(const float* a, int64_t lda, const float* bg,
                                                                int64_t gstride, int64_t kc, float* c, int64_t ldc,
                                                                int64_t ncols, int64_t n0, bool first, bool last,
                                                                const Epilogue& ep, const char* pf, float lo, float hi) {
  if constexpr (kAvx2Full<MR, NV> && IN_REGISTERS) {  // most of the work: the whole pass in one asm
    if (ncols >= 16) {
      // (lo, hi: infinite unless the last slice's ops are clamps)
      const bool add_bias = last && ep.bias;
      const float lohi[2] = {lo, hi};
      pass_6x16_asm(a, lda, bg, kc, c, ldc, add_bias ? ep.bias + n0 : nullptr, lohi,
                    asm_flags(!first || ep.accumulate, add_bias, lo, hi), pf);
      return;
    }
  }
  __m256 acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) acc[r][j] = _mm256_setzero_ps();
  int64_t k = 0;
  if constexpr (kAvx2Full<MR, NV>) {
    k = kc / 4 * 4;
    if (k > 0) k4_6x16(a, lda, bg, k / 4, acc, pf);
  }
  for (; k < kc; ++k) fma_step<MR, NV>(a + k, lda, bg + k * kGroupAvx2, gstride, acc);
  const int nv = static_cast<int>(std::min<int64_t>(NV, (ncols + 7) / 8));  // vectors with columns
  if constexpr (!IN_REGISTERS) {
    __m256 out[MR * NV];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) out[r * NV + j] = acc[r][j];
    epilogue_in_memory_avx2(out, MR, NV, nv, c, ldc, ncols, n0, first, ep);
  } else {
    const __m256 lov = _mm256_set1_ps(lo), hiv = _mm256_set1_ps(hi);
    const float* bias = ep.bias ? ep.bias + n0 : nullptr;
    const bool add_c = !first || ep.accumulate, add_bias = last && ep.bias, clamp = last && !ep.ops.empty();
    KILN_STORE_CASE(store_block_avx2, MR, NV, add_c, add_bias, clamp, acc, nv, c, ldc, ncols, bias, lov, hiv);
  }
}

#undef KILN_STORE_CASE

// The AVX2 block: as block<MR> (rows [0, MR) of a times a 64-column panel slice), the panel
// taken NV vectors of 8 columns at a time: MR x NV accumulators, at most 12 of the 16
// registers, and at least 8 independent chains where the rows are few (an FMA's latency
// covers 8 in flight). The panel's groups of 16 columns are `gstride` floats apart, each
// [kc][16] from `b` on: a pass reads NV / 2 sequential streams, which the hardware prefetcher
// follows (a software prefetch per row measured no faster on Zen 3).
template <int MR, int NV = (MR >= 4 ? 2 : MR >= 2 ? 4 : 8)>
KILN_AVX2 void block_avx2(const float* a, int64_t lda, const float* b, int64_t gstride, int64_t kc, float* c,
                          int64_t ldc, int64_t ncols, int64_t n0, bool first, bool last, const Epilogue& ep,
                          Prefetch next) {
  static_assert(NV % 2 == 0, "a pass covers whole groups of 16 columns");
  const int64_t passes = (std::min(kPanel, ncols) + NV * 8 - 1) / (NV * 8);
  // the full block spreads `next` over its passes' loops (2 lines per 4 steps of K, so that
  // the misses overlap the products), the rest of it at once; other blocks all at once
  const int64_t spread = kAvx2Full<MR, NV> ? std::min(next.lines, passes * (kc / 4) * 2) : 0;
  Prefetch{next.p + spread * 64, next.lines - spread}.burst();
  // the epilogue in registers where it only adds and clamps, decided before the products
  float lo = -INFINITY, hi = INFINITY;
  const bool in_registers = !last || as_clamp(ep.ops, &lo, &hi);
  for (int64_t sub = 0; sub < kPanel && sub < ncols; sub += NV * 8) {
    const float* bg = b + sub / kGroupAvx2 * gstride;  // the pass's first group
    // this pass's lines of `next`, else B's own (in cache: a prefetch that costs nothing)
    const int64_t mine = sub / (NV * 8) * (kc / 4) * 2;
    const char* pf = mine < spread ? next.p + mine * 64 : reinterpret_cast<const char*>(bg);
    if (in_registers)
      pass_avx2<MR, NV, true>(a, lda, bg, gstride, kc, c + sub, ldc, ncols - sub, n0 + sub, first, last, ep, pf, lo, hi);
    else
      pass_avx2<MR, NV, false>(a, lda, bg, gstride, kc, c + sub, ldc, ncols - sub, n0 + sub, first, last, ep, pf, lo, hi);
  }
}

// One block of `rows` (1..kRows) rows: block<rows, NV> (AVX-512) or block_avx2<rows>.
using BlockFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float*, int64_t, int64_t, int64_t, bool,
                         bool, const Epilogue&, Prefetch);

// A full block of 6 rows on AVX2 with one slice of K (kc = K) and the epilogue in registers
// (`lohi`, `flags`: pass_6x16_asm's, decided once per run): the panel's whole groups of 16
// columns straight on pass_6x16_asm, the rest by `rest` (block_avx2<6>). Through block_avx2, the
// block's setup and the calls around its passes cost a 1x1 convolution over 32 channels a tenth
// of its time.
KILN_AVX2 void lean_block_avx2(const float* a, int64_t lda, const float* panel, int64_t gstride, int64_t kc, float* c,
                               int64_t ldc, int64_t ncols, int64_t n0, const Epilogue& ep, Prefetch next,
                               const float* lohi, int64_t flags, BlockFn rest) {
  const int64_t whole = std::min(kPanel, ncols) / kGroupAvx2 * kGroupAvx2;
  // `next` spread over the passes' loops as block_avx2 does, the rest of it at once
  const int64_t spread = std::min(next.lines, whole / kGroupAvx2 * (kc / 4) * 2);
  Prefetch{next.p + spread * 64, next.lines - spread}.burst();
  for (int64_t sub = 0; sub < whole; sub += kGroupAvx2) {
    const float* bg = panel + sub / kGroupAvx2 * gstride;
    const int64_t mine = sub / kGroupAvx2 * (kc / 4) * 2;  // this pass's lines of `next`, else B's own
    const char* pf = mine < spread ? next.p + mine * 64 : reinterpret_cast<const char*>(bg);
    pass_6x16_asm(a, lda, bg, kc, c + sub, ldc, ep.bias ? ep.bias + n0 + sub : nullptr, lohi, flags, pf);
  }
  if (ncols - whole == 8)
    pass_6x8_asm(a, lda, panel + whole / kGroupAvx2 * gstride, kc, c + whole, ldc,
                 ep.bias ? ep.bias + n0 + whole : nullptr, lohi, flags);
  else if (whole < ncols)
    rest(a, lda, panel + whole / kGroupAvx2 * gstride, gstride, kc, c + whole, ldc, ncols - whole, n0 + whole, true,
         true, ep, Prefetch{});
}

// By the vectors of 16 columns a panel has (AVX-512: a last panel of at most 48 columns computes
// only those), then rows. The AVX2 block covers a panel's columns 16 at a time itself.
using BlockTable = BlockFn[4][kRows];
constexpr BlockTable kAvx512Blocks = {
    {block<1, 1>, block<2, 1>, block<3, 1>, block<4, 1>, block<5, 1>, block<6, 1>},
    {block<1, 2>, block<2, 2>, block<3, 2>, block<4, 2>, block<5, 2>, block<6, 2>},
    {block<1, 3>, block<2, 3>, block<3, 3>, block<4, 3>, block<5, 3>, block<6, 3>},
    {block<1, 4>, block<2, 4>, block<3, 4>, block<4, 4>, block<5, 4>, block<6, 4>}};
// A last panel whose last vector has at most 8 columns (up to 8, 24, 40 or 56 of them): that
// vector 8 lanes wide (step512's HALF)
constexpr BlockTable kAvx512HalfBlocks = {
    {block<1, 1, true>, block<2, 1, true>, block<3, 1, true>, block<4, 1, true>, block<5, 1, true>, block<6, 1, true>},
    {block<1, 2, true>, block<2, 2, true>, block<3, 2, true>, block<4, 2, true>, block<5, 2, true>, block<6, 2, true>},
    {block<1, 3, true>, block<2, 3, true>, block<3, 3, true>, block<4, 3, true>, block<5, 3, true>, block<6, 3, true>},
    {block<1, 4, true>, block<2, 4, true>, block<3, 4, true>, block<4, 4, true>, block<5, 4, true>, block<6, 4, true>}};
constexpr BlockTable kAvx2Blocks = {
    {block_avx2<1>, block_avx2<2>, block_avx2<3>, block_avx2<4>, block_avx2<5>, block_avx2<6>},
    {block_avx2<1>, block_avx2<2>, block_avx2<3>, block_avx2<4>, block_avx2<5>, block_avx2<6>},
    {block_avx2<1>, block_avx2<2>, block_avx2<3>, block_avx2<4>, block_avx2<5>, block_avx2<6>},
    {block_avx2<1>, block_avx2<2>, block_avx2<3>, block_avx2<4>, block_avx2<5>, block_avx2<6>}};

// The epilogue's ops as one op stream_rows_avx2 applies (a Swish of alpha 1, SiLU; GELU by erf;
// ONNX's HardSwish), else none.
Streamed streamed(const Epilogue& ep) {
  if (is_lone_swish(ep.ops)) return Streamed::swish;
  if (ep.ops.size() != 1 || ep.ops[0].kind != EpilogueOp::Kind::eltwise) return Streamed::none;
  const EpilogueOp& op = ep.ops[0];
  if (op.alg == dnnl::algorithm::eltwise_gelu_erf) return Streamed::gelu_erf;
  // MobileNet-v3's expansions (K 16-96) on the lean pass: one thread, 169 x 40 x 240 52 -> 39 us,
  // 650 x 16 x 72 43 -> 28 (bias alone: 35, 21), where the HardSwish in the block's registers
  // kept them on the generic block
  if (op.alg == dnnl::algorithm::eltwise_hardswish && op.alpha == 1.0f / 6.0f && op.beta == 0.5f) return Streamed::hardswish;
  return Streamed::none;
}

void run_blocks(const BlockTable& blocks, int64_t width, const float* a, int64_t M, int64_t K, int64_t lda,
                const float* packed, int64_t N, float* c, int64_t ldc, const Epilogue& ep, bool parallel) {
  const int64_t panels = (N + kPanel - 1) / kPanel;
  const int64_t row_blocks = (M + kRows - 1) / kRows;
  const int64_t items = panels * row_blocks;
  const int64_t panel_lines = std::max<int64_t>(K, 1) * kPanel / 16;
  // below about a microsecond of work, starting the team costs more than it saves
  const bool one_thread = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) < 2e5;
  const int nthr = !parallel || one_thread || items < 2 ? 1 : omp_get_max_threads();
  // Rows in bands, one per thread, unless B has over four times as many columns as A has rows:
  // each thread then reads only its own rows of A, which the node before it (a layer norm,
  // attention: their rows split the same way) left in that core's L2, and writes whole rows of
  // C for the node after; both threads read all of B. Split by panels instead, each thread reads
  // all of A, half of it from the other core's cache, and B once between them, which pays only
  // where A is small against B. BERT-6 (Sapphire Rapids, 2 MiB L2 a core, 2 threads, in-process
  // alternation every pass; medians): over the batch stream (1-8 x 8-134 tokens) bands where
  // M >= N 4.0-4.5% faster than panels, where 4M >= N 3.2% faster again (8 of 10 pairs), where
  // 8M >= N or always level with 4M; over [1, L] alone 4M >= N 2% faster than M >= N (13 of 14
  // pairs), bands always 2.6% slower than panels always.
  const int64_t bands = 4 * M >= N ? std::min<int64_t>(nthr, row_blocks) : 1;
  // AVX2, one slice of K, the epilogue in registers: a full block's passes go straight to the asm
  // pass, its flags and clamp decided here once (through block_avx2, a 6-row block's setup and
  // the calls around its passes cost a 1x1 convolution over 32 channels a tenth of its time)
  struct {
    bool on = false;
    Streamed post = Streamed::none;
    int64_t flags = 0;
    float lohi[2] = {-INFINITY, INFINITY};
  } lean;
  const int64_t slice = &blocks == &kAvx2Blocks ? kSliceAvx2 : kSlice;
  if (&blocks == &kAvx2Blocks && K > 0 && K <= slice) {
    if (as_clamp(ep.ops, &lean.lohi[0], &lean.lohi[1])) {
      lean.on = true;
    } else if ((lean.post = streamed(ep)) != Streamed::none) {
      // a lone Swish or GELU over the block's stored rows, two vectors at a time
      // (stream_rows_avx2), after the asm pass of bias and store: EfficientNet-B0's head and stem
      // the model 0.99 of the time; GELU BM_GemmKilnGelu 3136x96x384 0.84, 1072x384x1536 0.95,
      // BERT-6 and ConvNeXt-T level (lohi stays infinite: no clamp)
      lean.on = true;
    }
    if (lean.on) lean.flags = asm_flags(ep.accumulate, ep.bias, lean.lohi[0], lean.lohi[1]);
  }
  Epilogue bare;  // lean.post: the epilogue without its op, for passes the block leaves to `fn`
  bare.bias = ep.bias;
  bare.accumulate = ep.accumulate;
  const Epilogue& lean_ep = lean.post != Streamed::none ? bare : ep;
  // band b: row blocks [rb_begin(b), rb_begin(b + 1)); items band-major, then panel-major (a
  // thread's blocks share their panel); `share_end`: the end of the thread's own share
  auto rb_begin = [&](int64_t b) { return row_blocks * b / bands; };
  // Row block `rb`, the `index`-th of its band's `band_rows`, of panel `p`; `ahead`: the thread
  // takes panel p + 1 next.
  auto run_block = [&](int64_t p, int64_t rb, int64_t index, int64_t band_rows, bool ahead) {
    const int64_t m0 = rb * kRows;
    const int rows = static_cast<int>(std::min<int64_t>(kRows, M - m0));
    // Lines of a panel (64-byte cache lines) to prefetch into L2: each block of a panel brings
    // in its share of the next panel the thread will take (of its band, or of its own share of
    // the items), so that panel's first block does not wait for memory (weights are read from
    // DRAM once per inference when a model's exceed the cache)
    Prefetch next;
    if (ahead) {
      const int64_t share = (panel_lines + band_rows - 1) / band_rows;
      const int64_t l = std::min(panel_lines, index * share);
      next.p = reinterpret_cast<const char*>(packed + (p + 1) * K * kPanel) + l * 64;
      next.lines = std::min(panel_lines, l + share) - l;
    }
    const int64_t n0 = p * kPanel, ncols = std::min(kPanel, N - n0);
    const bool half = &blocks == &kAvx512Blocks && half_last_vector(ncols);
    const BlockFn fn = (half ? kAvx512HalfBlocks : blocks)[(ncols + 15) / 16 - 1][rows - 1];
    if (lean.on && rows == kRows) {
      lean_block_avx2(a + m0 * lda, lda, packed + p * K * kPanel, K * width, K, c + m0 * ldc + n0, ldc, ncols, n0,
                      lean_ep, next, lean.lohi, lean.flags, fn);
      if (lean.post != Streamed::none) stream_rows_avx2(lean.post, c + m0 * ldc + n0, kRows, ncols, ldc);
      return;
    }
    for (int64_t k0 = 0; k0 < K || k0 == 0; k0 += slice) {
      const int64_t kc = std::min(slice, K - k0);
      fn(a + m0 * lda + k0, lda, packed + p * K * kPanel + k0 * width, K * width, kc, c + m0 * ldc + n0,
                       ldc, ncols, n0, k0 == 0, k0 + slice >= K, ep, k0 == 0 ? next : Prefetch{});
    }
  };
  // A band's items row block first, then panel, where all of B stays in L2 and the band's rows of
  // A (K floats a row) would not: A is then read once, not once per panel. ResNeXt-50's first
  // stage (5200 pixels, K 64-256, N 128-256, A 0.7-2.6 MB a band; Zen 2, 512 KiB of L2 a core):
  // the products with C out of cache 0.92-0.97 of the time, the model 0.989 (6 pairs), RegNet
  // 0.979; one thread (one band of all the rows), 5200 x 256 x 256 65 -> 87 GFLOP/s. Measured on
  // AVX2 only; AVX-512 keeps the panel-major order. Not where a band's rows of A fit beside B in
  // L2 themselves: BERT-small at [1, 128] (bands of 64 rows of 256 floats) ran 1.028 of the time
  // with its B of 256 KiB read per row block. (A team split by panels, bands == 1, keeps them.)
  const int64_t bytes = static_cast<int64_t>(sizeof(float));
  const bool rows_first = &blocks == &kAvx2Blocks && (nthr == 1 || bands > 1) && panels > 1 &&
                          K * panels * kPanel * bytes <= kRowsFirstMaxB && M / bands * K * bytes > kRowsFirstMaxB;
  if (nthr == 1) {  // in item order, without decoding each item (divisions)
    if (rows_first) {
      for (int64_t rb = 0; rb < row_blocks; ++rb)
        for (int64_t p = 0; p < panels; ++p) run_block(p, rb, rb, row_blocks, false);
      return;
    }
    for (int64_t p = 0; p < panels; ++p)
      for (int64_t rb = 0; rb < row_blocks; ++rb) run_block(p, rb, rb, row_blocks, p + 1 < panels);
    return;
  }
  auto block = [&](int64_t w, int64_t share_end) {
    int64_t b = 0;
    while (b + 1 < bands && w >= rb_begin(b + 1) * panels) ++b;
    const int64_t band_rows = rb_begin(b + 1) - rb_begin(b), local = w - rb_begin(b) * panels;
    if (rows_first) {
      const int64_t index = local / panels, p = local % panels;
      run_block(p, rb_begin(b) + index, index, band_rows, false);
      return;
    }
    const int64_t p = local / band_rows, index = local % band_rows;
    run_block(p, rb_begin(b) + index, index, band_rows,
              p + 1 < panels && (bands > 1 || (p + 1) * row_blocks < share_end));
  };
  WorkShare shared(items, nthr);  // each thread its share, then the others' leftovers
#pragma omp parallel num_threads(nthr)
  {
    const int ithr = omp_get_thread_num();
    const int64_t share_end = items * (ithr + 1) / nthr;
    shared.run(ithr, [&](int64_t w) { block(w, share_end); });
  }
}

void run_any(const float* a, int64_t M, int64_t K, int64_t lda, const float* packed, int64_t N, float* c, int64_t ldc,
             const Epilogue& ep, bool parallel) {
  const bool avx512 = isa_at_least(Isa::avx512_core);
  run_blocks(avx512 ? kAvx512Blocks : kAvx2Blocks, group_width(), a, M, K, lda, packed, N, c, ldc, ep, parallel);
}

}  // namespace

bool available() { return isa_at_least(Isa::avx2); }

int64_t group_width() { return isa_at_least(Isa::avx512_core) ? kPanel : kGroupAvx2; }

const char* impl_name() { return isa_at_least(Isa::avx512_core) ? "kiln_gemm:avx512_core_f32" : "kiln_gemm:avx2_f32"; }

int64_t packed_size(int64_t K, int64_t N) { return (N + kPanel - 1) / kPanel * std::max<int64_t>(K, 1) * kPanel; }

namespace {

// A whole AVX2 group of contiguous columns: K rows of 16, two vectors each (the per-element
// loop below ran at about a sixth of this speed; attention packs V per head with it)
KILN_AVX2 void pack_group16_avx2(const float* src, int64_t K, int64_t stride_k, float alpha, float* dst) {
  const __m256 a = _mm256_set1_ps(alpha);
  for (int64_t k = 0; k < K; ++k, src += stride_k, dst += kGroupAvx2) {
    _mm256_storeu_ps(dst, _mm256_mul_ps(a, _mm256_loadu_ps(src)));
    _mm256_storeu_ps(dst + 8, _mm256_mul_ps(a, _mm256_loadu_ps(src + 8)));
  }
}

// A whole AVX-512 panel's group (64 columns) from contiguous columns: K rows of 64, the columns
// past `cols` zero (the per-element loop below was 4% of BERT's attention, which packs V per head)
KILN_AVX512 void pack_group64_avx512(const float* src, int64_t cols, int64_t K, int64_t stride_k, float alpha,
                                     float* dst) {
  const __m512 a = _mm512_set1_ps(alpha);
  __mmask16 m[4];
  for (int j = 0; j < 4; ++j) m[j] = tail_mask(std::clamp<int64_t>(cols - 16 * j, 0, 16));
  for (int64_t k = 0; k < K; ++k, src += stride_k, dst += kPanel)
    for (int j = 0; j < 4; ++j) _mm512_storeu_ps(dst + 16 * j, _mm512_mul_ps(a, _mm512_maskz_loadu_ps(m[j], src + 16 * j)));
}

}  // namespace

void pack_b(const float* b, int64_t K, int64_t N, int64_t stride_k, int64_t stride_n, float alpha, float* out) {
  const int64_t panels = (N + kPanel - 1) / kPanel, width = group_width();
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t g = 0; g < kPanel / width; ++g) {
      const int64_t n0 = p * kPanel + g * width, cols = std::clamp<int64_t>(N - n0, 0, width);
      float* group = out + packed_offset(K, 0, n0, width);
      if (cols == 0) {  // a group past N: padding only (no pointer into b past its end)
        std::fill(group, group + K * width, 0.0f);
        continue;
      }
      if (width == kGroupAvx2 && cols == width && stride_n == 1 && isa_at_least(Isa::avx2)) {
        pack_group16_avx2(b + n0, K, stride_k, alpha, group);
        continue;
      }
      if (width == kPanel && stride_n == 1 && isa_at_least(Isa::avx512_core)) {
        pack_group64_avx512(b + n0, cols, K, stride_k, alpha, group);
        continue;
      }
      for (int64_t k = 0; k < K; ++k) {
        float* dst = group + k * width;
        const float* src = b + k * stride_k + n0 * stride_n;
        if (stride_n == 1)  // rows of B contiguous
          for (int64_t j = 0; j < cols; ++j) dst[j] = alpha * src[j];
        else
          for (int64_t j = 0; j < cols; ++j) dst[j] = alpha * src[j * stride_n];
        for (int64_t j = cols; j < width; ++j) dst[j] = 0.0f;
      }
    }
}

bool supports_eltwise(dnnl::algorithm alg) {
  using A = dnnl::algorithm;
  switch (alg) {
    case A::eltwise_relu: case A::eltwise_linear: case A::eltwise_clip: case A::eltwise_clip_v2:
    case A::eltwise_gelu_erf: case A::eltwise_gelu_tanh: case A::eltwise_logistic: case A::eltwise_tanh:
    case A::eltwise_swish: case A::eltwise_abs: case A::eltwise_square: case A::eltwise_exp: case A::eltwise_elu:
    case A::eltwise_hardswish:
      return true;
    default: return false;
  }
}

bool as_clamp(const std::vector<EpilogueOp>& ops, float* lo, float* hi) {
  // a chain of clamps is one clamp: to [its value at -inf, its value at +inf]
  using A = dnnl::algorithm;
  float l = -INFINITY, h = INFINITY;
  for (const EpilogueOp& op : ops) {
    const bool relu = op.alg == A::eltwise_relu && op.alpha == 0.0f;
    if (op.kind != EpilogueOp::Kind::eltwise || !(relu || op.alg == A::eltwise_clip || op.alg == A::eltwise_clip_v2))
      return false;
    const float a = relu ? 0.0f : op.alpha, b = relu ? INFINITY : op.beta;
    l = std::min(std::max(l, a), b), h = std::min(std::max(h, a), b);
  }
  *lo = l, *hi = h;
  return true;
}

bool is_lone_swish(const std::vector<EpilogueOp>& ops) {
  return ops.size() == 1 && ops[0].kind == EpilogueOp::Kind::eltwise && ops[0].alg == dnnl::algorithm::eltwise_swish &&
         ops[0].alpha == 1.0f;
}

bool supports_binary(dnnl::algorithm alg) {
  using A = dnnl::algorithm;
  switch (alg) {
    case A::binary_add: case A::binary_sub: case A::binary_mul: case A::binary_div: case A::binary_max:
    case A::binary_min:
      return true;
    default: return false;
  }
}

namespace {

// A row's vectors at a time (at most kChunk), each op over all of them: eltwise16_n picks the
// algorithm once and overlaps the vectors' long chains, where a call per vector paid its setup
// and its chain's latency for each (DepthwiseBlock's Swish after the depthwise rows).
constexpr int kChunk = 16;

// A lone Swish (SiLU) over rows [0, rows) x cols [0, ncols) of c: four vectors at a time held in
// registers, then the last ones, a masked last vector. Through apply_epilogue's chunk of 16
// vectors in memory and eltwise16_n it cost 5.1 ns a vector, streamed 3.7 (Zen 4, in L2).
KILN_AVX512 void swish_rows_avx512(float* c, int64_t rows, int64_t ncols, int64_t ldc) {
  for (int64_t r = 0; r < rows; ++r) {
    float* p = c + r * ldc;
    int64_t j = 0;
    for (; j + 64 <= ncols; j += 64) {
      __m512 v[4] = {_mm512_loadu_ps(p + j), _mm512_loadu_ps(p + j + 16), _mm512_loadu_ps(p + j + 32),
                     _mm512_loadu_ps(p + j + 48)};
      v_swish_n<4>(v);
      for (int u = 0; u < 4; ++u) _mm512_storeu_ps(p + j + 16 * u, v[u]);
    }
    const int left = static_cast<int>((ncols - j + 15) / 16);  // 0-4 vectors, the last partial where 4
    __m512 v[4];
    for (int u = 0; u < left; ++u) v[u] = _mm512_maskz_loadu_ps(tail_mask(ncols - j - 16 * u), p + j + 16 * u);
    swish_up_to_4(v, left);
    for (int u = 0; u < left; ++u) _mm512_mask_storeu_ps(p + j + 16 * u, tail_mask(ncols - j - 16 * u), v[u]);
  }
}

KILN_AVX512 void apply_epilogue_avx512(float* c, int64_t rows, int64_t ncols, int64_t ldc, const Epilogue& ep) {
  // Rows stored one after another, under ops that read no column's operand (no bias, eltwise
  // ops only): one long row, so that a chunk holds kChunk vectors however few a row has. A
  // depthwise block's Swish over 32 channels was two vectors a chunk, each Swish's 17 dependent
  // operations waiting on the one before (EfficientNet-B0's stem block, 2 vectors a pixel)
  if (ldc == ncols && rows > 1 && !ep.bias &&
      std::all_of(ep.ops.begin(), ep.ops.end(), [](const EpilogueOp& op) { return op.kind == EpilogueOp::Kind::eltwise; })) {
    ncols *= rows, ldc = ncols, rows = 1;
  }
  if (!ep.bias && is_lone_swish(ep.ops)) {  // four vectors at a time in registers, not a chunk through memory
    swish_rows_avx512(c, rows, ncols, ldc);
    return;
  }
  __m512 v[kChunk];
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c0 = 0; c0 < ncols; c0 += kChunk * 16) {
      const int n = static_cast<int>(std::min<int64_t>(kChunk, (ncols - c0 + 15) / 16));
      float* p = c + r * ldc + c0;
      for (int i = 0; i < n; ++i) {
        const __mmask16 m = tail_mask(ncols - c0 - i * 16);
        v[i] = _mm512_maskz_loadu_ps(m, p + i * 16);
        if (ep.bias) v[i] = _mm512_add_ps(v[i], _mm512_maskz_loadu_ps(m, ep.bias + c0 + i * 16));
      }
      for (const EpilogueOp& op : ep.ops) {
        if (op.kind == EpilogueOp::Kind::eltwise) {
          eltwise16_n(v, n, op);
          continue;
        }
        for (int i = 0; i < n; ++i) v[i] = v_binary(v[i], op, c0 + i * 16, tail_mask(ncols - c0 - i * 16));
      }
      for (int i = 0; i < n; ++i) _mm512_mask_storeu_ps(p + i * 16, tail_mask(ncols - c0 - i * 16), v[i]);
    }
}

KILN_AVX2 void apply_epilogue_avx2(float* c, int64_t rows, int64_t ncols, int64_t ldc, const Epilogue& ep) {
  if (const Streamed s = ep.bias ? Streamed::none : streamed(ep); s != Streamed::none) {
    stream_rows_avx2(s, c, rows, ncols, ldc);  // a depthwise block's Swish: without the op loop
    return;
  }
  rows_by_two_avx2(c, rows, ncols, ldc, ep.bias, EpilogueOps{ep});  // streamed (see eltwise8_u)
}

}  // namespace

void apply_epilogue(float* c, int64_t rows, int64_t ncols, int64_t ldc, const Epilogue& epilogue) {
  KILN_CHECK(available(), "gemm_f32::apply_epilogue: the ISA in use has neither AVX-512 nor AVX2");
  if (!epilogue.bias && epilogue.ops.empty()) return;
  if (isa_at_least(Isa::avx512_core))
    apply_epilogue_avx512(c, rows, ncols, ldc, epilogue);
  else
    apply_epilogue_avx2(c, rows, ncols, ldc, epilogue);
}

void run(const float* a, int64_t M, int64_t K, int64_t lda, const float* packed_b, int64_t N, float* c, int64_t ldc,
         const Epilogue& epilogue) {
  KILN_CHECK(available(), "gemm_f32::run: the ISA in use has neither AVX-512 nor AVX2");
  if (M <= 0 || N <= 0) return;
  run_any(a, M, K, lda, packed_b, N, c, ldc, epilogue, /*parallel=*/true);
}

void run_serial(const float* a, int64_t M, int64_t K, int64_t lda, const float* packed_b, int64_t N, float* c,
                int64_t ldc, const Epilogue& epilogue) {
  KILN_CHECK(available(), "gemm_f32::run_serial: the ISA in use has neither AVX-512 nor AVX2");
  if (M <= 0 || N <= 0) return;
  run_any(a, M, K, lda, packed_b, N, c, ldc, epilogue, /*parallel=*/false);
}

bool blocked8_supports(const Epilogue& epilogue, int64_t K, int64_t N) {
  float lo, hi;
  return isa_at_least(Isa::avx2) && !isa_at_least(Isa::avx512_core) && K > 0 && K % 8 == 0 && N > 0 && N % 8 == 0 &&
         as_clamp(epilogue.ops, &lo, &hi);
}

namespace {

// The groups of 16 columns of the panel from column n0 that lie in [n_begin, n_end): [*g0, *g1).
inline void panel_groups(int64_t n0, int64_t n_begin, int64_t n_end, int64_t* g0, int64_t* g1) {
  *g0 = std::max<int64_t>(n_begin - n0, 0) / kGroupAvx2;
  *g1 = (std::min(n0 + kPanel, n_end) - n0) / kGroupAvx2;
}

// Whether columns [n_begin, n_end) of N are whole groups of 16 (the blocked passes' C), the last
// one perhaps N's last 8 (HalfGroup).
bool whole_groups(int64_t n_begin, int64_t n_end, int64_t N) {
  return n_begin % kGroupAvx2 == 0 && (n_end % kGroupAvx2 == 0 || n_end == N) && 0 <= n_begin && n_begin <= n_end &&
         n_end <= N;
}

// N's last 8 columns where N is 8 past a multiple of 16 and they are asked for (SqueezeNet's
// classifier, 1000 channels): their group's pass computes 16 columns, the 8 past N (B's zero
// padding) into `spare`, their bias from a copy padded with zeros. Before, such a layer gathered
// its pixels into rows and scattered its product back into blocks.
struct HalfGroup {
  int64_t n = -1;  // the first of the 8 columns, or -1: none
  alignas(32) float bias[kGroupAvx2] = {};
  alignas(32) float spare[kRows * 8] = {};
  HalfGroup(int64_t N, int64_t n_end, const float* b) {
    if (N % kGroupAvx2 != 8 || n_end != N) return;
    n = N - 8;
    if (b) std::copy(b + n, b + N, bias);
  }
  // the groups past panel_groups' whole ones in the panel of columns [n0, n0 + kPanel): 1 where
  // it holds the 8 columns
  int64_t extra(int64_t n0) const { return n >= n0 && n < n0 + kPanel ? 1 : 0; }
  // the group from column `col`: its second channel block of C (`c2` but for the 8 columns) and
  // its bias
  float* second(int64_t col, float* c2) { return col == n ? spare : c2; }
  const float* bias_at(int64_t col, const Epilogue& ep) const {
    return !ep.bias ? nullptr : col == n ? bias : ep.bias + col;
  }
};

// Columns [n_begin, n_end) of run_serial_blocked8.
KILN_AVX2 void run_blocked8_avx2(const float* a, int64_t M, int64_t K, int64_t a_plane, const float* packed,
                                 int64_t N, float* c, int64_t c_plane, const Epilogue& ep, int64_t n_begin,
                                 int64_t n_end) {
  HalfGroup half(N, n_end, ep.bias);
  float lohi[2];
  as_clamp(ep.ops, &lohi[0], &lohi[1]);
  const int64_t flags = asm_flags(ep.accumulate, ep.bias, lohi[0], lohi[1]);
  const int64_t pa = a_plane * static_cast<int64_t>(sizeof(float));
  for (int64_t n0 = n_begin / kPanel * kPanel; n0 < n_end; n0 += kPanel) {  // panel by panel: its B stays in L2
    const float* panel = packed + n0 / kPanel * K * kPanel;
    int64_t g0, g1;
    panel_groups(n0, n_begin, n_end, &g0, &g1);
    for (int64_t m0 = 0; m0 < M; m0 += kRows)
      for (int64_t g = g0; g < g1 + half.extra(n0); ++g) {
        const int64_t n = n0 + g * kGroupAvx2;  // the group's first column: channel blocks n / 8 and n / 8 + 1
        float* cg = c + n / 8 * c_plane + m0 * 8;
        pass_6x16_blocked8_asm(a + m0 * 8, pa, panel + g * K * kGroupAvx2, K / 8, cg, half.second(n, cg + c_plane),
                               half.bias_at(n, ep), lohi, flags);
      }
  }
}

// run_serial_to_blocked8's columns [n_begin, n_end): per panel, per block of 6 rows, K in slices
// of kSliceAvx2, the bias from the first, C added from the second (or from the first where the
// epilogue accumulates), the clamp at the last.
KILN_AVX2 void run_to_blocked8_avx2(const float* a, int64_t M, int64_t K, int64_t lda, const float* packed,
                                    int64_t N, float* c, int64_t c_plane, const Epilogue& ep, int64_t n_begin,
                                    int64_t n_end) {
  HalfGroup half(N, n_end, ep.bias);
  float lohi[2];
  as_clamp(ep.ops, &lohi[0], &lohi[1]);
  for (int64_t n0 = n_begin / kPanel * kPanel; n0 < n_end; n0 += kPanel) {
    const float* panel = packed + n0 / kPanel * K * kPanel;
    int64_t g0, g1;
    panel_groups(n0, n_begin, n_end, &g0, &g1);
    for (int64_t m0 = 0; m0 < M; m0 += kRows)
      for (int64_t k0 = 0; k0 < K; k0 += kSliceAvx2) {
        const int64_t kc = std::min(kSliceAvx2, K - k0);
        const bool first = k0 == 0, last = k0 + kSliceAvx2 >= K;
        const int64_t flags = asm_flags(!first || ep.accumulate, first && ep.bias, last ? lohi[0] : -INFINITY,
                                        last ? lohi[1] : INFINITY);
        for (int64_t g = g0; g < g1 + half.extra(n0); ++g) {
          const int64_t n = n0 + g * kGroupAvx2;
          float* cg = c + n / 8 * c_plane + m0 * 8;
          pass_6x16_to_blocked8_asm(a + m0 * lda + k0, lda, panel + g * K * kGroupAvx2 + k0 * kGroupAvx2, kc, cg,
                                    half.second(n, cg + c_plane), half.bias_at(n, ep), lohi, flags);
        }
      }
  }
}

}  // namespace

void run_serial_to_blocked8(const float* a, int64_t M, int64_t K, int64_t lda, const float* packed_b, int64_t N,
                            float* c, int64_t c_plane, const Epilogue& epilogue, int64_t n_begin, int64_t n_end) {
  if (n_end < 0) n_end = N;
  KILN_CHECK(blocked8_supports(epilogue, 8, N) && K > 0 && M % kRows == 0 && whole_groups(n_begin, n_end, N),
             "gemm_f32::run_serial_to_blocked8: needs AVX2 without AVX-512, N a multiple of 8, M of 6, a clamp "
             "epilogue and columns in whole groups of 16 (or up to N)");
  if (M <= 0 || n_begin == n_end) return;
  run_to_blocked8_avx2(a, M, K, lda, packed_b, N, c, c_plane, epilogue, n_begin, n_end);
}

bool blocked16_supports(bool a_in_blocks, bool c_in_blocks, int64_t K, int64_t N) {
  return isa_at_least(Isa::avx512_core) && K > 0 && N > 0 && (!a_in_blocks || K % 16 == 0) &&
         (!c_in_blocks || N % 16 == 0);
}

void run_serial_blocked16(const float* a, int64_t M, int64_t K, int64_t lda, int64_t a_plane, const float* packed_b,
                          int64_t N, float* c, int64_t ldc, int64_t c_plane, const Epilogue& epilogue, int64_t n_begin,
                          int64_t n_end) {
  if (n_end < 0) n_end = N;
  KILN_CHECK(blocked16_supports(a_plane > 0, c_plane > 0, K, N) && 0 <= n_begin && n_begin <= n_end && n_end <= N &&
                 n_begin % kPanel == 0 && (n_end % kPanel == 0 || n_end == N) && (a_plane > 0 || lda >= K) &&
                 (c_plane > 0 || ldc >= N),
             "gemm_f32::run_serial_blocked16: needs AVX-512, K a multiple of 16 where A is in blocks, N where C is, "
             "and columns in whole panels of 64 (or up to N)");
  if (M <= 0 || n_begin == n_end) return;
  run_blocked16_avx512(a, M, K, lda, a_plane, packed_b, c, ldc, c_plane, epilogue, n_begin, n_end);
}

void run_serial_blocked8(const float* a, int64_t M, int64_t K, int64_t a_plane, const float* packed_b, int64_t N,
                         float* c, int64_t c_plane, const Epilogue& epilogue, int64_t n_begin, int64_t n_end) {
  if (n_end < 0) n_end = N;
  KILN_CHECK(blocked8_supports(epilogue, K, N) && M % kRows == 0 && whole_groups(n_begin, n_end, N),
             "gemm_f32::run_serial_blocked8: needs AVX2 without AVX-512, K and N multiples of 8, M of 6, a "
             "clamp epilogue and columns in whole groups of 16 (or up to N)");
  if (M <= 0 || n_begin == n_end) return;
  run_blocked8_avx2(a, M, K, a_plane, packed_b, N, c, c_plane, epilogue, n_begin, n_end);
}

}  // namespace kiln::cpu::gemm_f32
