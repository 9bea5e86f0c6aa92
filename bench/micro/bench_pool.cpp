// 2-D max pooling on a channel-blocked input (nChw8c, what AVX2 convolutions write): kiln's
// kernel (pool_f32.hpp) against oneDNN's pooling primitive on the same bytes, warm in cache.
// args: channels, height, width, kernel, stride (0: the kernel), padding on each side.
// bytes_per_second counts input + output.
// Run: OMP_NUM_THREADS=2 build/bench/kiln_micro_bench --benchmark_filter=Pool
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "cpu/dnnl_util.hpp"
#include "cpu/pool_f32.hpp"

using namespace kiln::cpu;

namespace {

struct PoolCase {
  int64_t c, h, w, k, st, pad, cb, oh, ow;
  std::vector<float> src, dst;
  explicit PoolCase(const benchmark::State& s)
      : c(s.range(0)), h(s.range(1)), w(s.range(2)), k(s.range(3)), st(s.range(4) ? s.range(4) : k), pad(s.range(5)),
        cb((c + 7) / 8), oh((h + 2 * pad - k) / st + 1), ow((w + 2 * pad - k) / st + 1) {
    src.resize(static_cast<size_t>(cb * 8 * h * w));
    dst.resize(static_cast<size_t>(cb * 8 * oh * ow));
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-3, 3);
    for (float& x : src) x = u(rng);
  }
  void count(benchmark::State& s) const {
    s.SetBytesProcessed(static_cast<int64_t>(s.iterations()) * static_cast<int64_t>(src.size() + dst.size()) * 4);
  }
};

void BM_PoolKiln(benchmark::State& s) {
  PoolCase p(s);
  if (!pool_f32::available()) return s.SkipWithError("no AVX2");
  pool_f32::Geometry g;
  g.runs = p.cb, g.lanes = 8, g.ih = p.h, g.iw = p.w, g.oh = p.oh, g.ow = p.ow;
  g.kh = g.kw = p.k;
  g.sh = g.sw = p.st;
  g.ph = g.pw = p.pad;
  g.src = {p.cb * 8 * p.h * p.w, 8 * p.h * p.w, 8 * p.w, 8};
  g.dst = {p.cb * 8 * p.oh * p.ow, 8 * p.oh * p.ow, 8 * p.ow, 8};
  const std::vector<int64_t> columns = pool_f32::column_taps(g);
  for (auto _ : s) pool_f32::run(g, columns, p.src.data(), p.dst.data());
  p.count(s);
}

void BM_PoolOnednn(benchmark::State& s) {
  PoolCase p(s);
  using dnnl::memory;
  const memory::desc src({1, p.c, p.h, p.w}, memory::data_type::f32, memory::format_tag::nChw8c);
  const memory::desc dst({1, p.c, p.oh, p.ow}, memory::data_type::f32, memory::format_tag::nChw8c);
  dnnl::pooling_v2_forward::primitive_desc pd(
      dnnl::pooling_v2_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::pooling_max, src, dst,
                                     {p.st, p.st}, {p.k, p.k}, {0, 0}, {p.pad, p.pad}, {p.pad, p.pad}),
      cpu_engine());
  dnnl::pooling_v2_forward prim(pd);
  dnnl::stream stream(cpu_engine());
  memory sm(src, cpu_engine(), p.src.data()), dm(dst, cpu_engine(), p.dst.data());
  for (auto _ : s) prim.execute(stream, {{DNNL_ARG_SRC, sm}, {DNNL_ARG_DST, dm}});
  p.count(s);
}

// the recogniser's first MaxPool at W = 800, its third ((2, 1) in the model; 2x2 here), ResNet-like;
// GoogLeNet's 3x3 at stride 2 and at stride 1 (padded) at [2, 3, 200, 208] (one image)
#define POOL_SHAPES                                                                                      \
  Args({8, 24, 200, 2, 0, 0})->Args({32, 48, 800, 2, 0, 0})->Args({128, 12, 200, 2, 0, 0})->Args({64, 112, 112, 2, 0, 0}) \
      ->Args({64, 100, 104, 3, 2, 0})->Args({192, 50, 52, 3, 2, 0})->Args({256, 25, 26, 3, 1, 1})          \
      ->Unit(benchmark::kMicrosecond)
BENCHMARK(BM_PoolKiln)->POOL_SHAPES;
BENCHMARK(BM_PoolOnednn)->POOL_SHAPES;

}  // namespace
