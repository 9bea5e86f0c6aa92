#include "cpu/instance_norm_f32.hpp"

#include <cmath>

#include "cpu/work_share.hpp"

namespace kiln::cpu::instance_norm_f32 {

namespace {

constexpr int kLanes = 16;

// The sum of f(p[i]) over [0, m), in kLanes partial sums of doubles (independent, so vectorised
// without reassociating one sum; doubles, so that a row of a million keeps the reference's
// digits), then the lanes added.
template <typename F>
double lane_sum(const float* p, int64_t m, F f) {
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= m; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] += f(p[i + j]);
  for (; i < m; ++i) acc[0] += f(p[i]);
  double s = 0;
  for (double a : acc) s += a;
  return s;
}

}  // namespace

const char* impl_name() { return "kiln_instance_norm_f32"; }

void run(const float* x, int64_t N, int64_t C, int64_t m, const float* scale, const float* bias, float eps, float* y) {
  if (m <= 0) return;
  const int64_t rows = N * C;
  // a row below about 16 KiB each: starting the team for few of them costs more than it saves
  const bool parallel = rows > 1 && rows * m >= (int64_t{1} << 14);
  parallel_share(rows, [&](int64_t r) {
    const float* p = x + r * m;
    float* q = y + r * m;
    const double mean = lane_sum(p, m, [](float v) { return double(v); }) / static_cast<double>(m);
    const double var =
        lane_sum(p, m, [mean](float v) { return (v - mean) * (v - mean); }) / static_cast<double>(m);
    const int64_t c = r % C;
    const double ad = scale[c] / std::sqrt(var + eps);
    const float a = static_cast<float>(ad), b = static_cast<float>(bias[c] - mean * ad);
    for (int64_t i = 0; i < m; ++i) q[i] = p[i] * a + b;
  }, parallel);
}

}  // namespace kiln::cpu::instance_norm_f32
