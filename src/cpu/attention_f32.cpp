#include "cpu/attention_f32.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <kiln/error.hpp>

#include "cpu/gemm_f32.hpp"
#include "cpu/isa.hpp"
#include "cpu/work_share.hpp"
#include "cpu/simd_avx2.hpp"
#include "cpu/simd_avx512.hpp"

namespace kiln::cpu::attention_f32 {

namespace {

using namespace simd;

using gemm_f32::kPanel;

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// Per thread: K^T and V packed for the GEMM, and one head's scores.
struct Parts {
  size_t kt = 0, v = 0, scores = 0, factors = 0;  // floats
  size_t bytes() const { return (round_up(static_cast<int64_t>(kt + v + scores + factors), 16)) * sizeof(float); }
};
Parts parts(const Geometry& g) {
  Parts p;
  p.kt = static_cast<size_t>(gemm_f32::packed_size(g.D, g.T));
  p.v = static_cast<size_t>(gemm_f32::packed_size(g.T, g.Dv));
  p.scores = static_cast<size_t>(g.S * g.T);
  p.factors = static_cast<size_t>(g.S);  // each output row's 1 / sum (softmax_row's result)
  return p;
}

// Rows [0, rows) x cols [0, cols) of `in`, transposed and scaled into `out`, 16 x 16 at a time.
KILN_AVX512 void transpose_avx512(const float* in, int64_t rows, int64_t cols, int64_t ld_in, float alpha, float* out,
                                  int64_t ld_out) {
  const __m512 va = _mm512_set1_ps(alpha);
  for (int64_t i0 = 0; i0 < rows; i0 += 16)
    for (int64_t j0 = 0; j0 < cols; j0 += 16) {
      const __mmask16 cm = tail_mask(cols - j0);
      const int64_t nr = std::min<int64_t>(16, rows - i0), nc = std::min<int64_t>(16, cols - j0);
      __m512 r[16];
      for (int i = 0; i < 16; ++i)
        r[i] = i < nr ? _mm512_mul_ps(va, _mm512_maskz_loadu_ps(cm, in + (i0 + i) * ld_in + j0)) : _mm512_setzero_ps();
      // pairs of rows interleaved, then groups of four, then the 128-bit lanes across groups
      __m512 u[4][4];
      for (int g = 0; g < 4; ++g) {
        const __m512 t0 = _mm512_unpacklo_ps(r[4 * g], r[4 * g + 1]), t1 = _mm512_unpackhi_ps(r[4 * g], r[4 * g + 1]);
        const __m512 t2 = _mm512_unpacklo_ps(r[4 * g + 2], r[4 * g + 3]),
                     t3 = _mm512_unpackhi_ps(r[4 * g + 2], r[4 * g + 3]);
        u[g][0] = _mm512_shuffle_ps(t0, t2, 0x44);
        u[g][1] = _mm512_shuffle_ps(t0, t2, 0xEE);
        u[g][2] = _mm512_shuffle_ps(t1, t3, 0x44);
        u[g][3] = _mm512_shuffle_ps(t1, t3, 0xEE);
      }
      __m512 o[16];
      for (int e = 0; e < 4; ++e) {
        const __m512 v0 = _mm512_shuffle_f32x4(u[0][e], u[1][e], 0x88), v1 = _mm512_shuffle_f32x4(u[0][e], u[1][e], 0xDD);
        const __m512 v2 = _mm512_shuffle_f32x4(u[2][e], u[3][e], 0x88), v3 = _mm512_shuffle_f32x4(u[2][e], u[3][e], 0xDD);
        o[e] = _mm512_shuffle_f32x4(v0, v2, 0x88);
        o[8 + e] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
        o[4 + e] = _mm512_shuffle_f32x4(v1, v3, 0x88);
        o[12 + e] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
      }
      const __mmask16 rm = tail_mask(nr);
      for (int j = 0; j < nc; ++j) _mm512_mask_storeu_ps(out + (j0 + j) * ld_out + i0, rm, o[j]);
    }
}

// Rows [0, rows) x cols [0, cols) of `in`, transposed and scaled into `out`, 8 x 8 at a time
// (the AVX2 form of transpose_avx512).
KILN_AVX2 void transpose_avx2(const float* in, int64_t rows, int64_t cols, int64_t ld_in, float alpha, float* out,
                              int64_t ld_out) {
  const __m256 va = _mm256_set1_ps(alpha);
  for (int64_t i0 = 0; i0 < rows; i0 += 8)
    for (int64_t j0 = 0; j0 < cols; j0 += 8) {
      const int64_t nr = std::min<int64_t>(8, rows - i0), nc = std::min<int64_t>(8, cols - j0);
      __m256 r[8];
      for (int i = 0; i < 8; ++i)
        r[i] = i < nr ? _mm256_mul_ps(va, v_load8(in + (i0 + i) * ld_in + j0, nc)) : _mm256_setzero_ps();
      // pairs of rows interleaved, then groups of four (columns c and c + 4 in the two lanes),
      // then the lanes of rows 0-3 and 4-7 joined
      __m256 u[8];
      for (int g = 0; g < 2; ++g) {
        const __m256 t0 = _mm256_unpacklo_ps(r[4 * g], r[4 * g + 1]), t1 = _mm256_unpackhi_ps(r[4 * g], r[4 * g + 1]);
        const __m256 t2 = _mm256_unpacklo_ps(r[4 * g + 2], r[4 * g + 3]),
                     t3 = _mm256_unpackhi_ps(r[4 * g + 2], r[4 * g + 3]);
        u[4 * g + 0] = _mm256_shuffle_ps(t0, t2, 0x44);
        u[4 * g + 1] = _mm256_shuffle_ps(t0, t2, 0xEE);
        u[4 * g + 2] = _mm256_shuffle_ps(t1, t3, 0x44);
        u[4 * g + 3] = _mm256_shuffle_ps(t1, t3, 0xEE);
      }
      __m256 o[8];
      for (int e = 0; e < 4; ++e) {
        o[e] = _mm256_permute2f128_ps(u[e], u[4 + e], 0x20);
        o[4 + e] = _mm256_permute2f128_ps(u[e], u[4 + e], 0x31);
      }
      for (int j = 0; j < nc; ++j) v_store8(out + (j0 + j) * ld_out + i0, nr, o[j]);
    }
}

using TransposeFn = void (*)(const float*, int64_t, int64_t, int64_t, float, float*, int64_t);

// y[s * ld + d] *= factors[s] for s < rows, d < cols: each output row by its softmax's 1 / sum
// (scalar, compiled for the baseline ISA, this was 3% of BERT's attention)
KILN_AVX512 void scale_rows_avx512(float* y, int64_t rows, int64_t cols, int64_t ld, const float* factors) {
  for (int64_t s = 0; s < rows; ++s) {
    const __m512 f = _mm512_set1_ps(factors[s]);
    float* row = y + s * ld;
    for (int64_t d = 0; d < cols; d += 16) {
      const __mmask16 m = tail_mask(cols - d);
      _mm512_mask_storeu_ps(row + d, m, _mm512_mul_ps(f, _mm512_maskz_loadu_ps(m, row + d)));
    }
  }
}

KILN_AVX2 void scale_rows_avx2(float* y, int64_t rows, int64_t cols, int64_t ld, const float* factors) {
  for (int64_t s = 0; s < rows; ++s) {
    const __m256 f = _mm256_set1_ps(factors[s]);
    float* row = y + s * ld;
    for (int64_t d = 0; d < cols; d += 8) v_store8(row + d, cols - d, _mm256_mul_ps(f, v_load8(row + d, cols - d)));
  }
}

using ScaleRowsFn = void (*)(float*, int64_t, int64_t, int64_t, const float*);

// The largest |x| over `n` rows of `len` values, `ld` apart, as the bits of a float: a positive
// float's bits order as integers, and an infinity or NaN anywhere gives at least those of +inf.
KILN_AVX512 uint32_t max_abs_bits_avx512(const float* x, int64_t n, int64_t len, int64_t ld) {
  const __m512i magnitude = _mm512_set1_epi32(0x7FFFFFFF);
  __m512i most = _mm512_setzero_si512();
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < len; i += 16) {
      const __m512i bits = _mm512_castps_si512(_mm512_maskz_loadu_ps(tail_mask(len - i), x + r * ld + i));
      most = _mm512_max_epu32(most, _mm512_and_si512(bits, magnitude));
    }
  return _mm512_reduce_max_epu32(most);
}

KILN_AVX2 uint32_t max_abs_bits_avx2(const float* x, int64_t n, int64_t len, int64_t ld) {
  const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF);
  __m256i most = _mm256_setzero_si256();
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < len; i += 8) {
      const __m256i bits = _mm256_castps_si256(v_load8(x + r * ld + i, len - i));  // lanes past len: 0
      most = _mm256_max_epu32(most, _mm256_and_si256(bits, magnitude));
    }
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), most);
  return *std::max_element(lanes, lanes + 8);
}

using MaxAbsBitsFn = uint32_t (*)(const float*, int64_t, int64_t, int64_t);

double bits_float(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

// K^T of one kv head ([T, D] rows ld apart) as gemm_f32's packed B [D, T], times the scale:
// each group of a panel ([D][width], gemm_f32.hpp) the transpose of `width` rows of K.
void pack_kt(TransposeFn transpose, const float* k, int64_t T, int64_t D, int64_t ld, float scale, float* out) {
  const int64_t width = gemm_f32::group_width();
  for (int64_t t0 = 0; t0 < round_up(T, kPanel); t0 += width) {
    const int64_t rows = std::clamp<int64_t>(T - t0, 0, width);
    float* group = out + gemm_f32::packed_offset(D, 0, t0, width);
    if (rows < width) std::memset(group, 0, static_cast<size_t>(D * width) * sizeof(float));
    if (rows > 0) transpose(k + t0 * ld, rows, D, ld, scale, group, width);
  }
}

// One scores row: mask and causal limit applied, then softmax in place (all keys masked: zeros).
// `mf` / `mb`: the mask row (float / bool), `mstep` 1 along T or 0 (one value for the row).
// Unless the probabilities are quantized, the row is left as e^(x - max) and 1 / sum returned:
// the caller scales the output row (Dv values) instead of this pass scaling T of them (a third
// of the softmax's passes; BERT's softmax was 28% of its attention at 134 keys).
KILN_AVX512 float softmax_row_avx512(float* x, int64_t T, const float* mf, const uint8_t* mb, int64_t mstep,
                                     int64_t causal_limit, const ProbsQuant& pq) {
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512 vmax = ninf;
  for (int64_t j = 0; j < T; j += 16) {
    const __mmask16 k = tail_mask(T - j);
    __m512 v = _mm512_maskz_loadu_ps(k, x + j);
    if (mf) v = _mm512_add_ps(v, mstep ? _mm512_maskz_loadu_ps(k, mf + j) : _mm512_set1_ps(mf[0]));
    if (mb) {
      __mmask16 attend;
      if (mstep) {
        alignas(16) uint8_t bytes[16] = {};
        std::memcpy(bytes, mb + j, static_cast<size_t>(std::min<int64_t>(16, T - j)));
        attend = _mm512_test_epi32_mask(_mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(bytes))),
                                        _mm512_set1_epi32(0xFF));
      } else {
        attend = mb[0] ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>(0);
      }
      v = _mm512_mask_blend_ps(attend, ninf, v);
    }
    if (causal_limit >= 0) {  // keys past the query's position
      const __mmask16 after = _mm512_cmpgt_epi32_mask(_mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int>(j))),
                                                      _mm512_set1_epi32(static_cast<int>(causal_limit)));
      v = _mm512_mask_blend_ps(after, v, ninf);
    }
    _mm512_mask_storeu_ps(x + j, k, v);
    vmax = _mm512_mask_max_ps(vmax, k, vmax, v);
  }
  const float m = _mm512_reduce_max_ps(vmax);
  if (m == -std::numeric_limits<float>::infinity()) {
    std::memset(x, 0, static_cast<size_t>(T) * sizeof(float));
    return 1.0f;
  }
  const __m512 vm = _mm512_set1_ps(m);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < T; j += 16) {
    // no denormals (v_exp_nonpositive is 0 or at least e^-87): the product with V would run on
    // the slow path
    const __mmask16 k = tail_mask(T - j);
    const __m512 e = v_exp_nonpositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), vm));
    _mm512_mask_storeu_ps(x + j, k, e);
    sum = _mm512_mask_add_ps(sum, k, sum, e);
  }
  const float inv_sum = 1.0f / _mm512_reduce_add_ps(sum);  // the maximum's own term is 1: sum >= 1
  if (!pq.on) return inv_sum;
  const __m512 inv = _mm512_set1_ps(inv_sum);
  const __m512 smallest = _mm512_set1_ps(std::numeric_limits<float>::min());
  const __m512 qs = _mm512_set1_ps(pq.scale), qz = _mm512_set1_ps(pq.zero_point), qlo = _mm512_set1_ps(pq.qmin),
               qhi = _mm512_set1_ps(pq.qmax);
  for (int64_t j = 0; j < T; j += 16) {
    const __mmask16 k = tail_mask(T - j);
    const __m512 p = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + j), inv);
    // as QuantizeLinear -> DequantizeLinear: p / scale rounded half to even
    const __m512 q = _mm512_add_ps(_mm512_roundscale_ps(_mm512_div_ps(p, qs), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), qz);
    const __m512 d = _mm512_mul_ps(_mm512_sub_ps(_mm512_min_ps(_mm512_max_ps(q, qlo), qhi), qz), qs);
    // no denormal probabilities: the product with V would run on the slow path
    _mm512_mask_storeu_ps(x + j, k, _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(d, smallest, _CMP_GE_OQ), d));
  }
  return 1.0f;
}

// softmax_row_avx512 on 8 lanes: lanes past T are -inf for the maximum and 0 for the sum.
KILN_AVX2 float softmax_row_avx2(float* x, int64_t T, const float* mf, const uint8_t* mb, int64_t mstep,
                                 int64_t causal_limit, const ProbsQuant& pq) {
  const __m256 ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256 vmax = ninf;
  for (int64_t j = 0; j < T; j += 8) {
    __m256 v = v_load8(x + j, T - j);
    if (mf) v = _mm256_add_ps(v, mstep ? v_load8(mf + j, T - j) : _mm256_set1_ps(mf[0]));
    if (mb) {
      __m256 attend;  // all ones where the key is attended
      if (mstep) {
        alignas(16) uint8_t bytes[16] = {};
        std::memcpy(bytes, mb + j, static_cast<size_t>(std::min<int64_t>(8, T - j)));
        const __m256i w = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes)));
        attend = _mm256_castsi256_ps(_mm256_cmpgt_epi32(w, _mm256_setzero_si256()));
      } else {
        attend = mb[0] ? _mm256_castsi256_ps(_mm256_set1_epi32(-1)) : _mm256_setzero_ps();
      }
      v = _mm256_blendv_ps(ninf, v, attend);
    }
    if (causal_limit >= 0) {  // keys past the query's position
      const __m256i after = _mm256_cmpgt_epi32(_mm256_add_epi32(lane, _mm256_set1_epi32(static_cast<int>(j))),
                                               _mm256_set1_epi32(static_cast<int>(causal_limit)));
      v = _mm256_blendv_ps(v, ninf, _mm256_castsi256_ps(after));
    }
    v_store8(x + j, T - j, v);
    if (T - j < 8) v = _mm256_blendv_ps(ninf, v, v_lanes8(T - j));
    vmax = _mm256_max_ps(vmax, v);
  }
  const float m = v_hmax8(vmax);
  if (m == -std::numeric_limits<float>::infinity()) {
    std::memset(x, 0, static_cast<size_t>(T) * sizeof(float));
    return 1.0f;
  }
  const __m256 vm = _mm256_set1_ps(m);
  __m256 sum = _mm256_setzero_ps();
  for (int64_t j = 0; j < T; j += 8) {
    // no denormals (v_exp_nonpositive8 is 0 or at least e^-87): the product with V would run on
    // the slow path
    __m256 e = v_exp_nonpositive8(_mm256_sub_ps(v_load8(x + j, T - j), vm));
    v_store8(x + j, T - j, e);
    if (T - j < 8) e = _mm256_and_ps(e, v_lanes8(T - j));
    sum = _mm256_add_ps(sum, e);
  }
  const float inv_sum = 1.0f / v_hsum8(sum);  // the maximum's own term is 1: sum >= 1
  if (!pq.on) return inv_sum;
  const __m256 inv = _mm256_set1_ps(inv_sum);
  const __m256 smallest = _mm256_set1_ps(std::numeric_limits<float>::min());
  const __m256 qs = _mm256_set1_ps(pq.scale), qz = _mm256_set1_ps(pq.zero_point), qlo = _mm256_set1_ps(pq.qmin),
               qhi = _mm256_set1_ps(pq.qmax);
  for (int64_t j = 0; j < T; j += 8) {
    const __m256 p = _mm256_mul_ps(v_load8(x + j, T - j), inv);
    // as QuantizeLinear -> DequantizeLinear: p / scale rounded half to even
    const __m256 q =
        _mm256_add_ps(_mm256_round_ps(_mm256_div_ps(p, qs), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), qz);
    const __m256 d = _mm256_mul_ps(_mm256_sub_ps(_mm256_min_ps(_mm256_max_ps(q, qlo), qhi), qz), qs);
    // no denormal probabilities: the product with V would run on the slow path
    v_store8(x + j, T - j, _mm256_and_ps(d, _mm256_cmp_ps(d, smallest, _CMP_GE_OQ)));
  }
  return 1.0f;
}

// Returns the factor of the row's output (1 when the row is left normalized).
using SoftmaxRowFn = float (*)(float*, int64_t, const float*, const uint8_t*, int64_t, int64_t, const ProbsQuant&);

// The vector code of one ISA; the GEMMs choose theirs (gemm_f32).
struct Kernels {
  TransposeFn transpose;
  SoftmaxRowFn softmax_row;
  ScaleRowsFn scale_rows;
  MaxAbsBitsFn max_abs_bits;
};
const Kernels& kernels() {
  static const Kernels avx512{transpose_avx512, softmax_row_avx512, scale_rows_avx512, max_abs_bits_avx512},
      avx2{transpose_avx2, softmax_row_avx2, scale_rows_avx2, max_abs_bits_avx2};
  return isa_at_least(Isa::avx512_core) ? avx512 : avx2;
}

// Element offsets of (b, head) and the row stride of a Q / K / V / Y tensor.
struct Layout {
  int64_t heads, seq, size;
  bool packed;
  int64_t base(int64_t b, int64_t h) const {
    return packed ? b * seq * heads * size + h * size : (b * heads + h) * seq * size;
  }
  int64_t row() const { return packed ? heads * size : size; }
};

// The element offset of the mask row of (b, h, query s), broadcast along each dim of size 1.
int64_t mask_row(const Mask& mask, int64_t b, int64_t h, int64_t s) {
  const int64_t* md = mask.dims;
  return (((md[0] == 1 ? 0 : b) * md[1] + (md[1] == 1 ? 0 : h)) * md[2] + (md[2] == 1 ? 0 : s)) * md[3];
}

// Query rows [s0, s1) of head h of batch b against its first T keys (attended_keys; `pack`: K^T and
// V of its kv head packed first, for those T keys).
void head(const Kernels& f, const Geometry& g, const float* q, const float* k, const float* v, const Mask& mask, float* y,
          float* kt_pack, float* v_pack, float* scores, float* factors, int64_t b, int64_t h, int64_t s0, int64_t s1,
          int64_t T, bool pack) {
  const Layout lq{g.Hq, g.S, g.D, g.packed}, lk{g.Hkv, g.T, g.D, g.packed}, lv{g.Hkv, g.T, g.Dv, g.packed},
      ly{g.Hq, g.S, g.Dv, g.packed};
  const int64_t rows = s1 - s0;
  float* yh = y + ly.base(b, h) + s0 * ly.row();
  if (T == 0) {  // no row attends to any key: zeros, as the softmax of a fully masked row gives
    for (int64_t s = 0; s < rows; ++s) std::memset(yh + s * ly.row(), 0, static_cast<size_t>(g.Dv) * sizeof(float));
    return;
  }
  const int64_t hk = h / (g.Hq / g.Hkv);
  if (pack) {  // a new kv head (query heads of one group share it), or other keys of it
    pack_kt(f.transpose, k + lk.base(b, hk), T, g.D, lk.row(), g.scale, kt_pack);
    gemm_f32::pack_b(v + lv.base(b, hk), T, g.Dv, lv.row(), 1, 1.0f, v_pack);
  }
  const gemm_f32::Epilogue none;
  gemm_f32::run_serial(q + lq.base(b, h) + s0 * lq.row(), rows, g.D, lq.row(), kt_pack, T, scores, T, none);
  const int64_t mstep = mask.dims[3] == 1 ? 0 : 1;  // (its first T values)
  bool scaled = false;  // a row left unnormalized: its output row is scaled after the product
  for (int64_t s = 0; s < rows; ++s) {
    const int64_t off = mask_row(mask, b, h, s0 + s);
    const float* mf = mask.data && !mask.boolean ? static_cast<const float*>(mask.data) + off : nullptr;
    const uint8_t* mb = mask.data && mask.boolean ? static_cast<const uint8_t*>(mask.data) + off : nullptr;
    factors[s] = f.softmax_row(scores + s * T, T, mf, mb, mstep, g.causal ? s0 + s : -1, g.probs);
    scaled |= factors[s] != 1.0f;
  }
  gemm_f32::run_serial(scores, rows, T, T, v_pack, g.Dv, yh, ly.row(), none);
  if (scaled) f.scale_rows(yh, rows, g.Dv, ly.row(), factors);
}

}  // namespace

float ProbsQuant::apply(float p) const {
  const float q = std::nearbyint(p / scale) + zero_point;
  return (std::min(std::max(q, qmin), qmax) - zero_point) * scale;
}

// AVX2 or AVX-512: gemm_f32 runs on both, and the transposes and softmax have both forms
bool available() { return isa_at_least(Isa::avx2); }

const char* impl_name() {
  return isa_at_least(Isa::avx512_core) ? "kiln_attention:avx512_core_f32" : "kiln_attention:avx2_f32";
}

size_t scratch_bytes(const Geometry& g, int threads) { return parts(g).bytes() * static_cast<size_t>(std::max(1, threads)); }

int64_t attended_keys(const Geometry& g, const float* q, const float* k, const float* v, const Mask& mask, int64_t b,
                      int64_t h, int64_t s0, int64_t s1) {
  const int64_t* md = mask.dims;
  if (!available()) return g.T;
  const Kernels& f = kernels();
  // a mask per key (one row for every query, or a row per query); quantized probabilities that
  // keep 0 at 0
  if (!g.skip_masked_keys || !mask.data || md[3] != g.T || g.T < 2 || (md[2] != 1 && md[2] != g.S)) return g.T;
  if (g.probs.on && g.probs.apply(0.0f) != 0.0f) return g.T;
  const int64_t rows = md[2] == 1 ? 1 : s1 - s0;  // the mask rows of the item
  const int64_t first = mask_row(mask, b, h, s0), hk = h / (g.Hq / g.Hkv);
  int64_t kept = 0;  // the most keys a row of the item keeps
  if (mask.boolean) {
    for (int64_t r = 0; r < rows && kept < g.T; ++r) {
      const uint8_t* m = static_cast<const uint8_t*>(mask.data) + first + r * md[3];
      int64_t keep = g.T;
      while (keep > kept && !m[keep - 1]) --keep;
      kept = std::max(kept, keep);
    }
  } else {
    if (g.causal) return g.T;  // the key of a row's largest mask value may lie after its position
    // a row's largest mask value (NaN, or none finite: every key kept)
    auto best_of = [&](const float* m) {
      float best = -std::numeric_limits<float>::infinity();
      for (int64_t t = 0; t < g.T; ++t) {
        if (std::isnan(m[t])) return std::numeric_limits<float>::quiet_NaN();
        best = std::max(best, m[t]);
      }
      return best;
    };
    // candidates: the trailing keys at least 104 below the row's best, in every row; the exact
    // test follows
    for (int64_t r = 0; r < rows && kept < g.T; ++r) {
      const float* m = static_cast<const float*>(mask.data) + first + r * md[3];
      const float best = best_of(m);
      if (!std::isfinite(best)) return g.T;  // a NaN; every key -inf (the kernel's zeros); a +inf key
      int64_t keep = g.T;
      while (keep > std::max<int64_t>(kept, 1) && m[keep - 1] <= best - 104.0f) --keep;
      kept = std::max(kept, keep);
    }
    if (kept == g.T) return g.T;
    // |score| <= |scale| D max|q| max|k| for any row and key: a dropped key's masked score is at
    // most its mask value + bound, the row's best key's at least its value - bound, and the
    // difference must stay 104 below after the float additions round (2^-20 of the magnitudes).
    // (max|q|, max|k| rather than the rows' lengths: one vector max each, where lengths in
    // double cost more than the keys saved.) Not finite: no bound.
    const Layout lq{g.Hq, g.S, g.D, g.packed}, lk{g.Hkv, g.T, g.D, g.packed};
    const double bound =
        std::fabs(static_cast<double>(g.scale)) * static_cast<double>(g.D) *
        bits_float(f.max_abs_bits(q + lq.base(b, h) + s0 * lq.row(), s1 - s0, g.D, lq.row())) *
        bits_float(f.max_abs_bits(k + lk.base(b, hk), g.T, g.D, lk.row()));
    if (!std::isfinite(bound)) return g.T;
    for (int64_t r = 0; r < rows; ++r) {
      const float* m = static_cast<const float*>(mask.data) + first + r * md[3];
      const double best = best_of(m);
      const float dropped_best = *std::max_element(m + kept, m + g.T);
      if (std::isinf(dropped_best)) continue;  // -inf: e^-inf is 0 whatever the score
      const double dropped = dropped_best;
      const double slack = std::ldexp(std::fabs(best) + std::fabs(dropped) + 2 * bound, -20);
      if (!(dropped + 2 * bound + 104.0 + slack <= best)) return g.T;
    }
  }
  if (kept == g.T) return g.T;
  // a dropped key's probability is exactly 0: its V row must be finite for 0 * v to be 0
  const Layout lv{g.Hkv, g.T, g.Dv, g.packed};
  const uint32_t v_bits = f.max_abs_bits(v + lv.base(b, hk) + kept * lv.row(), g.T - kept, g.Dv, lv.row());
  return v_bits < 0x7F800000u ? kept : g.T;  // below +inf's bits: finite
}

void transpose(const float* in, int64_t rows, int64_t cols, int64_t ld_in, float alpha, float* out, int64_t ld_out) {
  KILN_CHECK(available(), "attention_f32::transpose: the ISA in use has neither AVX-512 nor AVX2");
  kernels().transpose(in, rows, cols, ld_in, alpha, out, ld_out);
}

void run(const Geometry& g, const float* q, const float* k, const float* v, const Mask& mask, float* y, void* scratch,
         int threads) {
  KILN_CHECK(available(), "attention_f32::run: the ISA in use has neither AVX-512 nor AVX2");
  const Kernels& f = kernels();
  KILN_CHECK(g.Hkv > 0 && g.Hq % g.Hkv == 0, "attention_f32::run: query heads not a multiple of kv heads");
  const int64_t heads_total = g.B * g.Hq;
  if (heads_total <= 0 || g.S <= 0) return;
  const Parts p = parts(g);
  const int threads_in_use = std::max(1, std::min(threads, omp_get_max_threads()));
  // Items of query rows of one head: at least 8 per thread where the heads are fewer (BERT at
  // batch 1: 12 heads on 2 threads ran 1.5x faster than on 1, a head being 1/6 of a thread's
  // work), each of 16 rows or more. A thread keeps the kv head it packed for its next item of
  // the same head; an item another thread takes packs it again.
  const int64_t chunks =
      std::clamp<int64_t>((8 * threads_in_use + heads_total - 1) / heads_total, 1, std::max<int64_t>(1, g.S / 16));
  const int64_t items = heads_total * chunks;
  const int team = static_cast<int>(std::min<int64_t>(threads_in_use, items));  // no thread without an item
  WorkShare heads(items, team);  // each thread its items, then the others' last ones
  auto work = [&](int ithr) {
    float* base = reinterpret_cast<float*>(static_cast<char*>(scratch) + p.bytes() * static_cast<size_t>(ithr));
    float *kt = base, *vp = base + p.kt, *sc = vp + p.v, *fac = sc + p.scores;
    int64_t packed_b = -1, packed_hk = -1, packed_t = -1;
    heads.run(ithr, [&](int64_t w) {
      const int64_t hw = w / chunks, c = w % chunks;
      const int64_t b = hw / g.Hq, h = hw % g.Hq, hk = h / (g.Hq / g.Hkv);
      const int64_t s0 = g.S * c / chunks, s1 = g.S * (c + 1) / chunks;
      const int64_t T = attended_keys(g, q, k, v, mask, b, h, s0, s1);
      const bool pack = b != packed_b || hk != packed_hk || T != packed_t;
      head(f, g, q, k, v, mask, y, kt, vp, sc, fac, b, h, s0, s1, T, pack);
      packed_b = b;
      packed_hk = hk;
      packed_t = T;
    });
  };
  if (team == 1) {
    work(0);
    return;
  }
#pragma omp parallel num_threads(team)
  work(omp_get_thread_num());
}

}  // namespace kiln::cpu::attention_f32
