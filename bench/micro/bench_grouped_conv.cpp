// kiln's grouped convolution (cpu/grouped_conv_f32.hpp) on RegNet-Y-400MF's layers (8 channels
// a group) and ResNeXt-50 32x4d's first stage (4 a group), one thread, the rows of one image
// (input channels-last, 3x3, pads 1): GFLOP/s.
// Run: build/bench/kiln_micro_bench --benchmark_filter=GroupedConv
// (KILN_MAX_CPU_ISA=AVX2 for the AVX2 form on an AVX-512 CPU)
#include <benchmark/benchmark.h>

#include <vector>

#include "cpu/grouped_conv_f32.hpp"

namespace {

using kiln::cpu::grouped_conv_f32::Geometry;

// Arguments: channels, size (square), stride, channels a group
void BM_GroupedConv(benchmark::State& state) {
  namespace gc = kiln::cpu::grouped_conv_f32;
  if (!gc::available()) {
    state.SkipWithError("no AVX2: grouped_conv_f32 does not run here");
    return;
  }
  Geometry g;
  g.c = g.m = state.range(0);
  const int64_t per_group = state.range(3);
  g.groups = g.c / per_group;
  g.h = g.w = state.range(1);
  g.stride_h = g.stride_w = state.range(2);
  g.kh = g.kw = 3;
  g.pad_t = g.pad_l = 1;
  g.oh = (g.h + 2 - 3) / g.stride_h + 1;
  g.ow = (g.w + 2 - 3) / g.stride_w + 1;
  std::vector<float> x(static_cast<size_t>(g.h * g.w * g.c), 0.5f), w(static_cast<size_t>(g.m * per_group * 9), 0.1f);
  std::vector<float> packed(static_cast<size_t>(gc::packed_size(g))), y(static_cast<size_t>(g.oh * g.ow * g.m));
  std::vector<float> scratch(static_cast<size_t>(gc::scratch_floats(g)));
  gc::pack_weights(g, w.data(), packed.data());
  for (auto _ : state) {
    gc::rows(g, x.data(), packed.data(), 0, g.oh, y.data(), scratch.data());
    benchmark::DoNotOptimize(y.data());
  }
  const double flops = 2.0 * static_cast<double>(g.oh * g.ow * g.m * per_group) * 9;
  state.counters["GFLOPs"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}
// RegNet-Y-400MF's stages at a 224 x 224 input: 48 channels at 56, 104 at 28, 208 at 14, 440 at 7
BENCHMARK(BM_GroupedConv)->Name("BM_GroupedConvRegNet")->Args({48, 56, 1, 8})->Args({104, 28, 1, 8})->Args({208, 14, 1, 8})->Args({440, 7, 1, 8})->Args({104, 56, 2, 8});
// ResNeXt-50 32x4d's stages at a 224 x 224 input (32 groups: of 4 channels at 56, 8 at 28, 16 at
// 14, 32 at 7), and the first layer of the last three, at stride 2
BENCHMARK(BM_GroupedConv)->Name("BM_GroupedConvResNeXt")->Args({128, 56, 1, 4})->Args({256, 28, 1, 8})->Args({512, 14, 1, 16})->Args({1024, 7, 1, 32})->Args({256, 56, 2, 8})->Args({512, 28, 2, 16})->Args({1024, 14, 2, 32})->Args({512, 13, 1, 16})->Args({128, 52, 1, 4});

}  // namespace
