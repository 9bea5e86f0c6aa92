// kiln's f32 GEMM (cpu/gemm_f32.hpp) against oneDNN's matmul primitive (brgemm) on the
// FullyConnected shapes of a BERT layer and of ConvNeXt-tiny's MLPs (stage 1: 56 x 56 tokens of
// 96 channels, stage 3: 14 x 14 of 384): [M, K] x [K, N], B packed once, no epilogue.
// items_per_second counts floating-point operations (2 M N K per call), so the column reads
// as FLOP/s; compare it with the FMA peak of ../shared/bench/limits.cpp.
// Run: OMP_NUM_THREADS=2 build/bench/kiln_micro_bench --benchmark_filter=Gemm
#include <benchmark/benchmark.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <algorithm>
#include <cstring>
#include <random>
#include <sys/mman.h>
#include <vector>

#include "core/pages.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/gemm_f32.hpp"
#include "cpu/gemm_s16.hpp"

using namespace kiln;

namespace {

std::vector<float> uniform(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (auto& x : v) x = u(rng);
  return v;
}

// A, B packed, C and an epilogue with a bias, for the epilogue benchmarks.
struct WithBias {
  std::vector<float> a, bias, packed, c;
  cpu::gemm_f32::Epilogue ep;
  WithBias(int64_t M, int64_t K, int64_t N)
      : a(uniform(M * K, 1)), bias(uniform(N, 3)), packed(static_cast<size_t>(cpu::gemm_f32::packed_size(K, N))),
        c(static_cast<size_t>(M * N)) {
    const auto b = uniform(K * N, 2);
    cpu::gemm_f32::pack_b(b.data(), K, N, N, 1, 1.0f, packed.data());
    ep.bias = bias.data();
  }
};

void BM_GemmKiln(benchmark::State& s) {
  const int64_t M = s.range(0), K = s.range(1), N = s.range(2);
  if (!cpu::gemm_f32::available()) {
    s.SkipWithError("no AVX-512: kiln's GEMM does not run here");
    return;
  }
  const auto a = uniform(M * K, 1), b = uniform(K * N, 2);
  std::vector<float> packed(static_cast<size_t>(cpu::gemm_f32::packed_size(K, N))), c(static_cast<size_t>(M * N));
  cpu::gemm_f32::pack_b(b.data(), K, N, N, 1, 1.0f, packed.data());
  const cpu::gemm_f32::Epilogue ep;
  for (auto _ : s) {
    cpu::gemm_f32::run(a.data(), M, K, K, packed.data(), N, c.data(), N, ep);
    benchmark::DoNotOptimize(c.data());
  }
  s.SetItemsProcessed(s.iterations() * 2 * M * N * K);
}

// The same with a bias and an eltwise epilogue: GELU (erf), as a transformer's or ConvNeXt's MLP
// up-projection (with K as small as ConvNeXt's 96, the epilogue's cost is of the order of the
// products'); Swish, as EfficientNet's expand convolutions.
template <dnnl::algorithm ALG>
void BM_GemmKilnEltwise(benchmark::State& s) {
  const int64_t M = s.range(0), K = s.range(1), N = s.range(2);
  if (!cpu::gemm_f32::available()) {
    s.SkipWithError("no AVX2: kiln's GEMM does not run here");
    return;
  }
  WithBias p(M, K, N);
  cpu::gemm_f32::EpilogueOp op;
  op.alg = ALG;
  op.alpha = 1.0f;  // Swish's beta (oneDNN's alpha)
  p.ep.ops.push_back(op);
  for (auto _ : s) {
    cpu::gemm_f32::run(p.a.data(), M, K, K, p.packed.data(), N, p.c.data(), N, p.ep);
    benchmark::DoNotOptimize(p.c.data());
  }
  s.SetItemsProcessed(s.iterations() * 2 * M * N * K);
}
void BM_GemmKilnGelu(benchmark::State& s) { BM_GemmKilnEltwise<dnnl::algorithm::eltwise_gelu_erf>(s); }
void BM_GemmKilnSwish(benchmark::State& s) { BM_GemmKilnEltwise<dnnl::algorithm::eltwise_swish>(s); }

// One thread (run_serial), bias and Clip(0, 6) in registers, at the shapes DepthwiseBlock calls
// on MobileNet-v2 (48 rows: a few image rows): its 1x1 expansions (K 16-96, N 6x K) and
// projections (N 24-96), where the epilogue and the block's setup weigh against few products.
void BM_GemmKilnSerialClip(benchmark::State& s) {
  const int64_t M = s.range(0), K = s.range(1), N = s.range(2);
  if (!cpu::gemm_f32::available()) {
    s.SkipWithError("no AVX2: kiln's GEMM does not run here");
    return;
  }
  WithBias p(M, K, N);
  cpu::gemm_f32::EpilogueOp clip;
  clip.alg = dnnl::algorithm::eltwise_clip;
  clip.alpha = 0.0f, clip.beta = 6.0f;
  p.ep.ops.push_back(clip);
  for (auto _ : s) {
    cpu::gemm_f32::run_serial(p.a.data(), M, K, K, p.packed.data(), N, p.c.data(), N, p.ep);
    benchmark::DoNotOptimize(p.c.data());
  }
  s.SetItemsProcessed(s.iterations() * 2 * M * N * K);
}
// The same with the weights cold, as in a model: a rotation of B matrices (64 MiB in all, more
// than the last-level cache) so that each call reads its B from memory.
void BM_GemmKilnCold(benchmark::State& s) {
  const int64_t M = s.range(0), K = s.range(1), N = s.range(2);
  if (!cpu::gemm_f32::available()) {
    s.SkipWithError("no AVX-512: kiln's GEMM does not run here");
    return;
  }
  const int64_t size = cpu::gemm_f32::packed_size(K, N);
  const int64_t copies = std::max<int64_t>(2, (int64_t{64} << 20) / (size * 4));
  const auto a = uniform(M * K, 1), b = uniform(K * N, 2);
  std::vector<float> packed(static_cast<size_t>(size * copies)), c(static_cast<size_t>(M * N));
  for (int64_t i = 0; i < copies; ++i) cpu::gemm_f32::pack_b(b.data(), K, N, N, 1, 1.0f, packed.data() + i * size);
  const cpu::gemm_f32::Epilogue ep;
  int64_t i = 0;
  for (auto _ : s) {
    cpu::gemm_f32::run(a.data(), M, K, K, packed.data() + (i++ % copies) * size, N, c.data(), N, ep);
    benchmark::DoNotOptimize(c.data());
  }
  s.SetItemsProcessed(s.iterations() * 2 * M * N * K);
}

// C rotating over buffers that together pass the L3 (48 MiB or more): each product writes memory
// that is not in cache, as a network's arena tensors (EfficientNet-B0's 8 MB expansions).
void BM_GemmKilnColdC(benchmark::State& s) {
  const int64_t M = s.range(0), K = s.range(1), N = s.range(2);
  if (!cpu::gemm_f32::available()) {
    s.SkipWithError("no AVX2: kiln's GEMM does not run here");
    return;
  }
  const int64_t copies = std::max<int64_t>(2, (int64_t{48} << 20) / (M * N * 4) + 1);
  WithBias p(M, K, N);
  std::vector<float> c(static_cast<size_t>(M * N * copies), 1.0f);
  int64_t i = 0;
  for (auto _ : s) {
    cpu::gemm_f32::run(p.a.data(), M, K, K, p.packed.data(), N, c.data() + (i++ % copies) * M * N, N, p.ep);
    benchmark::DoNotOptimize(c.data());
  }
  s.SetItemsProcessed(s.iterations() * 2 * M * N * K);
}

void BM_GemmOneDnn(benchmark::State& s) {
  const int64_t M = s.range(0), K = s.range(1), N = s.range(2);
  using dnnl::memory;
  const auto f32 = memory::data_type::f32;
  memory::desc a_md({M, K}, f32, memory::format_tag::ab), c_md({M, N}, f32, memory::format_tag::ab);
  memory::desc b_any({K, N}, f32, memory::format_tag::any), b_plain({K, N}, f32, memory::format_tag::ab);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_any, c_md), cpu::cpu_engine());
  dnnl::matmul prim(pd);
  auto a = uniform(M * K, 1), b = uniform(K * N, 2);
  std::vector<float> c(static_cast<size_t>(M * N));
  memory am(a_md, cpu::cpu_engine(), a.data()), cm(c_md, cpu::cpu_engine(), c.data());
  memory bp(b_plain, cpu::cpu_engine(), b.data()), bm(pd.weights_desc(), cpu::cpu_engine());
  dnnl::stream st(cpu::cpu_engine());
  dnnl::reorder(bp, bm).execute(st, bp, bm);
  for (auto _ : s) {
    prim.execute(st, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    st.wait();
  }
  s.SetItemsProcessed(s.iterations() * 2 * M * N * K);
  s.SetLabel(pd.impl_info_str());
}

// args: M, K, N (BERT hidden 384 / 768, FFN 4x; M a sequence length)
#define GEMM_SHAPES                                                                                        \
  Args({64, 384, 1536})->Args({64, 1536, 384})->Args({64, 384, 384})->Args({256, 768, 3072})->Args(        \
      {256, 3072, 768})->Args({128, 768, 768})->Args({3136, 96, 384})->Args({3136, 384, 96})->Args({196, 384, 1536}) \
      ->Args({196, 1536, 384})->Args({1024, 384, 1536})->Args({1024, 1536, 384})->Unit(benchmark::kMicrosecond)
// kiln's exact 8-bit GEMM for CPUs without VNNI (cpu/gemm_s16.hpp): u8 A with a zero point,
// s8 B, int32 out; items_per_second counts 2 M N K operations. With the ResNet-50 shapes of
// its int8 convolutions as im2col GEMMs ([OH * OW, KH * KW * C] x [., M]).
void BM_GemmS16(benchmark::State& s) {
  const int64_t M = s.range(0), K = s.range(1), N = s.range(2);
  if (!cpu::gemm_s16::available()) {
    s.SkipWithError("no AVX2: kiln's 16-bit GEMM does not run here");
    return;
  }
  std::vector<uint8_t> a(static_cast<size_t>(M * K)), b(static_cast<size_t>(K * N));
  std::mt19937 rng(3);
  for (auto& v : a) v = static_cast<uint8_t>(rng());
  for (auto& v : b) v = static_cast<uint8_t>(rng());
  std::vector<int16_t> packed(static_cast<size_t>(cpu::gemm_s16::packed_size(K, N)));
  cpu::gemm_s16::pack_b(b.data(), true, K, N, nullptr, packed.data());
  std::vector<int32_t> c(static_cast<size_t>(M * N)), scratch(cpu::gemm_s16::scratch_bytes(M, K) / 4 + 1);
  for (auto _ : s) {
    cpu::gemm_s16::run(a.data(), false, 128, M, K, K, packed.data(), N, c.data(), N, scratch.data());
    benchmark::DoNotOptimize(c.data());
  }
  s.SetItemsProcessed(s.iterations() * 2 * M * N * K);
}
BENCHMARK(BM_GemmS16)
    ->Args({128, 768, 768})->Args({128, 768, 3072})->Args({128, 3072, 768})->Args({12544, 147, 64})
    ->Args({3136, 576, 64})->Args({3136, 64, 256})->Args({3136, 256, 64})->Args({784, 1152, 128})
    ->Args({196, 2304, 256})->Args({49, 4608, 512})->Args({49, 512, 2048})->Unit(benchmark::kMicrosecond);

BENCHMARK(BM_GemmKiln)->GEMM_SHAPES;
BENCHMARK(BM_GemmKilnCold)->GEMM_SHAPES;
// a short sentence of the BERT stream: the weights streamed from memory for few rows
BENCHMARK(BM_GemmKilnCold)->Args({8, 384, 1536})->Args({24, 384, 1536})->Args({24, 1536, 384})->Args({24, 384, 384})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GemmKiln)->Args({8, 384, 1536})->Args({24, 384, 1536})->Args({24, 1536, 384})->Args({24, 384, 384})->Unit(benchmark::kMicrosecond);
// BERT-6's query, key and value projections at [8, 126]: three products of 384 columns, or one of 1152
BENCHMARK(BM_GemmKiln)->Args({1008, 384, 384})->Args({1008, 384, 1152})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GemmKilnCold)->Args({1072, 384, 384})->Args({1072, 384, 1536})->Args({1072, 1536, 384})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GemmKiln)->Args({1072, 384, 384})->Args({1072, 384, 1536})->Args({1072, 1536, 384})->Unit(benchmark::kMicrosecond);
// an expand 1x1 convolution with few input channels (EfficientNet-B0 features.2.0: 16 -> 96 over
// 2 x 104 x 100 pixels): 64 MFLOP, 0.28 ms at the FMA peak, 8 MB written. 2026-12-05, 2 threads:
// 0.35-0.39 ms with C in cache (79% of peak), 1.09 ms with C out of cache (ColdC); with Swish in the
// epilogue 0.80-0.85 ms, the same with v_logistic or the snippets' 17-operation Swish: the Swish
// is bound by the FMA pipes as the product is, and costs more there than the model's separate
// snippets pass over the tensor (0.31 ms), so EfficientNet keeps its Swishes as Subgraphs
BENCHMARK(BM_GemmKiln)->Args({20800, 16, 96})->Args({20800, 24, 144})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GemmKilnColdC)->Args({20800, 16, 96})->Args({20800, 24, 144})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GemmKilnSwish)->Args({20800, 16, 96})->Args({20800, 24, 144})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GemmKilnGelu)->Args({1072, 384, 1536})->Args({3136, 96, 384})->Args({784, 192, 768})->Args({196, 384, 1536})->Args({64, 384, 1536})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GemmKilnSerialClip)
    ->Args({48, 16, 96})->Args({48, 24, 144})->Args({48, 32, 192})->Args({48, 64, 384})->Args({48, 96, 24})
    ->Args({48, 144, 24})->Args({48, 192, 32})->Args({48, 384, 64})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GemmOneDnn)->GEMM_SHAPES;
// ResNeXt-50's first stage as 1x1 convolutions at [2, 3, 208, 200]: 5200 pixels, 64 -> 128 / 256,
// 128 -> 256, 256 -> 128 / 256 channels
#define RESNEXT_SHAPES \
  Args({5200, 64, 128})->Args({5200, 64, 256})->Args({5200, 128, 256})->Args({5200, 256, 128})->Args({5200, 256, 256}) \
      ->Unit(benchmark::kMicrosecond)
BENCHMARK(BM_GemmKiln)->RESNEXT_SHAPES;
BENCHMARK(BM_GemmKilnColdC)->RESNEXT_SHAPES;
BENCHMARK(BM_GemmOneDnn)->RESNEXT_SHAPES;
// RegNetY-400MF's first 1x1 convolution of each stage at [2, 3, 200, 208] (20800 pixels 32 -> 48,
// 5200 48 -> 104, 1300 104 -> 208, 325 208 -> 440) and a stage-2 block's last one (1300, 104 -> 104)
#define REGNET_SHAPES \
  Args({20800, 32, 48})->Args({5200, 48, 104})->Args({1300, 104, 208})->Args({325, 208, 440})->Args({1300, 104, 104}) \
      ->Unit(benchmark::kMicrosecond)
BENCHMARK(BM_GemmKiln)->REGNET_SHAPES;
BENCHMARK(BM_GemmKiln)->Args({1302, 32, 48})->Args({324, 32, 48})->Args({1302, 32, 64})->Args({1302, 128, 48})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GemmOneDnn)->Args({1302, 32, 48})->Args({324, 32, 48})->Args({1302, 32, 64})->Args({1302, 128, 48})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GemmKilnColdC)->REGNET_SHAPES;
BENCHMARK(BM_GemmOneDnn)->REGNET_SHAPES;

// A 1x1 convolution over nChw16c in and out on one thread (run_serial), bias and ReLU: the
// pixels' rows gathered from the blocks, the GEMM, C's rows scattered back (how kiln ran it
// with AVX-512 before run_serial_blocked16), against run_serial_blocked16 reading and writing the
// blocks itself. [M pixels, K, N].
void blocked16_problem(benchmark::State& s, bool in_place) {
  const int64_t M = s.range(0), K = s.range(1), N = s.range(2);
  if (!cpu::gemm_f32::blocked16_supports(true, true, K, N)) {
    s.SkipWithError("no AVX-512 (or K, N not whole blocks of 16)");
    return;
  }
  WithBias p(M, K, N);  // p.a as the blocks: A(m, k) at (k / 16) * M * 16 + m * 16 + k % 16
  cpu::gemm_f32::EpilogueOp relu;
  relu.alg = dnnl::algorithm::eltwise_relu;
  p.ep.ops.push_back(relu);
  std::vector<float> rows_a(static_cast<size_t>(M * K)), rows_c(static_cast<size_t>(M * N));
  for (auto _ : s) {
    if (in_place) {
      cpu::gemm_f32::run_serial_blocked16(p.a.data(), M, K, 0, M * 16, p.packed.data(), N, p.c.data(), 0, M * 16, p.ep);
    } else {
      for (int64_t b = 0; b < K / 16; ++b)
        for (int64_t m = 0; m < M; ++m) std::memcpy(&rows_a[m * K + b * 16], &p.a[(b * M + m) * 16], 64);
      cpu::gemm_f32::run_serial(rows_a.data(), M, K, K, p.packed.data(), N, rows_c.data(), N, p.ep);
      for (int64_t b = 0; b < N / 16; ++b)
        for (int64_t m = 0; m < M; ++m) std::memcpy(&p.c[(b * M + m) * 16], &rows_c[m * N + b * 16], 64);
    }
    benchmark::DoNotOptimize(p.c.data());
  }
  s.SetItemsProcessed(s.iterations() * 2 * M * N * K);
}
void BM_Blocks16ViaRows(benchmark::State& s) { blocked16_problem(s, false); }
void BM_Blocks16InPlace(benchmark::State& s) { blocked16_problem(s, true); }
#define BLOCKS16_SHAPES \
  Args({2400, 64, 64})->Args({2400, 128, 16})->Args({2400, 16, 64})->Args({2400, 32, 128})->Args({600, 256, 256}) \
      ->Args({600, 512, 64})->Unit(benchmark::kMicrosecond)
BENCHMARK(BM_Blocks16ViaRows)->BLOCKS16_SHAPES;
BENCHMARK(BM_Blocks16InPlace)->BLOCKS16_SHAPES;

// apply_epilogue's lone Swish over [rows, 32] stored one after another (a depthwise block's D of
// 32 channels), on one thread: row by row (a call per row) against the whole at once.
void swish_rows(benchmark::State& s, bool whole) {
  const int64_t rows = s.range(0), cols = 32;
  if (!cpu::gemm_f32::available()) {
    s.SkipWithError("no AVX2: kiln's GEMM does not run here");
    return;
  }
  const auto src = uniform(rows * cols, 4);
  std::vector<float> c = src;
  cpu::gemm_f32::Epilogue ep;
  cpu::gemm_f32::EpilogueOp swish;
  swish.alg = dnnl::algorithm::eltwise_swish;
  swish.alpha = 1.0f;
  ep.ops.push_back(swish);
  for (auto _ : s) {
    if (whole)
      cpu::gemm_f32::apply_epilogue(c.data(), rows, cols, cols, ep);
    else
      for (int64_t r = 0; r < rows; ++r) cpu::gemm_f32::apply_epilogue(c.data() + r * cols, 1, cols, cols, ep);
    benchmark::DoNotOptimize(c.data());
  }
  s.SetItemsProcessed(s.iterations() * rows * cols / 16);  // vectors
}
void BM_SwishRowByRow(benchmark::State& s) { swish_rows(s, false); }
void BM_SwishWhole(benchmark::State& s) { swish_rows(s, true); }
BENCHMARK(BM_SwishRowByRow)->Arg(448)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SwishWhole)->Arg(448)->Unit(benchmark::kMicrosecond);

// BERT-6's FullyConnected products in model order at M tokens: per layer Q, K, V and the output
// projection ([M, 384] x [384, 384]), the FFN's [384, 1536] (bias and GELU) and [1536, 384], each
// layer with its own weights (range(1) = 1: 42 MB in all, more than the L3: each inference reads
// them from memory, as a batch of one does) or every layer with the first's (0: 7 MB, from the
// caches). The difference is what the weights' traffic costs the products where M is small.
// range(2) = 1: the weights on 2 MiB pages (advised as transparent huge pages, as the weights
// cache places a FullyConnected's: WeightsCache::Pages::streamed), else on 4 KiB pages.
void BM_GemmKilnBertStack(benchmark::State& s) {
  const int64_t M = s.range(0), H = 384, F = 1536, layers = 6;
  const bool own = s.range(1) != 0;
  if (!cpu::gemm_f32::available()) {
    s.SkipWithError("no AVX2: kiln's GEMM does not run here");
    return;
  }
  struct Product {
    int64_t K, N;
    bool gelu;
  };
  const Product per_layer[] = {{H, H, false}, {H, H, false}, {H, H, false}, {H, H, false}, {H, F, true}, {F, H, false}};
  std::vector<float*> packed;
  size_t total = 0;
  for (int64_t l = 0; l < (own ? layers : 1); ++l)
    for (const Product& p : per_layer) total += static_cast<size_t>(cpu::gemm_f32::packed_size(p.K, p.N));
  const size_t bytes = whole_huge_pages(total * sizeof(float));
  float* pool = static_cast<float*>(map_huge_aligned(bytes));
  if (!pool) {
    s.SkipWithError("no memory for the weights");
    return;
  }
  if (s.range(2)) madvise(pool, bytes, MADV_HUGEPAGE);
  float* at = pool;
  for (int64_t l = 0; l < (own ? layers : 1); ++l)
    for (const Product& p : per_layer) {
      const auto b = uniform(p.K * p.N, static_cast<uint32_t>(packed.size() + 7));
      packed.push_back(at);
      at += cpu::gemm_f32::packed_size(p.K, p.N);
      cpu::gemm_f32::pack_b(b.data(), p.K, p.N, p.N, 1, 1.0f, packed.back());
    }
  const auto a = uniform(M * F, 1), bias = uniform(F, 3);
  std::vector<float> c(static_cast<size_t>(M * F));
  cpu::gemm_f32::Epilogue plain, gelu;
  plain.bias = gelu.bias = bias.data();
  cpu::gemm_f32::EpilogueOp op;
  op.alg = dnnl::algorithm::eltwise_gelu_erf;
  gelu.ops.push_back(op);
  for (auto _ : s) {
    size_t w = 0;
    for (int64_t l = 0; l < layers; ++l)
      for (const Product& p : per_layer) {
        cpu::gemm_f32::run(a.data(), M, p.K, p.K, packed[w], p.N, c.data(), p.N, p.gelu ? gelu : plain);
        w = own ? w + 1 : (w + 1) % packed.size();
      }
    benchmark::DoNotOptimize(c.data());
  }
  s.SetItemsProcessed(s.iterations() * layers * 2 * M * (4 * H * H + 2 * H * F));
  munmap(pool, bytes);
}
BENCHMARK(BM_GemmKilnBertStack)
    ->Args({8, 0, 0})->Args({8, 1, 0})->Args({8, 1, 1})->Args({32, 0, 0})->Args({32, 1, 0})->Args({32, 1, 1})
    ->Args({64, 0, 0})->Args({64, 1, 0})->Args({64, 1, 1})->Args({134, 0, 0})->Args({134, 1, 0})->Args({134, 1, 1})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
