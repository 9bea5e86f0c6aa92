// What a new input shape costs kiln, on the streams of bench/compare_dynamic.sh: for each of 63
// new shapes of a model whose input shapes vary, its compile (cpu::Executor::prepare: stages 1-8
// of the compile pipeline, docs/ARCHITECTURE.md) and its first inference less the second. The
// models come from the bench cache (bench/make_dynamic_models.py; KILN_BENCH_CACHE, default
// ~/.cache/kiln-bench): a benchmark whose model is absent is skipped. Counters, means over the
// shapes: ms_per_shape (compile and first inference less the second), compile_ms (of which
// compiling), run_ms (the second inference), heap_kib (the heap each new shape's plan keeps:
// the compile faults its pages in: about 1 us a KiB on this project's VM, by a profile).
// Run: OMP_NUM_THREADS=2 build/bench/kiln_micro_bench --benchmark_filter=PlanBert (one benchmark per
// process: the second would find primitives the first made)
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <malloc.h>

#include "cpu/executor.hpp"
#include "frontend/onnx/onnx_frontend.hpp"
#include "ir/op_registry.hpp"

using namespace kiln;

namespace {

std::string bench_model(const std::string& name) {
  const char* env = std::getenv("KILN_BENCH_CACHE");
  const char* home = std::getenv("HOME");
  const std::string cache = env ? env : std::string(home ? home : ".") + "/.cache/kiln-bench";
  const std::string path = cache + "/models/" + name + "/model.onnx";
  return std::filesystem::exists(path) ? path : "";
}

// `shapes(i)`: the input shapes of the i-th of 64 distinct shapes.
void plan_new_shapes(benchmark::State& state, const std::string& model,
                     const std::function<std::vector<Shape>(int)>& shapes) {
  const std::string path = std::filesystem::exists(model) ? model : bench_model(model);
  if (path.empty()) {
    state.SkipWithError(("no " + model + " in the bench cache (bench/make_dynamic_models.py)").c_str());
    return;
  }
  std::shared_ptr<ir::Graph> g = frontend::load_onnx_file(path);
  ir::infer_shapes(*g);  // as kiln::read_model
  constexpr int kShapes = 64;
  auto inputs_of = [&](const std::vector<Shape>& shapes) {
    std::vector<Tensor> in;
    for (size_t k = 0; k < shapes.size(); ++k) {
      Tensor t(g->inputs()[k]->type.dtype, shapes[k]);  // zeros: token 0, masks of 0, a black image
      std::memset(t.raw(), 0, t.byte_size());
      in.push_back(std::move(t));
    }
    return in;
  };
  using clock = std::chrono::steady_clock;
  auto ms_since = [](clock::time_point t) { return std::chrono::duration<double, std::milli>(clock::now() - t).count(); };
  double new_total = 0, compile_total = 0, run_total = 0;  // ms, over the iterations
  double heap_total = 0;                                   // KiB, over the iterations
  for (auto _ : state) {
    cpu::Executor ex(g);  // f32
    ex.run(inputs_of(shapes(0)));  // packs the weights
    if (!ex.find_plan(shapes(0))->fast) {
      state.SkipWithError(ex.find_plan(shapes(0))->fallback_reason.c_str());
      return;
    }
    double compile = 0, first = 0, again = 0;
    const size_t heap_before = mallinfo2().uordblks;
    for (int i = 1; i < kShapes; ++i) {
      const std::vector<Tensor> in = inputs_of(shapes(i));
      auto t = clock::now();
      ex.prepare(shapes(i));
      compile += ms_since(t);
      t = clock::now();
      ex.run(in);
      first += ms_since(t);
      t = clock::now();
      ex.run(in);
      again += ms_since(t);
    }
    heap_total += double(mallinfo2().uordblks - heap_before) / (kShapes - 1) / 1024;
    state.SetIterationTime((compile + first - again) / 1000);
    new_total += (compile + first - again) / (kShapes - 1);
    compile_total += compile / (kShapes - 1);
    run_total += again / (kShapes - 1);
  }
  state.counters["ms_per_shape"] = benchmark::Counter(new_total, benchmark::Counter::kAvgIterations);
  state.counters["compile_ms"] = benchmark::Counter(compile_total, benchmark::Counter::kAvgIterations);
  state.counters["run_ms"] = benchmark::Counter(run_total, benchmark::Counter::kAvgIterations);
  state.counters["heap_kib"] = benchmark::Counter(heap_total, benchmark::Counter::kAvgIterations);
}

// BERT, 6 layers, hidden 384: input_ids and attention_mask [1, L], L = 10, 12, ..., 134
void BM_PlanBertLengths(benchmark::State& state) {
  plan_new_shapes(state, "bert6_dyn", [](int i) {
    const int64_t l = 8 + 2 * i;
    return std::vector<Shape>{{1, l}, {1, l}};
  });
}
// The same BERT, [B, L]: B = 1, 2, 4, 8 in turn, L = 10, 12, ..., 134 (the bert-batch stream)
void BM_PlanBertBatch(benchmark::State& state) {
  plan_new_shapes(state, "bert6_dyn", [](int i) {
    const int64_t b = int64_t{1} << (i % 4), l = 8 + 2 * i;
    return std::vector<Shape>{{b, l}, {b, l}};
  });
}
// CNN + BiLSTM text recogniser: x [1, 3, 48, W], W = 120, 144, ..., 1608
void BM_PlanCrnnWidths(benchmark::State& state) {
  plan_new_shapes(state, "crnn_dyn", [](int i) { return std::vector<Shape>{{1, 3, 48, 96 + 24 * int64_t(i)}}; });
}
// MobileNet-v2, x [B, 3, H, W]: B = 1, 2, 4, 8 in turn, H = 160..256, W = H + 0..96 (the
// mnv2-batch stream)
void BM_PlanMnv2Batch(benchmark::State& state) {
  plan_new_shapes(state, "mnv2_dyn", [](int i) {
    const int64_t h = 160 + 32 * ((i >> 2) % 4);
    return std::vector<Shape>{{int64_t{1} << (i % 4), 3, h, h + 32 * (i >> 4)}};
  });
}

// Any image model with dynamic N, H, W (KILN_PLAN_IMAGE_MODEL=path, e.g. torchvision's
// mobilenet_v3_small exported with dynamic_axes); null, the benchmark skipped, when unset
const char* image_model(benchmark::State& state) {
  const char* path = std::getenv("KILN_PLAN_IMAGE_MODEL");
  if (path && std::filesystem::exists(path)) return path;
  state.SkipWithError("set KILN_PLAN_IMAGE_MODEL to an ONNX model with input [N, 3, H, W]");
  return nullptr;
}
// Its i-th shape: x [B, 3, H, W], B = 1, 2 in turn, H = 160..286, W = 286..160 (two apart)
Shape image_shape(int i) { return {1 + int64_t(i % 2), 3, 160 + 2 * int64_t(i), 286 - 2 * int64_t(i)}; }

void BM_PlanImageModel(benchmark::State& state) {
  const char* path = image_model(state);
  if (!path) return;
  plan_new_shapes(state, path, [](int i) { return std::vector<Shape>{image_shape(i)}; });
}

// The compiles alone (Executor::prepare of 63 new shapes after one inference), for a profiler:
//   valgrind --tool=callgrind --toggle-collect='kiln::cpu::Executor::prepare*'
//            build/bench/kiln_micro_bench --benchmark_filter=PlanBertCompileOnly
void BM_PlanBertCompileOnly(benchmark::State& state) {
  const std::string path = bench_model("bert6_dyn");
  if (path.empty()) {
    state.SkipWithError("no bert6_dyn in the bench cache (bench/make_dynamic_models.py)");
    return;
  }
  std::shared_ptr<ir::Graph> g = frontend::load_onnx_file(path);
  ir::infer_shapes(*g);
  double compile_ms = 0;
  for (auto _ : state) {
    cpu::Executor ex(g);
    std::vector<Tensor> in;
    for (int k = 0; k < 2; ++k) {
      Tensor t(g->inputs()[static_cast<size_t>(k)]->type.dtype, Shape{1, 8});
      std::memset(t.raw(), 0, t.byte_size());
      in.push_back(std::move(t));
    }
    ex.run(in);  // packs the weights
    const auto t = std::chrono::steady_clock::now();
    for (int i = 1; i < 64; ++i) ex.prepare({{1, 8 + 2 * i}, {1, 8 + 2 * i}});
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
    state.SetIterationTime(ms / 1000);
    compile_ms += ms / 63;
  }
  state.counters["compile_ms"] = benchmark::Counter(compile_ms, benchmark::Counter::kAvgIterations);
}

// The same for an image model (KILN_PLAN_IMAGE_MODEL, the shapes of BM_PlanImageModel): the
// compiles alone, for callgrind (a run under it takes minutes; this, one inference)
void BM_PlanImageCompileOnly(benchmark::State& state) {
  const char* path = image_model(state);
  if (!path) return;
  std::shared_ptr<ir::Graph> g = frontend::load_onnx_file(path);
  ir::infer_shapes(*g);
  double compile_ms = 0;
  for (auto _ : state) {
    cpu::Executor ex(g);
    Tensor t(g->inputs()[0]->type.dtype, image_shape(0));
    std::memset(t.raw(), 0, t.byte_size());
    ex.run({t});  // packs the weights
    const auto start = std::chrono::steady_clock::now();
    for (int i = 1; i < 64; ++i) ex.prepare({image_shape(i)});
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    state.SetIterationTime(ms / 1000);
    compile_ms += ms / 63;
  }
  state.counters["compile_ms"] = benchmark::Counter(compile_ms, benchmark::Counter::kAvgIterations);
}

}  // namespace

// One iteration: oneDNN's primitive cache and kiln's kernel caches are the process's, so a second
// iteration would find the first one's primitives made (repeat by running the binary again).
BENCHMARK(BM_PlanBertLengths)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_PlanBertBatch)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_PlanCrnnWidths)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_PlanMnv2Batch)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_PlanImageModel)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_PlanBertCompileOnly)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_PlanImageCompileOnly)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1);
