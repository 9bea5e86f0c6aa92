#include "cpu/depthwise_s8.hpp"

#include <omp.h>

#include <algorithm>
#include <climits>
#include <vector>

#include <kiln/error.hpp>
#include "cpu/isa.hpp"
#include "cpu/work_share.hpp"
#include "cpu/simd_avx2.hpp"

namespace kiln::cpu::depthwise_s8 {

namespace {

// The padded width: every window inside it.
int64_t padded_width(const Geometry& g) {
  return std::max(g.W + g.pad_l, (g.OW - 1) * g.stride_w + (g.KW - 1) * g.dilation_w + 1);
}

// Input row ih less zx as floats into `dst` [PW][C], the row at column pad_l, zeros around it
// (all zeros outside the image).
KILN_AVX2 void convert_row(const uint8_t* x, bool x_signed, int32_t zx, const Geometry& g, int64_t PW, int64_t ih,
                           float* dst) {
  const int64_t C = g.C, row = PW * C;
  if (ih < 0 || ih >= g.H) {
    std::fill(dst, dst + row, 0.0f);
    return;
  }
  const int64_t n = g.W * C;
  std::fill(dst, dst + g.pad_l * C, 0.0f);
  std::fill(dst + g.pad_l * C + n, dst + row, 0.0f);
  dst += g.pad_l * C;
  const uint8_t* src = x + ih * n;
  const __m256 zxv = _mm256_set1_ps(static_cast<float>(zx));
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + i));
    const __m256i wide = x_signed ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes);
    _mm256_storeu_ps(dst + i, _mm256_sub_ps(_mm256_cvtepi32_ps(wide), zxv));
  }
  for (; i < n; ++i)
    dst[i] = static_cast<float>((x_signed ? static_cast<int32_t>(static_cast<int8_t>(src[i])) : src[i]) - zx);
}

// What the kernel stores: gemm_s16::Output's three kinds.
enum class Store { requant, scaled, int32 };

// The store's per-channel operands for the 8 channels from c, in registers.
struct StoreV {
  gemm_s16::RequantV q;  // Store::requant
  __m256 scale, bias;    // Store::scaled
  bool has_bias = false;
};

template <Store S>
KILN_AVX2 inline StoreV store_v(const gemm_s16::Output& out, int64_t c) {
  StoreV v;
  if constexpr (S == Store::requant) v.q = gemm_s16::requant_v(*out.requant, c, 8);
  if constexpr (S == Store::scaled) {
    v.scale = out.scale_count == 1 ? _mm256_set1_ps(out.scale[0]) : _mm256_loadu_ps(out.scale + c);
    v.has_bias = out.bias != nullptr;
    v.bias = v.has_bias ? _mm256_loadu_ps(out.bias + c) : _mm256_setzero_ps();
  }
  return v;
}

// 8 channels' sums (exact integers in f32) stored at element `at` of y.
template <Store S>
KILN_AVX2 inline void store8(__m256 sum, const StoreV& v, void* y, int64_t at) {
  if constexpr (S == Store::requant) {
    gemm_s16::store_requant(_mm256_cvtps_epi32(sum), v.q, 8, static_cast<uint8_t*>(y) + at);
  } else if constexpr (S == Store::scaled) {
    // the Cast (exact: the sum is an integer below 2^24), the scale Mul and the bias Add, each
    // rounded to f32: the empty asm keeps the compiler from contracting the two into an FMA
    __m256 r = _mm256_mul_ps(sum, v.scale);
    asm("" : "+x"(r));
    if (v.has_bias) r = _mm256_add_ps(r, v.bias);
    _mm256_storeu_ps(static_cast<float*>(y) + at, r);
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<int32_t*>(y) + at), _mm256_cvtps_epi32(sum));
  }
}

// Output pixels [ow, ow + NP) of one row for the 8 channels from c, from the window's rows
// `rows[kh]` (padded), stored into y (the row's start): NP independent FMA chains sharing each
// weight load.
template <int NP, Store S>
KILN_AVX2 inline void pixels8(const float* const* rows, const float* w, const Geometry& g, int64_t ow, int64_t c,
                              const StoreV& v, void* y) {
  __m256 s[NP];
#pragma GCC unroll 4
  for (int j = 0; j < NP; ++j) s[j] = _mm256_setzero_ps();
  const int64_t C = g.C;
  for (int64_t kh = 0; kh < g.KH; ++kh) {
    const float* row = rows[kh] + ow * g.stride_w * C + c;
    const float* wk = w + kh * g.KW * C + c;
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      const __m256 wv = _mm256_loadu_ps(wk + kw * C);
      const float* xk = row + kw * g.dilation_w * C;
#pragma GCC unroll 4
      for (int j = 0; j < NP; ++j)  // exact: integer products and sums below 2^24 (exact_taps)
        s[j] = _mm256_fmadd_ps(_mm256_loadu_ps(xk + j * g.stride_w * C), wv, s[j]);
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < NP; ++j) store8<S>(s[j], v, y, (ow + j) * C + c);
}

// The last channels (fewer than 8) of output pixel ow, one at a time.
template <Store S>
void tail_pixel(const float* const* rows, const float* w, const Geometry& g, const gemm_s16::Output& out, int64_t ow,
                int64_t full, void* y) {
  const int64_t C = g.C;
  int32_t acc[8];
  for (int64_t c = full; c < C; ++c) {
    float s = 0.0f;
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw)
        s += rows[kh][(ow * g.stride_w + kw * g.dilation_w) * C + c] * w[(kh * g.KW + kw) * C + c];
    acc[c - full] = static_cast<int32_t>(s);
  }
  if constexpr (S == Store::requant) {
    // the Requant's per-channel operands from `full`
    gemm_s16::Requant tail = *out.requant;
    if (tail.bias) tail.bias += full;
    if (tail.mult_count > 1) tail.mult += full;
    gemm_s16::requantize(acc, C - full, tail, static_cast<uint8_t*>(y) + ow * C + full);
  } else {
    for (int64_t c = full; c < C; ++c) {
      const int32_t a = acc[c - full];
      if constexpr (S == Store::scaled) {
        volatile float scaled = static_cast<float>(a) * out.scale[out.scale_count == 1 ? 0 : c];  // rounded, as store8
        static_cast<float*>(y)[ow * C + c] = out.bias ? scaled + out.bias[c] : scaled;
      } else {
        static_cast<int32_t*>(y)[ow * C + c] = a;
      }
    }
  }
}

// Output row oh from the window's rows, stored into y [OW][C].
template <Store S>
KILN_AVX2 void output_row(const float* const* rows, const float* w, const Geometry& g, const gemm_s16::Output& out,
                          void* y) {
  const int64_t C = g.C, full = C / 8 * 8;
  for (int64_t c = 0; c < full; c += 8) {
    const StoreV v = store_v<S>(out, c);
    int64_t ow = 0;
    for (; ow + 4 <= g.OW; ow += 4) pixels8<4, S>(rows, w, g, ow, c, v, y);
    for (; ow < g.OW; ++ow) pixels8<1, S>(rows, w, g, ow, c, v, y);
  }
  if (full == C) return;
  for (int64_t ow = 0; ow < g.OW; ++ow) tail_pixel<S>(rows, w, g, out, ow, full, y);
}

}  // namespace

bool available() { return isa_at_least(Isa::avx2); }

size_t scratch_bytes(const Geometry& g, int threads) {
  const size_t ring = static_cast<size_t>(g.KH * g.dilation_h * padded_width(g) * g.C) * sizeof(float);
  return static_cast<size_t>(std::max(threads, 1)) * ((ring + 63) / 64 * 64);
}

void run(const uint8_t* x, bool x_signed, int32_t zx, const float* w, const Geometry& g, void* y,
         const gemm_s16::Output& out, void* scratch, int threads) {
  KILN_CHECK(available() && exact_taps(g.KH * g.KW, 0), "depthwise_s8::run: needs AVX2 and a window of at most 65793 taps");
  const Store kind = out.requant ? Store::requant : out.scale ? Store::scaled : Store::int32;
  const size_t elem = kind == Store::requant ? 1 : 4;  // bytes of y per value
  const int64_t PW = padded_width(g), slots = g.KH * g.dilation_h, row = PW * g.C;
  const size_t ring_bytes = scratch_bytes(g, 1);
  const int team = std::clamp(omp_get_max_threads(), 1, std::max(threads, 1));
  WorkShare out_rows(g.OH, team);  // each thread its rows in order, then the others' last ones
#pragma omp parallel num_threads(team)
  {
    // a ring of converted input rows: row ih in slot ih mod (KH * dilation), which a window's
    // rows (KH of them, dilation apart) never share
    float* ring = reinterpret_cast<float*>(static_cast<char*>(scratch) + ring_bytes * static_cast<size_t>(omp_get_thread_num()));
    std::vector<int64_t> held(static_cast<size_t>(slots), INT64_MIN);
    std::vector<const float*> rows(static_cast<size_t>(g.KH));
    out_rows.run(omp_get_thread_num(), [&](int64_t oh) {
      for (int64_t kh = 0; kh < g.KH; ++kh) {
        const int64_t ih = oh * g.stride_h - g.pad_t + kh * g.dilation_h;
        const int64_t slot = ((ih % slots) + slots) % slots;
        float* dst = ring + slot * row;
        if (held[static_cast<size_t>(slot)] != ih) {
          convert_row(x, x_signed, zx, g, PW, ih, dst);
          held[static_cast<size_t>(slot)] = ih;
        }
        rows[static_cast<size_t>(kh)] = dst;
      }
      void* yr = static_cast<char*>(y) + static_cast<size_t>(oh * g.OW * g.C) * elem;
      if (kind == Store::requant) {
        output_row<Store::requant>(rows.data(), w, g, out, yr);
      } else if (kind == Store::scaled) {
        output_row<Store::scaled>(rows.data(), w, g, out, yr);
      } else {
        output_row<Store::int32>(rows.data(), w, g, out, yr);
      }
    });
  }
}

}  // namespace kiln::cpu::depthwise_s8
