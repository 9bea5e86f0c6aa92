#include "cpu/lstm_f32.hpp"

#include <algorithm>
#include <cstring>

#include <kiln/error.hpp>

#include "cpu/gemm_f32.hpp"
#include "cpu/isa.hpp"
#include "cpu/rnn_directions.hpp"
#include "cpu/simd_avx2.hpp"
#include "cpu/simd_avx512.hpp"

namespace kiln::cpu::lstm_f32 {

namespace {

using namespace simd;

size_t per_direction_floats(const Geometry& g) {
  const auto round16 = [](int64_t n) { return static_cast<size_t>((n + 15) / 16 * 16); };
  return round16(g.T * g.N * 4 * g.H) + 2 * round16(g.N * g.H);  // gates, h, c
}

// One step's cell update for each of the N rows: gates [N, 4H] (i, o, f, c) -> c, h in place.
KILN_AVX512 void cell_avx512(const float* gates, int64_t N, int64_t H, float* h, float* c) {
  for (int64_t n = 0; n < N; ++n) {
    const float* gi = gates + n * 4 * H;
    float* hn = h + n * H;
    float* cn = c + n * H;
    for (int64_t j = 0; j < H; j += 16) {
      const __mmask16 k = tail_mask(H - j);
      const __m512 i = v_logistic(_mm512_maskz_loadu_ps(k, gi + j));
      const __m512 o = v_logistic(_mm512_maskz_loadu_ps(k, gi + H + j));
      const __m512 f = v_logistic(_mm512_maskz_loadu_ps(k, gi + 2 * H + j));
      const __m512 z = v_tanh(_mm512_maskz_loadu_ps(k, gi + 3 * H + j));
      const __m512 cv = _mm512_fmadd_ps(f, _mm512_maskz_loadu_ps(k, cn + j), _mm512_mul_ps(i, z));
      _mm512_mask_storeu_ps(cn + j, k, cv);
      _mm512_mask_storeu_ps(hn + j, k, _mm512_mul_ps(o, v_tanh(cv)));
    }
  }
}

// cell_avx512 on 8 lanes.
KILN_AVX2 void cell_avx2(const float* gates, int64_t N, int64_t H, float* h, float* c) {
  for (int64_t n = 0; n < N; ++n) {
    const float* gi = gates + n * 4 * H;
    float* hn = h + n * H;
    float* cn = c + n * H;
    for (int64_t j = 0; j < H; j += 8) {
      const int64_t left = H - j;
      const __m256 i = v_logistic8(v_load8(gi + j, left));
      const __m256 o = v_logistic8(v_load8(gi + H + j, left));
      const __m256 f = v_logistic8(v_load8(gi + 2 * H + j, left));
      const __m256 z = v_tanh8(v_load8(gi + 3 * H + j, left));
      const __m256 cv = _mm256_fmadd_ps(f, v_load8(cn + j, left), _mm256_mul_ps(i, z));
      v_store8(cn + j, left, cv);
      v_store8(hn + j, left, _mm256_mul_ps(o, v_tanh8(cv)));
    }
  }
}

void direction(const Geometry& g, const Weights& w, int64_t d, bool reverse, const float* x, const float* h0,
               const float* c0, float* y, float* y_h, float* y_c, float* work, bool parallel) {
  const int64_t T = g.T, N = g.N, H = g.H, G4 = 4 * g.H;
  float* gates = work;
  float* h = work + per_direction_floats(g) - 2 * static_cast<size_t>((N * H + 15) / 16 * 16);
  float* c = h + (N * H + 15) / 16 * 16;
  const size_t state = static_cast<size_t>(N * H) * sizeof(float);
  if (h0) std::memcpy(h, h0 + d * N * H, state); else std::memset(h, 0, state);
  if (c0) std::memcpy(c, c0 + d * N * H, state); else std::memset(c, 0, state);
  // the input projection of every step at once, with both biases
  gemm_f32::Epilogue in;
  in.bias = w.bias[d];
  if (parallel) gemm_f32::run(x, T * N, g.C, g.C, w.w[d], G4, gates, G4, in);
  else gemm_f32::run_serial(x, T * N, g.C, g.C, w.w[d], G4, gates, G4, in);
  gemm_f32::Epilogue add;
  add.accumulate = true;
  const auto cell = isa_at_least(Isa::avx512_core) ? cell_avx512 : cell_avx2;
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = reverse ? T - 1 - s : s;
    float* gt = gates + t * N * G4;
    gemm_f32::run_serial(h, N, H, H, w.r[d], G4, gt, G4, add);  // + h R^T
    cell(gt, N, H, h, c);
    if (y)
      for (int64_t n = 0; n < N; ++n) std::memcpy(y + ((t * g.D + d) * N + n) * H, h + n * H, static_cast<size_t>(H) * sizeof(float));
  }
  if (y_h) std::memcpy(y_h + d * N * H, h, state);
  if (y_c) std::memcpy(y_c + d * N * H, c, state);
}

}  // namespace

// its gates' math has AVX-512 and AVX2 forms, and gemm_f32 runs on both
bool available() { return isa_at_least(Isa::avx2); }

const char* impl_name() { return isa_at_least(Isa::avx512_core) ? "kiln_lstm:avx512_core_f32" : "kiln_lstm:avx2_f32"; }

size_t scratch_bytes(const Geometry& g) { return per_direction_floats(g) * static_cast<size_t>(g.D) * sizeof(float); }

void run(const Geometry& g, const Weights& w, const float* x, const float* h0, const float* c0, float* y, float* y_h,
         float* y_c, void* scratch, int threads) {
  KILN_CHECK(available(), "lstm_f32::run: the ISA in use has neither AVX-512 nor AVX2");
  KILN_CHECK(g.D == 1 || g.D == 2, "lstm_f32::run: one or two directions");
  if (g.T <= 0 || g.N <= 0 || g.H <= 0) return;
  float* work = static_cast<float*>(scratch);
  const size_t per = per_direction_floats(g);
  for_each_direction(g.D, g.reverse, threads, [&](int64_t d, bool reverse, bool parallel) {
    direction(g, w, d, reverse, x, h0, c0, y, y_h, y_c, work + d * per, parallel);
  });
}

}  // namespace kiln::cpu::lstm_f32
