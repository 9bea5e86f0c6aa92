#include "cpu/gru_f32.hpp"

#include <cstring>

#include <kiln/error.hpp>

#include "cpu/gemm_f32.hpp"
#include "cpu/isa.hpp"
#include "cpu/rnn_directions.hpp"
#include "cpu/simd_avx2.hpp"
#include "cpu/simd_avx512.hpp"

namespace kiln::cpu::gru_f32 {

namespace {

using namespace simd;

int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }

// A direction's working memory: the input projections [T*N, 3H], the recurrent products
// Q [N, 3H] (z, r, then h's), the state h [N, H] and r * h [N, H].
struct Work {
  float *gates, *q, *h, *rh;
};
size_t per_direction_floats(const Geometry& g) {
  return static_cast<size_t>(round16(g.T * g.N * 3 * g.H) + round16(g.N * 3 * g.H) + 2 * round16(g.N * g.H));
}
Work carve(const Geometry& g, float* base) {
  Work w;
  w.gates = base;
  w.q = w.gates + round16(g.T * g.N * 3 * g.H);
  w.h = w.q + round16(g.N * 3 * g.H);
  w.rh = w.h + round16(g.N * g.H);
  return w;
}

// linear_before_reset: gates gt and products q [N, 3H] (q's h columns already with Rbh) -> h.
KILN_AVX512 void cell_lbr_avx512(const float* gt, const float* q, int64_t N, int64_t H, float* h) {
  for (int64_t n = 0; n < N; ++n) {
    const float *g = gt + n * 3 * H, *qn = q + n * 3 * H;
    float* hn = h + n * H;
    for (int64_t j = 0; j < H; j += 16) {
      const __mmask16 k = tail_mask(H - j);
      const __m512 gz = _mm512_maskz_loadu_ps(k, g + j), qz = _mm512_maskz_loadu_ps(k, qn + j);
      const __m512 gr = _mm512_maskz_loadu_ps(k, g + H + j), qr = _mm512_maskz_loadu_ps(k, qn + H + j);
      const __m512 gh = _mm512_maskz_loadu_ps(k, g + 2 * H + j), qh = _mm512_maskz_loadu_ps(k, qn + 2 * H + j);
      const __m512 z = v_logistic(_mm512_add_ps(gz, qz)), r = v_logistic(_mm512_add_ps(gr, qr));
      const __m512 c = v_tanh(_mm512_fmadd_ps(r, qh, gh));
      const __m512 hp = _mm512_maskz_loadu_ps(k, hn + j);
      _mm512_mask_storeu_ps(hn + j, k, _mm512_fmadd_ps(z, _mm512_sub_ps(hp, c), c));  // c + z (h - c)
    }
  }
}

// Without linear_before_reset, first half: z into q's z columns, r * h into rh.
KILN_AVX512 void gates_zr_avx512(const float* gt, float* q, int64_t N, int64_t H, const float* h, float* rh) {
  for (int64_t n = 0; n < N; ++n) {
    const float* g = gt + n * 3 * H;
    float* qn = q + n * 3 * H;
    for (int64_t j = 0; j < H; j += 16) {
      const __mmask16 k = tail_mask(H - j);
      const __m512 gz = _mm512_maskz_loadu_ps(k, g + j), qz = _mm512_maskz_loadu_ps(k, qn + j);
      const __m512 gr = _mm512_maskz_loadu_ps(k, g + H + j), qr = _mm512_maskz_loadu_ps(k, qn + H + j);
      _mm512_mask_storeu_ps(qn + j, k, v_logistic(_mm512_add_ps(gz, qz)));
      const __m512 r = v_logistic(_mm512_add_ps(gr, qr));
      _mm512_mask_storeu_ps(rh + n * H + j, k, _mm512_mul_ps(r, _mm512_maskz_loadu_ps(k, h + n * H + j)));
    }
  }
}

// Second half: n = tanh(Gh + (r h) Rh^T), h = c + z (h - c), z from q's z columns.
KILN_AVX512 void cell_avx512(const float* gt, const float* q, int64_t N, int64_t H, float* h) {
  for (int64_t n = 0; n < N; ++n) {
    const float *g = gt + n * 3 * H, *qn = q + n * 3 * H;
    float* hn = h + n * H;
    for (int64_t j = 0; j < H; j += 16) {
      const __mmask16 k = tail_mask(H - j);
      const __m512 gh = _mm512_maskz_loadu_ps(k, g + 2 * H + j), qh = _mm512_maskz_loadu_ps(k, qn + 2 * H + j);
      const __m512 c = v_tanh(_mm512_add_ps(gh, qh));
      const __m512 z = _mm512_maskz_loadu_ps(k, qn + j), hp = _mm512_maskz_loadu_ps(k, hn + j);
      _mm512_mask_storeu_ps(hn + j, k, _mm512_fmadd_ps(z, _mm512_sub_ps(hp, c), c));
    }
  }
}

// The same three on 8 lanes.
KILN_AVX2 void cell_lbr_avx2(const float* gt, const float* q, int64_t N, int64_t H, float* h) {
  for (int64_t n = 0; n < N; ++n) {
    const float *g = gt + n * 3 * H, *qn = q + n * 3 * H;
    float* hn = h + n * H;
    for (int64_t j = 0; j < H; j += 8) {
      const int64_t left = H - j;
      const __m256 gz = v_load8(g + j, left), qz = v_load8(qn + j, left);
      const __m256 gr = v_load8(g + H + j, left), qr = v_load8(qn + H + j, left);
      const __m256 gh = v_load8(g + 2 * H + j, left), qh = v_load8(qn + 2 * H + j, left);
      const __m256 z = v_logistic8(_mm256_add_ps(gz, qz)), r = v_logistic8(_mm256_add_ps(gr, qr));
      const __m256 c = v_tanh8(_mm256_fmadd_ps(r, qh, gh));
      v_store8(hn + j, left, _mm256_fmadd_ps(z, _mm256_sub_ps(v_load8(hn + j, left), c), c));
    }
  }
}

KILN_AVX2 void gates_zr_avx2(const float* gt, float* q, int64_t N, int64_t H, const float* h, float* rh) {
  for (int64_t n = 0; n < N; ++n) {
    const float* g = gt + n * 3 * H;
    float* qn = q + n * 3 * H;
    for (int64_t j = 0; j < H; j += 8) {
      const int64_t left = H - j;
      const __m256 gz = v_load8(g + j, left), qz = v_load8(qn + j, left);
      const __m256 gr = v_load8(g + H + j, left), qr = v_load8(qn + H + j, left);
      v_store8(qn + j, left, v_logistic8(_mm256_add_ps(gz, qz)));
      const __m256 r = v_logistic8(_mm256_add_ps(gr, qr));
      v_store8(rh + n * H + j, left, _mm256_mul_ps(r, v_load8(h + n * H + j, left)));
    }
  }
}

KILN_AVX2 void cell_avx2(const float* gt, const float* q, int64_t N, int64_t H, float* h) {
  for (int64_t n = 0; n < N; ++n) {
    const float *g = gt + n * 3 * H, *qn = q + n * 3 * H;
    float* hn = h + n * H;
    for (int64_t j = 0; j < H; j += 8) {
      const int64_t left = H - j;
      const __m256 c = v_tanh8(_mm256_add_ps(v_load8(g + 2 * H + j, left), v_load8(qn + 2 * H + j, left)));
      v_store8(hn + j, left, _mm256_fmadd_ps(v_load8(qn + j, left), _mm256_sub_ps(v_load8(hn + j, left), c), c));
    }
  }
}

void direction(const Geometry& g, const Weights& w, int64_t d, bool reverse, const float* x, const float* h0, float* y,
               float* y_h, float* base, bool parallel) {
  const int64_t T = g.T, N = g.N, H = g.H, G3 = 3 * g.H;
  const Work wk = carve(g, base);
  const size_t state = static_cast<size_t>(N * H) * sizeof(float);
  if (h0) std::memcpy(wk.h, h0 + d * N * H, state); else std::memset(wk.h, 0, state);
  // the input projection of every step at once, with the biases that add outside the gates
  gemm_f32::Epilogue in;
  in.bias = w.bias[d];
  if (parallel) gemm_f32::run(x, T * N, g.C, g.C, w.w[d], G3, wk.gates, G3, in);
  else gemm_f32::run_serial(x, T * N, g.C, g.C, w.w[d], G3, wk.gates, G3, in);
  const gemm_f32::Epilogue plain;
  gemm_f32::Epilogue with_rbh;  // linear_before_reset: h Rh^T + Rbh
  with_rbh.bias = w.rb_h[d];
  const bool avx512 = isa_at_least(Isa::avx512_core);
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = reverse ? T - 1 - s : s;
    const float* gt = wk.gates + t * N * G3;
    gemm_f32::run_serial(wk.h, N, H, H, w.r_zr[d], 2 * H, wk.q, G3, plain);  // Q's z, r = h Rzr^T
    if (g.linear_before_reset) {
      gemm_f32::run_serial(wk.h, N, H, H, w.r_h[d], H, wk.q + 2 * H, G3, with_rbh);
      (avx512 ? cell_lbr_avx512 : cell_lbr_avx2)(gt, wk.q, N, H, wk.h);
    } else {
      (avx512 ? gates_zr_avx512 : gates_zr_avx2)(gt, wk.q, N, H, wk.h, wk.rh);
      gemm_f32::run_serial(wk.rh, N, H, H, w.r_h[d], H, wk.q + 2 * H, G3, plain);  // (r h) Rh^T
      (avx512 ? cell_avx512 : cell_avx2)(gt, wk.q, N, H, wk.h);
    }
    if (y) {
      float* yt = y + (t * g.D + d) * N * H;  // Y [T, D, N, H]: direction d's [N, H] of step t
      std::memcpy(yt, wk.h, state);
    }
  }
  if (y_h) std::memcpy(y_h + d * N * H, wk.h, state);
}

}  // namespace

// its gates' math has AVX-512 and AVX2 forms, and gemm_f32 runs on both
bool available() { return isa_at_least(Isa::avx2); }

const char* impl_name() { return isa_at_least(Isa::avx512_core) ? "kiln_gru:avx512_core_f32" : "kiln_gru:avx2_f32"; }

size_t scratch_bytes(const Geometry& g) { return per_direction_floats(g) * static_cast<size_t>(g.D) * sizeof(float); }

void run(const Geometry& g, const Weights& w, const float* x, const float* h0, float* y, float* y_h, void* scratch,
         int threads) {
  KILN_CHECK(available(), "gru_f32::run: the ISA in use has neither AVX-512 nor AVX2");
  KILN_CHECK(g.D == 1 || g.D == 2, "gru_f32::run: one or two directions");
  if (g.T <= 0 || g.N <= 0 || g.H <= 0) return;
  float* work = static_cast<float*>(scratch);
  const size_t per = per_direction_floats(g);
  for_each_direction(g.D, g.reverse, threads, [&](int64_t d, bool reverse, bool parallel) {
    direction(g, w, d, reverse, x, h0, y, y_h, work + d * per, parallel);
  });
}

}  // namespace kiln::cpu::gru_f32
