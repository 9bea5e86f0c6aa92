#include "cpu/depthwise_s8.hpp"

#include <algorithm>
#include <vector>

#include <kiln/error.hpp>
#include "cpu/isa.hpp"
#include "cpu/simd_avx2.hpp"

namespace kiln::cpu::depthwise_s8 {

namespace {

// Input rows oh * stride - pad + kh * dilation (kh < KH) of x less zx as floats into
// rows [KH][W][C]; rows outside the image are zeros (x - x_zp is 0 in the padding).
KILN_AVX2 void convert_rows(const uint8_t* x, bool x_signed, int32_t zx, const Geometry& g, int64_t oh, float* rows) {
  const int64_t WC = g.W * g.C;
  for (int64_t kh = 0; kh < g.KH; ++kh) {
    const int64_t ih = oh * g.stride_h - g.pad_t + kh * g.dilation_h;
    float* dst = rows + kh * WC;
    if (ih < 0 || ih >= g.H) {
      std::fill(dst, dst + WC, 0.0f);
      continue;
    }
    const uint8_t* src = x + ih * WC;
    const __m256 zxv = _mm256_set1_ps(static_cast<float>(zx));
    int64_t i = 0;
    for (; i + 8 <= WC; i += 8) {
      const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + i));
      const __m256i wide = x_signed ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes);
      _mm256_storeu_ps(dst + i, _mm256_sub_ps(_mm256_cvtepi32_ps(wide), zxv));
    }
    for (; i < WC; ++i)
      dst[i] = static_cast<float>((x_signed ? static_cast<int32_t>(static_cast<int8_t>(src[i])) : src[i]) - zx);
  }
}

// Sums of output pixels [ow, ow + NP) for the 8 channels from c (all of them in range), from
// the converted rows, into acc [OW][C]: NP independent FMA chains sharing each weight load.
template <int NP>
KILN_AVX2 inline void pixels8(const float* rows, const float* w, const Geometry& g, int64_t ow, int64_t c, int32_t* acc) {
  __m256 s[NP];
#pragma GCC unroll 4
  for (int j = 0; j < NP; ++j) s[j] = _mm256_setzero_ps();
  for (int64_t kh = 0; kh < g.KH; ++kh) {
    const float* row = rows + kh * g.W * g.C;
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      const __m256 wv = _mm256_loadu_ps(w + (kh * g.KW + kw) * g.C + c);
#pragma GCC unroll 4
      for (int j = 0; j < NP; ++j) {
        const int64_t iw = (ow + j) * g.stride_w - g.pad_l + kw * g.dilation_w;
        if (iw < 0 || iw >= g.W) continue;  // padding: nothing
        // exact: integer products and sums below 2^24 (exact_taps)
        s[j] = _mm256_fmadd_ps(_mm256_loadu_ps(row + iw * g.C + c), wv, s[j]);
      }
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < NP; ++j) _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + (ow + j) * g.C + c), _mm256_cvtps_epi32(s[j]));
}

// The window sums of output row oh into acc [OW][C] (int32), from its converted input rows.
KILN_AVX2 void row_sums(const float* rows, const float* w, const Geometry& g, int32_t* acc) {
  const int64_t C = g.C, full = C / 8 * 8;
  for (int64_t c = 0; c < full; c += 8) {
    int64_t ow = 0;
    for (; ow + 4 <= g.OW; ow += 4) pixels8<4>(rows, w, g, ow, c, acc);
    for (; ow < g.OW; ++ow) pixels8<1>(rows, w, g, ow, c, acc);
  }
  for (int64_t c = full; c < C; ++c)  // the last channels one at a time
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      float s = 0.0f;
      for (int64_t kh = 0; kh < g.KH; ++kh)
        for (int64_t kw = 0; kw < g.KW; ++kw) {
          const int64_t iw = ow * g.stride_w - g.pad_l + kw * g.dilation_w;
          if (iw >= 0 && iw < g.W) s += rows[(kh * g.W + iw) * C + c] * w[(kh * g.KW + kw) * C + c];
        }
      acc[ow * C + c] = static_cast<int32_t>(s);
    }
}

}  // namespace

bool available() { return isa_at_least(Isa::avx2); }

void run(const uint8_t* x, bool x_signed, int32_t zx, const float* w, const Geometry& g, uint8_t* y,
         const gemm_s16::Requant& q) {
  KILN_CHECK(available() && exact_taps(g.KH * g.KW), "depthwise_s8::run: needs AVX2 and a window of at most 514 taps");
#pragma omp parallel
  {
    std::vector<int32_t> acc(static_cast<size_t>(g.OW * g.C));
    std::vector<float> rows(static_cast<size_t>(g.KH * g.W * g.C));
#pragma omp for schedule(static)
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      convert_rows(x, x_signed, zx, g, oh, rows.data());
      row_sums(rows.data(), w, g, acc.data());
      for (int64_t ow = 0; ow < g.OW; ++ow)
        gemm_s16::requantize(acc.data() + ow * g.C, g.C, q, y + (oh * g.OW + ow) * g.C);
    }
  }
}

}  // namespace kiln::cpu::depthwise_s8
