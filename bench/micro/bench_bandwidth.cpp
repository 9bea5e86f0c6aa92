// Memory bandwidth: the machine's copy bandwidth (OpenMP memcpy, the yardstick of issue 5)
// against the snippets kernels of the two 12-op chains of bench/make_chain_models.py over
// 1x64x256x256 f32 (16 MiB in, 16 MiB out). bytes_per_second counts bytes read + written.
// Run: build/bench/kiln_micro_bench --benchmark_filter='Copy|Chain'
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstring>
#include <random>
#include <vector>

#include "ir/graph.hpp"
#include "ir/op_registry.hpp"
#include "cpu/emitters/x64/target_machine.hpp"
#include "snippets/generator.hpp"

using namespace kiln;

namespace {

constexpr int64_t kElems = 64 * 256 * 256;

std::vector<float> random_floats(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-3, 3);
  for (auto& x : v) x = u(rng);
  return v;
}

// args: threads, elements. The chain's size (16 MiB per array: partly cache-resident on a CPU
// with a large L3, like the chain itself) and 256 MiB per array (main memory only).
void BM_Copy(benchmark::State& s) {
  const int threads = static_cast<int>(s.range(0));
  const int64_t elems = s.range(1);
  std::vector<float> a = random_floats(elems), b(a.size());
  for (auto _ : s) {
#pragma omp parallel num_threads(threads)
    {
      const int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
      const int64_t begin = elems * t / n, end = elems * (t + 1) / n;
      std::memcpy(b.data() + begin, a.data() + begin, static_cast<size_t>(end - begin) * 4);
    }
    benchmark::DoNotOptimize(b.data());
    benchmark::ClobberMemory();
  }
  s.SetBytesProcessed(s.iterations() * elems * 8);
}
BENCHMARK(BM_Copy)->ArgsProduct({{1, 2}, {kElems, 64 * kElems}})->ArgNames({"threads", "elems"})->UseRealTime()->Unit(benchmark::kMicrosecond);

struct Step {
  const char* op;
  std::vector<float> consts;
};

std::shared_ptr<ir::Graph> chain(const std::vector<Step>& steps) {
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = 17;
  ir::Value* v = g->add_input("x", {DType::f32, ir::PartialShape(Shape{kElems})});
  for (const Step& st : steps) {
    std::vector<ir::Value*> ins = {v};
    for (float c : st.consts) ins.push_back(g->add_constant(g->unique_name("c"), Tensor::from_vector<float>({c}, Shape{})));
    v = g->add_node(st.op, ins, 1)->output(0);
  }
  g->add_output(v);
  ir::infer_shapes(*g);
  return g;
}

// The bodies of chain12_arith and chain12_mixed (bench/make_chain_models.py), single ops, and
// SiLU: Mul(x, Sigmoid(x)).
std::shared_ptr<ir::Graph> chain_body(int which) {
  static const char* single[] = {"Exp", "Sigmoid", "Tanh", "Erf", "Relu"};
  if (which >= 7) {
    auto g = std::make_shared<ir::Graph>();
    g->opset_imports[""] = 17;
    ir::Value* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{kElems})});
    g->add_output(g->add_node("Mul", {x, g->add_node("Sigmoid", {x}, 1)->output(0)}, 1)->output(0));
    ir::infer_shapes(*g);
    return g;
  }
  if (which >= 2) return chain({{single[which - 2], {}}});
  if (which == 0)
    return chain({{"Add", {0.5f}}, {"Mul", {1.5f}}, {"Relu", {}}, {"Sub", {0.25f}}, {"Abs", {}}, {"Max", {0.1f}},
                  {"Min", {4.0f}}, {"Sqrt", {}}, {"Mul", {-0.75f}}, {"Neg", {}}, {"Clip", {0.0f, 1.25f}}, {"Add", {1.0f}}});
  return chain({{"Mul", {0.5f}}, {"Sigmoid", {}}, {"Add", {-0.25f}}, {"Tanh", {}}, {"Mul", {3.0f}}, {"Erf", {}},
                {"Abs", {}}, {"Neg", {}}, {"Exp", {}}, {"Sub", {0.5f}}, {"Max", {-0.2f}}, {"Mul", {2.0f}}});
}

// args: chain (0 arith, 1 mixed, 2.. one op: Exp, Sigmoid, Tanh, Erf, Relu; 7 SiLU as one Swish op,
// 8 SiLU as Sigmoid and Mul), threads, isa (0 avx512, 1 avx2). The kernel is compiled
// for chunks of 16384 elements and the chunks split across threads, as the Subgraph node does.
void BM_SnippetsChain(benchmark::State& s) {
  const int threads = static_cast<int>(s.range(1));
  constexpr int64_t kChunk = 16384;
  auto body = chain_body(static_cast<int>(s.range(0)));
  snippets::CompileOptions opt;
  opt.target = cpu::x64::shared_target_machine(s.range(2) ? snippets::Isa::Avx2 : snippets::Isa::Avx512);
  opt.fuse_swish = s.range(0) != 8;
  std::unique_ptr<snippets::Kernel> k;
  try {
    k = snippets::compile(*body, {{Shape{kChunk}}, Shape{kChunk}}, opt);
  } catch (const std::exception& e) {
    s.SkipWithError(e.what());
    return;
  }
  std::vector<float> x = random_floats(kElems), y(x.size());
  for (auto _ : s) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t c = 0; c < kElems / kChunk; ++c) k->run({x.data() + c * kChunk}, {y.data() + c * kChunk}, 0, 1);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  s.SetBytesProcessed(s.iterations() * kElems * 8);
}
BENCHMARK(BM_SnippetsChain)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5, 6, 7, 8}, {1, 2}, {0, 1}})
    ->ArgNames({"body", "threads", "avx2"})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
