// Micro-benchmarks of cpu::Graph node kinds against the reference kernels, on the
// shapes that dominate the models kiln is measured on. Run: build/bench/kiln_micro_bench
#include <benchmark/benchmark.h>

#include <random>

#include "cpu/attention_f32.hpp"
#include "cpu/executor.hpp"
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

// ---- fused vs unfused: the same graph through cpu::Executor with the optimizer on / off ----

void run_executor(benchmark::State& state, const std::shared_ptr<ir::Graph>& g, const std::vector<Tensor>& in,
                  bool fused) {
  cpu::GraphOptions o;
  if (!fused) o.disabled_passes = {"all-fusions"};
  cpu::Executor ex(g, o);
  for (auto _ : state) benchmark::DoNotOptimize(ex.run(in));
}

// BERT-base attention block: x [1, S, 768] -> Q, K, V projections -> 12 heads -> [1, S, 768]
std::shared_ptr<ir::Graph> attention_graph(int64_t S) {
  const int64_t H = 12, D = 64, C = H * D;
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = 13;
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, S, C})});
  auto* mask = g->add_input("mask", {DType::f32, ir::PartialShape(Shape{1, 1, 1, S})});
  int k = 0;
  auto cst = [&](Tensor t) { return g->add_constant("c" + std::to_string(k++), std::move(t)); };
  auto node = [&](const char* op, std::vector<ir::Value*> ins) {
    return g->add_node(op, ins, 1, std::string(op) + std::to_string(k++));
  };
  auto heads = [&](uint32_t seed, std::vector<int64_t> perm) {
    auto* p = node("MatMul", {x, cst(random_tensor({C, C}, seed))})->output(0);
    auto* r = node("Reshape", {p, cst(Tensor::from_vector<int64_t>({1, S, H, D}, {4}))})->output(0);
    auto* t = node("Transpose", {r});
    t->attrs["perm"] = perm;
    return t->output(0);
  };
  auto* q = heads(1, {0, 2, 1, 3});
  auto* kt = heads(2, {0, 2, 3, 1});
  auto* v = heads(3, {0, 2, 1, 3});
  auto* s = node("MatMul", {q, kt})->output(0);
  s = node("Div", {s, cst(Tensor::scalar<float>(8.0f))})->output(0);
  s = node("Add", {s, mask})->output(0);
  auto* sm = node("Softmax", {s});
  sm->attrs["axis"] = int64_t(-1);
  auto* o = node("MatMul", {sm->output(0), v})->output(0);
  auto* to = node("Transpose", {o});
  to->attrs["perm"] = std::vector<int64_t>{0, 2, 1, 3};
  auto* y = node("Reshape", {to->output(0), cst(Tensor::from_vector<int64_t>({1, S, C}, {3}))});
  g->add_output(y->output(0));
  ir::infer_shapes(*g);
  return g;
}

void BM_AttentionBlock(benchmark::State& s) {
  const int64_t S = s.range(0);
  run_executor(s, attention_graph(S), {random_tensor({1, S, 768}, 4), random_tensor({1, 1, 1, S}, 5)}, s.range(1) != 0);
}
// args: sequence length, fused (1) or not (0)
BENCHMARK(BM_AttentionBlock)->Args({128, 0})->Args({128, 1})->Args({384, 0})->Args({384, 1})->Unit(benchmark::kMicrosecond);

// conv 3x3 -> Relu -> + residual -> Relu (a ResNet block's tail)
std::shared_ptr<ir::Graph> conv_sum_graph(int64_t c, int64_t hw) {
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = 13;
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, c, hw, hw})});
  auto conv = [&](ir::Value* in, const char* name, uint32_t seed) {
    auto* n = g->add_node("Conv", {in, g->add_constant(std::string(name) + "_w", random_tensor({c, c, 3, 3}, seed))}, 1, name);
    n->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
    return n->output(0);
  };
  auto* a = g->add_node("Relu", {conv(x, "conv_a", 1)}, 1, "relu_a")->output(0);
  auto* b = g->add_node("Relu", {conv(a, "conv_b", 2)}, 1, "relu_b")->output(0);
  auto* sum = g->add_node("Add", {conv(b, "conv_c", 3), a}, 1, "add")->output(0);
  g->add_output(g->add_node("Relu", {sum}, 1, "relu")->output(0));
  ir::infer_shapes(*g);
  return g;
}

void BM_ConvReluSumBlock(benchmark::State& s) {
  run_executor(s, conv_sum_graph(s.range(0), s.range(1)), {random_tensor({1, s.range(0), s.range(1), s.range(1)}, 6)},
               s.range(2) != 0);
}
// args: channels, spatial, fused
BENCHMARK(BM_ConvReluSumBlock)->Args({64, 56, 0})->Args({64, 56, 1})->Args({256, 14, 0})->Args({256, 14, 1})->Unit(benchmark::kMicrosecond);

}  // namespace

// kiln's attention kernel alone on a padded batch: BERT-6's heads (6 x 64) at [8, L], each
// sequence's last `pad` percent of keys masked as Hugging Face masks them (finfo.min added);
// skip 1 leaves those keys out (attended_keys), 0 computes them. 2 threads.
void BM_AttentionF32Padded(benchmark::State& s) {
  namespace att = cpu::attention_f32;
  if (!att::available()) {
    s.SkipWithError("neither AVX-512 nor AVX2");
    return;
  }
  const int64_t L = s.range(0), pad = s.range(1);
  att::Geometry g{8, 6, 6, L, L, 64, 64, true, 0.125f, false, {}};
  g.skip_masked_keys = s.range(2) != 0;
  const Tensor q = random_tensor({8, L, 384}, 1), k = random_tensor({8, L, 384}, 2), v = random_tensor({8, L, 384}, 3);
  std::vector<float> mask(static_cast<size_t>(8 * L), 0.0f), y(static_cast<size_t>(8 * L * 384));
  const int64_t valid = L - L * pad / 100;
  for (int64_t b = 0; b < 8; ++b)
    for (int64_t t = valid; t < L; ++t) mask[static_cast<size_t>(b * L + t)] = -3.4028235e38f;
  att::Mask m;
  m.data = mask.data();
  m.dims[0] = 8;
  m.dims[3] = L;
  std::vector<char> scratch(att::scratch_bytes(g, 2));
  for (auto _ : s)
    att::run(g, q.data<float>(), k.data<float>(), v.data<float>(), m, y.data(), scratch.data(), 2);
  s.counters["keys"] = static_cast<double>(g.skip_masked_keys ? valid : L);
}
BENCHMARK(BM_AttentionF32Padded)
    ->Args({134, 25, 0})->Args({134, 25, 1})->Args({134, 0, 1})->Args({384, 25, 0})->Args({384, 25, 1})
    ->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
