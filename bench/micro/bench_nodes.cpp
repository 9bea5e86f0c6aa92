// Micro-benchmarks of cpu::Graph node kinds against the reference kernels, on the
// shapes that dominate the models kiln is measured on. Run: build/bench/kiln_micro_bench
#include <benchmark/benchmark.h>

#include <random>

#include "cpu/graph.hpp"
#include "ir/op_registry.hpp"
#include "runtime/reference_executor.hpp"
#include "transforms/specialize_shapes.hpp"

using namespace kiln;

namespace {

Tensor random_tensor(Shape s, uint32_t seed) {
  Tensor t(DType::f32, std::move(s));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < t.size(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// One Conv node: x [1, c, hw, hw], w [oc, c/group, k, k].
std::shared_ptr<ir::Graph> conv_graph(int64_t c, int64_t oc, int64_t hw, int64_t k, int64_t stride, int64_t group) {
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = 13;
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, c, hw, hw})});
  auto* w = g->add_constant("w", random_tensor({oc, c / group, k, k}, 1));
  auto* n = g->add_node("Conv", {x, w}, 1, "conv");
  int64_t p = k / 2;
  n->attrs["pads"] = std::vector<int64_t>{p, p, p, p};
  n->attrs["strides"] = std::vector<int64_t>{stride, stride};
  n->attrs["group"] = group;
  g->add_output(n->output(0));
  ir::infer_shapes(*g);
  return g;
}

void run_cpu(benchmark::State& state, const std::shared_ptr<ir::Graph>& g, const Tensor& x) {
  auto copy = g->clone();
  transforms::specialize_shapes(*copy, {x.shape()});
  cpu::Graph cg(copy);
  for (auto _ : state) benchmark::DoNotOptimize(cg.run({x}));
}

void run_reference(benchmark::State& state, const std::shared_ptr<ir::Graph>& g, const Tensor& x) {
  runtime::ReferenceExecutor ex(g);
  for (auto _ : state) benchmark::DoNotOptimize(ex.run({x}));
}

// args: c, oc, hw, k, stride, group
void BM_ConvCpu(benchmark::State& s) {
  auto g = conv_graph(s.range(0), s.range(1), s.range(2), s.range(3), s.range(4), s.range(5));
  run_cpu(s, g, random_tensor({1, s.range(0), s.range(2), s.range(2)}, 2));
}
void BM_ConvReference(benchmark::State& s) {
  auto g = conv_graph(s.range(0), s.range(1), s.range(2), s.range(3), s.range(4), s.range(5));
  run_reference(s, g, random_tensor({1, s.range(0), s.range(2), s.range(2)}, 2));
}

#define CONV_SHAPES                       \
  Args({64, 64, 56, 3, 1, 1})             \
      ->Args({256, 64, 56, 1, 1, 1})      \
      ->Args({3, 64, 224, 7, 2, 1})       \
      ->Args({144, 144, 56, 3, 1, 144})   \
      ->Unit(benchmark::kMillisecond)

BENCHMARK(BM_ConvCpu)->CONV_SHAPES;
BENCHMARK(BM_ConvReference)->CONV_SHAPES;

}  // namespace

BENCHMARK_MAIN();
