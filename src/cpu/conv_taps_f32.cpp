#include "cpu/conv_taps_f32.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>

namespace kiln::cpu::conv_taps_f32 {

std::optional<Plan> plan(const im2col_f32::Geometry& g, int64_t batch, int64_t m) {
  if (g.stride_h != 1 || g.stride_w != 1 || g.oh != g.h || g.ow != g.w || batch < 1 || g.h < 1 || g.w < 1)
    return std::nullopt;
  Plan p;
  p.batch = batch, p.c = g.c, p.h = g.h, p.w = g.w, p.m = m, p.window = g.kh * g.kw;
  bool centered = false;
  for (int64_t th = 0; th < g.kh; ++th) {
    for (int64_t tw = 0; tw < g.kw; ++tw) {
      Tap t;
      t.index = th * g.kw + tw;
      t.dh = th * g.dil_h - g.pad_t;
      t.dw = tw * g.dil_w - g.pad_l;
      // output rows r with 0 <= r + dh < h, columns alike
      t.r0 = std::max<int64_t>(0, -t.dh), t.r1 = std::min(g.h, g.h - t.dh);
      t.c0 = std::max<int64_t>(0, -t.dw), t.c1 = std::min(g.w, g.w - t.dw);
      if (t.r0 >= t.r1 || t.c0 >= t.c1) continue;  // reads padding only
      p.live_pixels += t.pixels();
      if (t.dh == 0 && t.dw == 0) {
        p.center = t.index;
        centered = true;
      } else {
        p.others.push_back(t);
      }
    }
  }
  if (!centered || p.live_pixels > kMaxLiveRatio * g.h * g.w) return std::nullopt;
  return p;
}

namespace {

// Whether a tap's columns are whole output rows: then its pixels of consecutive rows are
// consecutive in x and y both, and its GEMM reads and adds in place.
bool whole_rows(const Plan& p, const Tap& t) { return t.c0 == 0 && t.c1 == p.w; }

}  // namespace

int64_t scratch_floats(const Plan& p) {
  int64_t most = 0;
  for (const Tap& t : p.others)
    if (!whole_rows(p, t)) most = std::max(most, p.batch * t.pixels() * (p.c + p.m));
  return most;
}

int64_t packed_floats(int64_t c, int64_t m, int64_t window) { return window * gemm_f32::packed_size(c, m); }

void pack(const float* w, int64_t c, int64_t m, int64_t window, float* out) {
  const int64_t per_tap = gemm_f32::packed_size(c, m);
  // B_t(k, n) = w[n][k][t]: k every window-th float, n every c * window-th
  for (int64_t t = 0; t < window; ++t) gemm_f32::pack_b(w + t, c, m, window, c * window, 1.0f, out + t * per_tap);
}

void split_epilogue(const Plan& p, const gemm_f32::Epilogue& epilogue, gemm_f32::Epilogue* first,
                    gemm_f32::Epilogue* last) {
  // the centre writes every output pixel: the bias, and onto the summand when accumulating;
  // the ops wait for the last tap
  *first = {};
  *last = {};
  first->bias = epilogue.bias;
  first->accumulate = epilogue.accumulate;
  (p.others.empty() ? first : last)->ops = epilogue.ops;
}

void run(const Plan& p, const float* x, const float* packed, float* y, const gemm_f32::Epilogue& first,
         const gemm_f32::Epilogue& last, float* scratch, int threads) {
  const int64_t per_tap = gemm_f32::packed_size(p.c, p.m);
  gemm_f32::run(x, p.batch * p.h * p.w, p.c, p.c, packed + p.center * per_tap, p.m, y, p.m, first);
  if (p.others.empty()) return;
  gemm_f32::Epilogue add;
  add.accumulate = true;
  const gemm_f32::Epilogue product;  // C = A x B
  for (const Tap& t : p.others) {
    const float* b = packed + t.index * per_tap;
    const int64_t rows = t.r1 - t.r0, cols = t.c1 - t.c0;
    if (whole_rows(p, t)) {
      for (int64_t img = 0; img < p.batch; ++img)
        gemm_f32::run(x + ((img * p.h + t.r0 + t.dh) * p.w) * p.c, rows * p.w, p.c, p.c, b, p.m,
                      y + ((img * p.h + t.r0) * p.w) * p.m, p.m, add);
      continue;
    }
    // the tap's pixels, row by row into `a` ([pixels][c]); their products into `acc` ([pixels][m])
    const int64_t lines = p.batch * rows, pixels = lines * cols;
    float* a = scratch;
    float* acc = scratch + pixels * p.c;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < lines; ++i) {
      const int64_t img = i / rows, r = t.r0 + i % rows;
      std::memcpy(a + i * cols * p.c, x + ((img * p.h + r + t.dh) * p.w + t.c0 + t.dw) * p.c,
                  static_cast<size_t>(cols * p.c) * sizeof(float));
    }
    gemm_f32::run(a, pixels, p.c, p.c, b, p.m, acc, p.m, product);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < lines; ++i) {
      const int64_t img = i / rows, r = t.r0 + i % rows;
      float* out = y + ((img * p.h + r) * p.w + t.c0) * p.m;
      const float* in = acc + i * cols * p.m;
      for (int64_t j = 0; j < cols * p.m; ++j) out[j] += in[j];
    }
  }
  if (last.ops.empty()) return;
  const int64_t all = p.batch * p.h * p.w;
#pragma omp parallel num_threads(threads)
  {
    const int64_t k = omp_get_thread_num(), n = omp_get_num_threads();
    const int64_t begin = all * k / n, end = all * (k + 1) / n;
    if (end > begin) gemm_f32::apply_epilogue(y + begin * p.m, end - begin, p.m, p.m, last);
  }
}

}  // namespace kiln::cpu::conv_taps_f32
