// Streams and async requests: compile properties (num_streams, inference_num_threads,
// enable_cpu_pinning, performance_mode, exclusive_async_requests under new and old names),
// start_async / wait / wait_for / callbacks, many requests on few streams, weights packed
// once per compiled model, and a stress test (4 requests x 2 streams x 500 inferences on
// two models at once, bit-identical to sequential runs). Also run under ThreadSanitizer
// (see docs/settings.md).
#include <gtest/gtest.h>

#include <kiln/core.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "core/strings.hpp"
#include "cpu/executor.hpp"
#include "cpu/stream_layout.hpp"
#include "precision_util.hpp"
#include "runtime/reference_executor.hpp"
#include "cpu_test_util.hpp"
#include "error_util.hpp"
#include "ir/graph.hpp"
#include "ir/op_registry.hpp"

namespace test_streams {

using namespace kiln;
using namespace kiln::test;
using namespace std::chrono_literals;

namespace {

// x[1,8,12,12] -> Conv 3x3 -> Relu -> Conv 3x3 -> Add(residual) -> GlobalAveragePool ->
// Flatten -> Gemm(transB) -> Erf (a Reference node) -> Softmax
std::shared_ptr<Model> conv_model() {
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 8, 12, 12})});
  auto* c1 = g->add_node("Conv", {x, g->add_constant("w1", random_tensor({16, 8, 3, 3}, 11, 0.3f)),
                                  g->add_constant("b1", random_tensor({16}, 12))},
                         1, "conv1");
  c1->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  auto* r1 = g->add_node("Relu", {c1->output(0)}, 1, "relu1");
  auto* c2 = g->add_node("Conv", {r1->output(0), g->add_constant("w2", random_tensor({16, 16, 3, 3}, 13, 0.2f))}, 1,
                         "conv2");
  c2->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  auto* add = g->add_node("Add", {c2->output(0), r1->output(0)}, 1, "add");
  auto* gap = g->add_node("GlobalAveragePool", {add->output(0)}, 1, "gap");
  auto* flat = g->add_node("Flatten", {gap->output(0)}, 1, "flat");
  auto* fc = g->add_node("Gemm", {flat->output(0), g->add_constant("wf", random_tensor({10, 16}, 14)),
                                  g->add_constant("bf", random_tensor({10}, 15))},
                         1, "fc");
  fc->attrs["transB"] = int64_t(1);
  auto* erf = g->add_node("Erf", {fc->output(0)}, 1, "erf");
  auto* sm = g->add_node("Softmax", {erf->output(0)}, 1, "softmax");
  g->add_output(sm->output(0));
  ir::infer_shapes(*g);
  return std::make_shared<Model>(g);
}

// x[batch,32] -> MatMul -> Add -> Relu -> MatMul -> Tanh -> Softmax (dynamic batch)
std::shared_ptr<Model> mlp_model() {
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(std::vector<ir::Dim>{ir::Dim::sym("batch"), 32})});
  auto* m1 = g->add_node("MatMul", {x, g->add_constant("w1", random_tensor({32, 64}, 21, 0.3f))}, 1, "mm1");
  auto* a1 = g->add_node("Add", {m1->output(0), g->add_constant("b1", random_tensor({64}, 22))}, 1, "bias1");
  auto* r1 = g->add_node("Relu", {a1->output(0)}, 1, "relu1");
  auto* m2 = g->add_node("MatMul", {r1->output(0), g->add_constant("w2", random_tensor({64, 16}, 23, 0.3f))}, 1, "mm2");
  auto* t = g->add_node("Tanh", {m2->output(0)}, 1, "tanh");
  auto* sm = g->add_node("Softmax", {t->output(0)}, 1, "softmax");
  g->add_output(sm->output(0));
  ir::infer_shapes(*g);
  return std::make_shared<Model>(g);
}

// Six 32->32 3x3 convolutions on 128x128: a request that takes a while (~2 GFLOP).
std::shared_ptr<Model> slow_model() {
  auto g = make_graph();
  ir::Value* v = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 32, 128, 128})});
  // 24 f32 convolutions (compile it with f32_properties): about 10 ms even where bf16 is
  // fast, long enough that a wait of a millisecond ends before the run does, also under the
  // sanitizers
  for (int i = 0; i < 24; ++i) {
    auto* c = g->add_node("Conv", {v, g->add_constant(cat("w", i), random_tensor({32, 32, 3, 3}, 40 + i, 0.05f))}, 1,
                          cat("conv", i));
    c->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
    v = c->output(0);
  }
  g->add_output(v);
  ir::infer_shapes(*g);
  return std::make_shared<Model>(g);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.byte_size()) == 0;
}


#define EXPECT_CONTAINS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

}  // namespace

// ---------------- settings ----------------

TEST(StreamsSettings, NewAndOldKeyNamesAndEffectiveValues) {
  Core core;
  auto model = mlp_model();
  CompiledModel a = core.compile_model(model, {{"num_streams", "2"},
                                               {"inference_num_threads", "2"},
                                               {"enable_cpu_pinning", "NO"},
                                               {"exclusive_async_requests", "YES"},
                                               {"enable_profiling", "YES"},
                                               {"performance_mode", "THROUGHPUT"}});
  CompiledModel b = core.compile_model(model, {{"CPU_THROUGHPUT_STREAMS", "2"},
                                               {"CPU_THREADS_NUM", "2"},
                                               {"CPU_BIND_THREAD", "NO"},
                                               {"EXCLUSIVE_ASYNC_REQUESTS", "YES"},
                                               {"PERF_COUNT", "YES"},
                                               {"PERFORMANCE_HINT", "THROUGHPUT"}});
  for (CompiledModel* cm : {&a, &b}) {
    for (auto [key, old, want] : std::vector<std::tuple<std::string, std::string, std::string>>{
             {"num_streams", "CPU_THROUGHPUT_STREAMS", "2"},
             {"inference_num_threads", "CPU_THREADS_NUM", "2"},
             {"enable_cpu_pinning", "CPU_BIND_THREAD", "NO"},
             {"exclusive_async_requests", "EXCLUSIVE_ASYNC_REQUESTS", "YES"},
             {"enable_profiling", "PERF_COUNT", "YES"},
             {"performance_mode", "PERFORMANCE_HINT", "THROUGHPUT"},
             {"kiln_threads_per_stream", "kiln_threads_per_stream", "1"},
             {"optimal_number_of_infer_requests", "OPTIMAL_NUMBER_OF_INFER_REQUESTS", "2"}}) {
      EXPECT_EQ(cm->get_property(key), want) << key;
      EXPECT_EQ(cm->get_property(old), want) << old;
    }
    EXPECT_EQ(cm->get_property("kiln_executor"), "cpu");
  }
  // the spec's "disable all internal threading" combination
  CompiledModel none = core.compile_model(model, {{"CPU_THROUGHPUT_STREAMS", "0"},
                                                  {"CPU_THREADS_NUM", "1"},
                                                  {"CPU_BIND_THREAD", "NO"}});
  EXPECT_EQ(none.get_property("num_streams"), "0");
  EXPECT_EQ(none.get_property("inference_num_threads"), "1");
  EXPECT_EQ(none.get_property("optimal_number_of_infer_requests"), "1");
  InferRequest r = none.create_infer_request();
  r.set_input_tensor(random_tensor({2, 32}, 1));
  r.infer();
  EXPECT_EQ(r.get_output_tensor().shape(), (Shape{2, 16}));
  // values are case-insensitive; AUTO under its old spelling
  CompiledModel c = core.compile_model(model, {{"num_streams", "CPU_THROUGHPUT_AUTO"}, {"enable_cpu_pinning", "numa"}});
  EXPECT_EQ(c.get_property("num_streams"), std::to_string(cpu::auto_streams(
                                                 static_cast<int>(cpu::CpuTopology::detect().cpus.size()),
                                                 cpu::CpuTopology::detect())));
  EXPECT_EQ(c.get_property("enable_cpu_pinning"), "NUMA");
}

TEST(StreamsSettings, DefaultsAndHintsOnThisMachine) {
  Core core;
  auto model = mlp_model();
  const auto topo = cpu::CpuTopology::detect();
  const int cpus = static_cast<int>(topo.cpus.size());
  CompiledModel d = core.compile_model(model);
  EXPECT_EQ(d.get_property("num_streams"), "1");
  EXPECT_EQ(d.get_property("inference_num_threads"), std::to_string(cpus));
  EXPECT_EQ(d.get_property("enable_cpu_pinning"), "YES");
  EXPECT_EQ(d.get_property("performance_mode"), "NONE");
  EXPECT_EQ(d.get_property("exclusive_async_requests"), "NO");
  CompiledModel lat = core.compile_model(model, {{"performance_mode", "LATENCY"}});
  EXPECT_EQ(lat.get_property("num_streams"), std::to_string(topo.numa_nodes.size()));
  CompiledModel tput = core.compile_model(model, {{"performance_mode", "throughput"}});
  const int streams = cpu::auto_streams(cpus, topo);
  EXPECT_EQ(tput.get_property("num_streams"), std::to_string(streams));
  EXPECT_EQ(tput.get_property("kiln_threads_per_stream"), std::to_string(std::max(1, cpus / streams)));
  // an explicit number wins over the hint
  CompiledModel both = core.compile_model(model, {{"performance_mode", "THROUGHPUT"}, {"num_streams", "1"}});
  EXPECT_EQ(both.get_property("num_streams"), "1");
  // more streams or threads than the CPUs kiln may use: cut to them, and said so
  CompiledModel many = core.compile_model(model, {{"num_streams", "1000"}, {"inference_num_threads", "4096"}});
  EXPECT_EQ(many.get_property("num_streams"), std::to_string(cpus));
  EXPECT_EQ(many.get_property("inference_num_threads"), std::to_string(cpus));
  const std::string layout = many.get_property("kiln_stream_layout");
  EXPECT_NE(layout.find("; clamped: inference_num_threads 4096 -> " + std::to_string(cpus)), std::string::npos) << layout;
  EXPECT_NE(layout.find("num_streams 1000 -> " + std::to_string(cpus)), std::string::npos) << layout;
  InferRequest req = many.create_infer_request();  // and it runs
  req.set_input_tensor(random_tensor({1, 32}, 3));
  req.infer();
}

TEST(StreamsSettings, LayoutRulesOnOtherMachines) {
  cpu::CpuTopology two{{0, 1}, {{0, 1}}};
  cpu::CpuTopology eight{{0, 1, 2, 3, 4, 5, 6, 7}, {{0, 1, 2, 3, 4, 5, 6, 7}}};
  cpu::CpuTopology numa{{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
                        {{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14, 15}}};
  using S = cpu::StreamRequest::Streams;
  cpu::StreamRequest r;
  r.streams_kind = S::automatic;
  auto l = cpu::resolve_streams(r, two);
  EXPECT_EQ(l.streams, 2);
  EXPECT_EQ(l.clamped, "");
  {  // 1000 streams of 64 threads on two CPUs: two streams of one thread
    cpu::StreamRequest big;
    big.streams_kind = S::number;
    big.streams = 1000;
    big.threads = 64;
    const auto c = cpu::resolve_streams(big, two);
    EXPECT_EQ(c.streams, 2);
    EXPECT_EQ(c.threads_per_stream, 1);
    EXPECT_EQ(c.clamped, "inference_num_threads 64 -> 2 (the CPUs kiln may use); num_streams 1000 -> 2 (one thread each, 2 threads)");
    big.threads = 8;  // eight CPUs: 8 threads kept, streams cut to them
    EXPECT_EQ(cpu::resolve_streams(big, eight).streams, 8);
    EXPECT_EQ(cpu::resolve_streams(big, eight).clamped, "num_streams 1000 -> 8 (one thread each, 8 threads)");
  }
  EXPECT_EQ(l.threads_per_stream, 1);
  EXPECT_EQ(l.cpus, (std::vector<std::vector<int>>{{0}, {1}}));
  EXPECT_EQ(l.describe(), "2 streams x 1 thread, pinned to CPUs {0} {1}");
  l = cpu::resolve_streams(r, eight);  // 8 CPUs on a node: 2 threads a stream
  EXPECT_EQ(l.streams, 4);
  EXPECT_EQ(l.threads_per_stream, 2);
  EXPECT_EQ(l.cpus[3], (std::vector<int>{6, 7}));
  r.streams_kind = S::numa;
  l = cpu::resolve_streams(r, numa);
  EXPECT_EQ(l.streams, 2);
  EXPECT_EQ(l.threads_per_stream, 8);
  EXPECT_EQ(l.cpus[1], numa.numa_nodes[1]);
  r = {};
  r.mode = cpu::PerformanceMode::latency;
  l = cpu::resolve_streams(r, numa);  // one stream per NUMA node
  EXPECT_EQ(l.streams, 2);
  r = {};
  r.streams_kind = S::number;
  r.streams = 3;
  r.threads = 7;
  r.pin = cpu::PinMode::numa;
  l = cpu::resolve_streams(r, numa);
  EXPECT_EQ(l.threads_per_stream, 2);  // 7 / 3
  EXPECT_EQ(l.total_threads(), 6);
  EXPECT_EQ(l.cpus[2], numa.numa_nodes[0]);  // stream 2 starts on CPU 4: node 0
  r = {};
  r.streams_kind = S::number;
  r.streams = 0;
  l = cpu::resolve_streams(r, eight);
  EXPECT_EQ(l.threads_per_stream, 8);
  EXPECT_EQ(l.pin, cpu::PinMode::none);  // callers' threads are not pinned
  EXPECT_EQ(l.describe(), "0 streams (requests run on the caller's thread), 8 threads, not pinned");
}

TEST(StreamsSettings, ConvolutionsUntilHot) {
  // kiln_convolutions_until_hot: auto (measured) by default, bf16 or f32 when asked (what they do:
  // CpuDynamicShapes.AtBf16ANewShapesConvolutionsComputeInF32UntilTheShapeIsHotWhenAskedTo,
  // CpuDynamicShapes.AtBf16TheExecutorMeasuresBothPrecisionsForNewShapesThenTakesTheCheaper)
  Core core;
  auto model = mlp_model();
  EXPECT_EQ(core.compile_model(model).get_property("kiln_convolutions_until_hot"), "auto");
  for (const char* v : {"auto", "bf16", "f32"})
    EXPECT_EQ(core.compile_model(model, {{"kiln_convolutions_until_hot", v}}).get_property("kiln_convolutions_until_hot"), v);
  for (const char* bad : {"", "F32", "fp32", "int8", "AUTO"})
    EXPECT_CONTAINS(error_of([&] { core.compile_model(model, {{"kiln_convolutions_until_hot", bad}}); }),
                    "auto, bf16, f32");
  // static shapes, no convolution: nothing to measure or choose
  EXPECT_EQ(core.compile_model(model).get_property("kiln_convolutions_until_hot_choice"), "");
}

TEST(StreamsSettings, PlanCacheCapacity) {
  Core core;
  auto model = mlp_model();
  EXPECT_EQ(core.compile_model(model).get_property("kiln_plan_cache_capacity"),
            std::to_string(cpu::Executor::kDefaultPlanCapacity));
  EXPECT_EQ(core.compile_model(model, {{"kiln_plan_cache_capacity", "3"}}).get_property("kiln_plan_cache_capacity"), "3");
  for (const char* bad : {"0", "-1", "many", "100001"})
    EXPECT_CONTAINS(error_of([&] { core.compile_model(model, {{"kiln_plan_cache_capacity", bad}}); }),
                    "an integer in [1, 100000]");
  // the cache's counters: compile_model makes batch 1's plan (its probe shape: a leading dynamic
  // dim is 1); then batches 1, 2, 1, 3 with room for two plans: 2 made (3 drops 2), 2 found
  CompiledModel cm = core.compile_model(model, {{"kiln_plan_cache_capacity", "2"}});
  EXPECT_EQ(cm.get_property("kiln_plan_cache_size"), "1");
  InferRequest req = cm.create_infer_request();
  for (int64_t batch : {1, 2, 1, 3}) {
    req.set_input_tensor(Tensor(DType::f32, {batch, 32}));
    req.infer();
  }
  EXPECT_EQ(cm.get_property("kiln_plan_cache_misses"), "2");
  EXPECT_EQ(cm.get_property("kiln_plan_cache_hits"), "2");
  EXPECT_EQ(cm.get_property("kiln_plan_cache_size"), "2");
  EXPECT_CONTAINS(error_of([&] { core.compile_model(model, {{"kiln_plan_cache_hits", "1"}}); }), "unknown property");
}

TEST(StreamsSettings, PlanCompileTimeCountsWhatNewShapesCompiledDuringInferences) {
  Core core;
  auto model = mlp_model();
  CompiledModel cm = core.compile_model(model);  // batch 1 compiled here (the probe): not in the count
  auto compile_ms = [&] { return std::stod(cm.get_property("kiln_plan_compile_ms")); };
  InferRequest req = cm.create_infer_request();
  req.set_input_tensor(Tensor(DType::f32, {1, 32}));
  req.infer();
  EXPECT_EQ(compile_ms(), 0.0) << "a cached plan compiles nothing";
  req.set_input_tensor(Tensor(DType::f32, {2, 32}));
  req.infer();
  const double after_new = compile_ms();
  EXPECT_GT(after_new, 0.0) << "batch 2's plan and graph were made by this inference";
  req.infer();
  EXPECT_EQ(compile_ms(), after_new) << "batch 2 again: nothing more";
  req.set_input_tensor(Tensor(DType::f32, {3, 32}));
  req.infer();
  EXPECT_GT(compile_ms(), after_new);
  EXPECT_CONTAINS(error_of([&] { core.compile_model(model, {{"kiln_plan_compile_ms", "1"}}); }), "unknown property");
}

TEST(StreamsSettings, RuntimeCacheCapacity) {
  // oneDNN's primitive cache, process-wide: set by the compile that gives it, reported by all
  Core core;
  auto model = mlp_model();
  const int before = dnnl::get_primitive_cache_capacity();
  EXPECT_EQ(core.compile_model(model, {{"cpu_runtime_cache_capacity", "100"}}).get_property("cpu_runtime_cache_capacity"), "100");
  EXPECT_EQ(dnnl::get_primitive_cache_capacity(), 100);
  CompiledModel off = core.compile_model(model, {{"CPU_RUNTIME_CACHE_CAPACITY", "0"}});
  EXPECT_EQ(off.get_property("CPU_RUNTIME_CACHE_CAPACITY"), "0");
  InferRequest req = off.create_infer_request();  // runs with nothing cached
  req.set_input_tensor(Tensor(DType::f32, {2, 32}));
  req.infer();
  EXPECT_EQ(core.compile_model(model).get_property("cpu_runtime_cache_capacity"), "0");  // left as it is
  for (const char* bad : {"-1", "lots", "1000001"})
    EXPECT_CONTAINS(error_of([&] { core.compile_model(model, {{"cpu_runtime_cache_capacity", bad}}); }),
                    "an integer in [0, 1000000]");
  dnnl::set_primitive_cache_capacity(before);
}

TEST(StreamsSettings, ErrorsNameTheKeyAndListWhatIsAccepted) {
  Core core;
  auto model = mlp_model();
  auto compile_error = [&](const AnyMap& p) { return error_of([&] { core.compile_model(model, p); }); };
  std::string e = compile_error({{"num_stream", "2"}});
  EXPECT_CONTAINS(e, "unknown property 'num_stream'");
  for (const char* k : {"inference_num_threads (CPU_THREADS_NUM)", "num_streams (CPU_THROUGHPUT_STREAMS)",
                        "enable_cpu_pinning (CPU_BIND_THREAD)", "performance_mode (PERFORMANCE_HINT)",
                        "exclusive_async_requests (EXCLUSIVE_ASYNC_REQUESTS)", "enable_profiling (PERF_COUNT)"})
    EXPECT_CONTAINS(e, k);
  EXPECT_EQ(e.find("optimal_number_of_infer_requests"), std::string::npos) << "read-only keys are not settable";
  e = compile_error({{"num_streams", "many"}});
  EXPECT_CONTAINS(e, "num_streams: 'many'");
  EXPECT_CONTAINS(e, "AUTO");
  EXPECT_CONTAINS(e, "NUMA");
  EXPECT_CONTAINS(compile_error({{"CPU_THROUGHPUT_STREAMS", "-1"}}), "CPU_THROUGHPUT_STREAMS: '-1'");
  EXPECT_CONTAINS(compile_error({{"CPU_THREADS_NUM", "two"}}), "CPU_THREADS_NUM: 'two' is not an integer");
  EXPECT_CONTAINS(compile_error({{"inference_num_threads", "-2"}}), "inference_num_threads: '-2'");
  e = compile_error({{"CPU_BIND_THREAD", "HYBRID"}});
  EXPECT_CONTAINS(e, "CPU_BIND_THREAD: 'HYBRID'");
  EXPECT_CONTAINS(e, "YES, NO, NUMA");
  e = compile_error({{"performance_mode", "FAST"}});
  EXPECT_CONTAINS(e, "performance_mode: 'FAST'");
  EXPECT_CONTAINS(e, "LATENCY, THROUGHPUT");
  EXPECT_CONTAINS(compile_error({{"EXCLUSIVE_ASYNC_REQUESTS", "sometimes"}}), "EXCLUSIVE_ASYNC_REQUESTS: 'sometimes'");
  EXPECT_CONTAINS(compile_error({{"optimal_number_of_infer_requests", "4"}}), "unknown property");
  e = compile_error({{"num_streams", "2"}, {"CPU_THROUGHPUT_STREAMS", "1"}});
  EXPECT_CONTAINS(e, "num_streams is given twice");
  CompiledModel cm = core.compile_model(model);
  e = error_of([&] { cm.get_property("streams"); });
  EXPECT_CONTAINS(e, "unknown property 'streams'");
  EXPECT_CONTAINS(e, "optimal_number_of_infer_requests (OPTIMAL_NUMBER_OF_INFER_REQUESTS)");
}

// ---------------- async requests ----------------

TEST(StreamsAsync, CompileModelCompilesStaticShapesForEveryStream) {
  // compile_model builds the plan and each stream's runtime graph: the first inferences find
  // the plan made, and a model that cannot be compiled fails in compile_model, not later
  Core core;
  CompiledModel cm = core.compile_model(slow_model(), f32_properties({{"num_streams", "2"}}));
  EXPECT_EQ(cm.get_property("kiln_plan_cache_size"), "1");
  EXPECT_EQ(cm.get_property("kiln_plan_cache_misses"), "0");
  std::vector<InferRequest> reqs = {cm.create_infer_request(), cm.create_infer_request()};
  for (auto& r : reqs) {
    r.set_input_tensor(random_tensor({1, 32, 128, 128}, 3));
    r.start_async();
  }
  for (auto& r : reqs) r.wait();
  EXPECT_TRUE(same_bits(reqs[0].get_output_tensor(), reqs[1].get_output_tensor()));
  EXPECT_EQ(cm.get_property("kiln_plan_cache_hits"), "2");
  EXPECT_EQ(cm.get_property("kiln_plan_cache_misses"), "0");
  // dynamic dims: compiled at a probe shape (a leading dim 1, the others 64 but an image's
  // height and width, one value per symbol), so what no shape changes is done here and not by
  // the first inference
  auto g = make_graph();
  ir::Value* x = g->add_input("x", {DType::f32, ir::PartialShape(std::vector<ir::Dim>{ir::Dim::sym("n"), ir::Dim(4), ir::Dim::sym("w")})});
  ir::Value* y = g->add_input("y", {DType::f32, ir::PartialShape(std::vector<ir::Dim>{ir::Dim::sym("w")})});
  g->add_output(g->add_node("Add", {g->add_node("Relu", {x}, 1, "relu")->output(0), y}, 1, "add")->output(0));
  ir::infer_shapes(*g);
  CompiledModel dyn = core.compile_model(std::make_shared<Model>(g), f32_properties({{"num_streams", "2"}}));
  EXPECT_EQ(dyn.get_property("kiln_plan_cache_size"), "1");
  InferRequest probe = dyn.create_infer_request();
  probe.set_input_tensor(0, random_tensor({1, 4, 64}, 4));
  probe.set_input_tensor(1, random_tensor({64}, 5));
  probe.infer();
  EXPECT_EQ(dyn.get_property("kiln_plan_cache_hits"), "1");
  EXPECT_EQ(dyn.get_property("kiln_plan_cache_misses"), "0");
  // a model the probe shape does not fit compiles when shapes arrive, as it would anyway
  auto odd = make_graph();
  ir::Value* z = odd->add_input("z", {DType::f32, ir::PartialShape(std::vector<ir::Dim>{ir::Dim::sym("n")})});
  auto* r = odd->add_node("Reshape", {z, odd->add_constant("s", Tensor::from_vector<int64_t>({-1, 3}, {2}))}, 1, "r");
  odd->add_output(r->output(0));
  ir::infer_shapes(*odd);
  CompiledModel later = core.compile_model(std::make_shared<Model>(odd), f32_properties({{"num_streams", "1"}}));
  EXPECT_EQ(later.get_property("kiln_plan_cache_size"), "0");
  InferRequest req = later.create_infer_request();
  req.set_input_tensor(random_tensor({6}, 6));
  req.infer();
  EXPECT_EQ(req.get_output_tensor().shape(), (Shape{2, 3}));
  // nor is a model whose probe would be large ([1, 1024, 64, 64]: 4M elements): the arenas keep
  // their largest size, which the user's own shapes should decide
  auto big = make_graph();
  ir::Value* b = big->add_input(
      "b", {DType::f32, ir::PartialShape(std::vector<ir::Dim>{ir::Dim::sym("n"), ir::Dim(1024), ir::Dim::sym("h"), ir::Dim::sym("w")})});
  big->add_output(big->add_node("Relu", {b}, 1, "relu")->output(0));
  ir::infer_shapes(*big);
  CompiledModel large = core.compile_model(std::make_shared<Model>(big), f32_properties({{"num_streams", "1"}}));
  EXPECT_EQ(large.get_property("kiln_plan_cache_size"), "0");
  // an image's height and width (a 4-D input's last two dims) are probed at 224, where the
  // kernels chosen by a feature map's size are a real image's; at 64 where 224 would be large
  auto image_model = [&](int64_t channels) {
    auto im = make_graph();
    ir::Value* in = im->add_input("i", {DType::f32, ir::PartialShape(std::vector<ir::Dim>{
                                                        ir::Dim::sym("n"), ir::Dim(channels), ir::Dim::sym("h"), ir::Dim::sym("w")})});
    im->add_output(im->add_node("Relu", {in}, 1, "relu")->output(0));
    ir::infer_shapes(*im);
    return core.compile_model(std::make_shared<Model>(im), f32_properties({{"num_streams", "1"}}));
  };
  auto hits_at = [](CompiledModel& m, const Shape& shape) {
    InferRequest q = m.create_infer_request();
    q.set_input_tensor(random_tensor(shape, 7));
    q.infer();
    return m.get_property("kiln_plan_cache_hits") == "1" && m.get_property("kiln_plan_cache_misses") == "0";
  };
  CompiledModel rgb = image_model(3);
  EXPECT_EQ(rgb.get_property("kiln_plan_cache_size"), "1");
  EXPECT_TRUE(hits_at(rgb, {1, 3, 224, 224}));
  CompiledModel wide = image_model(32);  // [1, 32, 224, 224]: 1.6M elements
  EXPECT_EQ(wide.get_property("kiln_plan_cache_size"), "1");
  EXPECT_TRUE(hits_at(wide, {1, 32, 64, 64}));
  // a model that does not take 224 (its width must split into 64-wide blocks) is compiled at 64
  auto blocks = make_graph();
  ir::Value* bi = blocks->add_input("i", {DType::f32, ir::PartialShape(std::vector<ir::Dim>{
                                                      ir::Dim::sym("n"), ir::Dim(3), ir::Dim::sym("h"), ir::Dim::sym("w")})});
  ir::Value* shape = blocks->add_constant("s", Tensor::from_vector<int64_t>({0, 0, 0, -1, 64}, {5}));
  auto* rs = blocks->add_node("Reshape", {bi, shape}, 1, "split_w");
  blocks->add_output(blocks->add_node("Relu", {rs->output(0)}, 1, "relu")->output(0));
  ir::infer_shapes(*blocks);
  CompiledModel sixty_four = core.compile_model(std::make_shared<Model>(blocks), f32_properties({{"num_streams", "1"}}));
  EXPECT_TRUE(hits_at(sixty_four, {1, 3, 64, 64}));
}

TEST(StreamsAsync, WaitForTimesOutOnALongRequest) {
  Core core;
  CompiledModel cm = core.compile_model(slow_model(), f32_properties({{"num_streams", "1"}}));
  InferRequest req = cm.create_infer_request();
  req.set_input_tensor(random_tensor({1, 32, 128, 128}, 3));
  req.infer();  // builds the stream's graph
  const Tensor first = req.get_output_tensor();
  req.start_async();
  EXPECT_FALSE(req.wait_for(0ms));
  EXPECT_FALSE(req.wait_for(1ms));
  EXPECT_TRUE(req.wait_for(60000ms));
  EXPECT_TRUE(req.wait_for(0ms));  // idle: at once
  EXPECT_TRUE(same_bits(first, req.get_output_tensor()));
  req.wait();  // idle: returns at once
}

TEST(StreamsAsync, QueuedRequestIsBusyUntilAStreamIsFree) {
  Core core;
  CompiledModel cm = core.compile_model(mlp_model(), {{"num_streams", "1"}});
  InferRequest a = cm.create_infer_request(), b = cm.create_infer_request();
  a.set_input_tensor(random_tensor({1, 32}, 1));
  b.set_input_tensor(random_tensor({1, 32}, 2));
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> entered;
  a.set_callback([&, released](std::exception_ptr) {
    entered.set_value();
    released.wait();  // holds the only stream
  });
  a.start_async();
  entered.get_future().wait();
  b.start_async();  // queued behind a's callback on the one stream
  EXPECT_FALSE(b.wait_for(20ms));
  EXPECT_FALSE(a.wait_for(0ms));  // a is idle only once its callback returned
  EXPECT_CONTAINS(error_of([&] { b.start_async(); }), "busy");
  EXPECT_CONTAINS(error_of([&] { b.set_input_tensor(random_tensor({1, 32}, 3)); }), "busy");
  EXPECT_CONTAINS(error_of([&] { b.get_output_tensor(); }), "busy");
  release.set_value();
  EXPECT_TRUE(b.wait_for(60000ms));
  a.wait();
  EXPECT_EQ(b.get_output_tensor().shape(), (Shape{1, 16}));
}

TEST(StreamsAsync, CallbackFiresOncePerRunAndMayRestartTheRequest) {
  Core core;
  CompiledModel cm = core.compile_model(mlp_model(), {{"num_streams", "2"}});
  InferRequest req = cm.create_infer_request();
  req.set_input_tensor(random_tensor({3, 32}, 5));
  req.infer();
  const Tensor want = req.get_output_tensor();
  std::atomic<int> calls{0};
  std::atomic<int> mismatches{0};
  std::promise<void> done;
  constexpr int kRuns = 50;
  req.set_callback([&](std::exception_ptr e) {
    if (e || !same_bits(want, req.get_output_tensor())) ++mismatches;
    if (++calls < kRuns) req.start_async();  // the request is idle in its callback
    else done.set_value();
  });
  req.start_async();
  done.get_future().wait();
  req.wait();
  EXPECT_EQ(calls.load(), kRuns);
  EXPECT_EQ(mismatches.load(), 0);
  req.set_callback(nullptr);
  req.infer();  // no callback any more
  EXPECT_EQ(calls.load(), kRuns);
}

TEST(StreamsAsync, ErrorsOfAnAsyncRunReachWait) {
  Core core;
  CompiledModel cm = core.compile_model(conv_model(), {{"num_streams", "2"}});
  InferRequest req = cm.create_infer_request();
  std::atomic<int> calls{0}, errors{0};
  req.set_callback([&](std::exception_ptr e) {
    ++calls;
    if (e) ++errors;
  });
  req.set_input_tensor(random_tensor({1, 8, 12, 13}, 1));  // wrong width
  req.start_async();
  std::string e = error_of([&] { req.wait(); });
  EXPECT_CONTAINS(e, "x");
  EXPECT_CONTAINS(e, "13");
  EXPECT_CONTAINS(error_of([&] { req.wait(); }), "13");  // kept until the next run
  EXPECT_THROW(req.wait_for(10ms), Error);
  EXPECT_THROW(req.get_output_tensor(), Error);
  req.set_input_tensor(Tensor(DType::i64, {1, 8, 12, 12}));  // wrong dtype: infer() throws it
  EXPECT_THROW(req.infer(), Error);
  req.set_input_tensor(random_tensor({1, 8, 12, 12}, 1));
  req.infer();
  EXPECT_EQ(req.get_output_tensor().shape(), (Shape{1, 10}));
  EXPECT_EQ(calls.load(), 3);
  EXPECT_EQ(errors.load(), 2);
  // an exception escaping the callback reaches wait() too
  req.set_callback([](std::exception_ptr) { throw Error("callback failed"); });
  req.start_async();
  EXPECT_CONTAINS(error_of([&] { req.wait(); }), "callback failed");
  // misuse is reported when it happens
  InferRequest fresh = cm.create_infer_request();
  EXPECT_CONTAINS(error_of([&] { fresh.start_async(); }), "input 'x' was not set");
  fresh.wait();  // never ran: returns
}

TEST(StreamsAsync, ARunThatFailsMidwayPoisonsNothing) {
  // x[4, 8] -> Relu -> Gather(idx) -> Mul 2: an index out of range fails at the Gather, after
  // the Relu has written its part of the arena. The same request and others then compute
  // exactly what the reference executor does, on every stream.
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{4, 8})});
  auto* idx = g->add_input("idx", {DType::i64, ir::PartialShape(Shape{2})});
  auto* r = g->add_node("Relu", {x}, 1, "relu");
  auto* gather = g->add_node("Gather", {r->output(0), idx}, 1, "gather");
  auto* y = g->add_node("Mul", {gather->output(0), g->add_constant("two", Tensor::from_vector<float>({2.0f}, {1}))}, 1, "mul");
  g->add_output(y->output(0));
  ir::infer_shapes(*g);
  auto model = std::make_shared<Model>(g);
  runtime::ReferenceExecutor ref(g);
  Core core;
  CompiledModel cm = core.compile_model(model, test::f32_properties({{"num_streams", "2"}}));
  const Tensor xs = random_tensor({4, 8}, 5);
  const Tensor good = Tensor::from_vector<int64_t>({3, 1}, {2});
  const Tensor bad = Tensor::from_vector<int64_t>({0, 7}, {2});
  const Tensor want = ref.run({xs, good})[0];
  InferRequest failing = cm.create_infer_request(), other = cm.create_infer_request();
  for (int round = 0; round < 3; ++round) {
    failing.set_input_tensor(0, xs);
    failing.set_input_tensor(1, bad);
    other.set_input_tensor(0, xs);
    other.set_input_tensor(1, good);
    failing.start_async();
    other.start_async();
    EXPECT_CONTAINS(error_of([&] { failing.wait(); }), "gather");
    other.wait();
    expect_close(want, other.get_output_tensor(), 0, 0);
    failing.set_input_tensor(1, good);  // the request that failed runs again, correctly
    failing.infer();
    expect_close(want, failing.get_output_tensor(), 0, 0);
  }
}

TEST(StreamsAsync, ZeroStreamsRunOnTheCallersThreads) {
  Core core;
  CompiledModel cm = core.compile_model(mlp_model(), {{"num_streams", "0"}, {"inference_num_threads", "1"}});
  std::vector<Tensor> inputs, want;
  for (uint32_t i = 0; i < 4; ++i) {
    inputs.push_back(random_tensor({2, 32}, 100 + i));
    InferRequest r = cm.create_infer_request();
    r.set_input_tensor(inputs.back());
    r.infer();
    want.push_back(r.get_output_tensor());
  }
  std::atomic<int> bad{0}, foreign_callbacks{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      InferRequest r = cm.create_infer_request();
      const auto me = std::this_thread::get_id();
      r.set_callback([&, me](std::exception_ptr) {
        if (std::this_thread::get_id() != me) ++foreign_callbacks;
      });
      for (int i = 0; i < 50; ++i) {
        const size_t k = static_cast<size_t>(t + i) % inputs.size();
        r.set_input_tensor(inputs[k]);
        r.start_async();  // runs before it returns
        if (!r.wait_for(0ms) || !same_bits(want[k], r.get_output_tensor())) ++bad;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(foreign_callbacks.load(), 0);
}

TEST(StreamsAsync, RequestsAndModelReleasedWhileRunning) {
  std::promise<void> finished;
  {
    Core core;
    CompiledModel cm = core.compile_model(slow_model(), f32_properties({{"num_streams", "2"}}));
    InferRequest req = cm.create_infer_request();
    req.set_input_tensor(random_tensor({1, 32, 128, 128}, 3));
    req.set_callback([&finished](std::exception_ptr) { finished.set_value(); });
    req.start_async();
  }  // the running request keeps the compiled model; its stream then releases both
  EXPECT_EQ(finished.get_future().wait_for(60s), std::future_status::ready);
}

TEST(StreamsAsync, ExclusiveAsyncRequestsGiveTheSameResults) {
  Core core;
  CompiledModel a = core.compile_model(conv_model(), {{"num_streams", "2"}, {"EXCLUSIVE_ASYNC_REQUESTS", "YES"}});
  CompiledModel b = core.compile_model(mlp_model(), {{"num_streams", "2"}, {"exclusive_async_requests", "YES"}});
  InferRequest ra = a.create_infer_request(), rb = b.create_infer_request();
  ra.set_input_tensor(random_tensor({1, 8, 12, 12}, 1));
  rb.set_input_tensor(random_tensor({4, 32}, 2));
  ra.infer();
  rb.infer();
  const Tensor wa = ra.get_output_tensor(), wb = rb.get_output_tensor();
  for (int i = 0; i < 20; ++i) {
    ra.start_async();
    rb.start_async();
    ra.wait();
    rb.wait();
    EXPECT_TRUE(same_bits(wa, ra.get_output_tensor()));
    EXPECT_TRUE(same_bits(wb, rb.get_output_tensor()));
  }
}

TEST(StreamsAsync, ProfilingAndTheReferenceExecutorPerRequest) {
  Core core;
  for (const char* executor : {"cpu", "reference"}) {
    CompiledModel cm = core.compile_model(
        conv_model(), {{"num_streams", "2"}, {"PERF_COUNT", "YES"}, {"kiln_executor", executor}});
    InferRequest a = cm.create_infer_request(), b = cm.create_infer_request();
    a.set_input_tensor(random_tensor({1, 8, 12, 12}, 1));
    b.set_input_tensor(random_tensor({1, 8, 12, 12}, 2));
    a.infer();
    const Tensor want = a.get_output_tensor();
    const size_t rows = a.get_profiling_info().size();
    EXPECT_GT(rows, 0u) << executor;
    for (int i = 0; i < 10; ++i) {
      a.start_async();
      b.start_async();
      a.wait();
      b.wait();
      EXPECT_TRUE(same_bits(want, a.get_output_tensor())) << executor;
      EXPECT_EQ(a.get_profiling_info().size(), rows) << executor;  // each request its own rows
      EXPECT_EQ(b.get_profiling_info().size(), rows) << executor;
    }
  }
}

// ---------------- weights shared between streams ----------------

TEST(StreamsWeights, PackedOncePerExecutorAcrossThreads) {
  auto model = conv_model();
  cpu::Executor ex(model->graph());
  const Tensor in = random_tensor({1, 8, 12, 12}, 4);
  std::vector<Tensor> out(2);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 2; ++t) threads.emplace_back([&, t] { out[t] = ex.run({in})[0]; });
  for (auto& t : threads) t.join();
  EXPECT_TRUE(same_bits(out[0], out[1]));
  EXPECT_EQ(ex.graphs_built(), 2u);  // one graph per thread
  EXPECT_EQ(ex.weights().entries(), 3u);  // conv1, conv2, fc: packed once ...
  EXPECT_EQ(ex.weights().hits(), 3u);     // ... and found by the other thread's graph
  // this thread: a third graph, still no new packing
  EXPECT_TRUE(same_bits(out[0], ex.run({in})[0]));
  EXPECT_EQ(ex.graphs_built(), 3u);
  EXPECT_EQ(ex.weights().entries(), 3u);
  // another shape: a new plan reuses the weights of the unchanged constants
  auto mlp = mlp_model();
  cpu::Executor ex2(mlp->graph());
  ex2.run({random_tensor({1, 32}, 1)});
  ex2.run({random_tensor({5, 32}, 1)});
  EXPECT_EQ(ex2.cached_plans(), 2u);
  EXPECT_EQ(ex2.weights().entries(), 2u);
  EXPECT_EQ(ex2.weights().hits(), 2u);
}

// ---------------- stress ----------------

// 4 requests on each of two models with 2 streams each, all at once, 500 inferences a
// request: every output bit-identical to the sequential run of the same input; every
// run's callback fires exactly once.
TEST(StreamsStress, FourRequestsTwoStreamsTwoModelsBitIdentical) {
  constexpr int kRequests = 4, kRuns = 500, kInputs = 8;
  Core core;
  struct Case {
    std::shared_ptr<Model> model;
    Shape shape;
    CompiledModel compiled;
    std::vector<Tensor> inputs, want;
  };
  std::vector<Case> cases = {{conv_model(), {1, 8, 12, 12}, {}, {}, {}}, {mlp_model(), {3, 32}, {}, {}, {}}};
  for (size_t m = 0; m < cases.size(); ++m) {
    Case& c = cases[m];
    c.compiled = core.compile_model(c.model, {{"num_streams", "2"}});
    ASSERT_EQ(c.compiled.get_property("num_streams"), "2");
    InferRequest seq = c.compiled.create_infer_request();
    for (int i = 0; i < kInputs; ++i) {
      c.inputs.push_back(random_tensor(c.shape, static_cast<uint32_t>(1000 * m + i)));
      seq.set_input_tensor(c.inputs.back());
      seq.infer();
      c.want.push_back(seq.get_output_tensor());
    }
  }
  std::atomic<int> mismatches{0}, errors{0};
  std::vector<std::unique_ptr<std::atomic<int>>> callbacks;
  std::vector<std::thread> drivers;
  for (size_t m = 0; m < cases.size(); ++m)
    for (int q = 0; q < kRequests; ++q) {
      callbacks.push_back(std::make_unique<std::atomic<int>>(0));
      std::atomic<int>* count = callbacks.back().get();
      drivers.emplace_back([&, m, q, count] {
        Case& c = cases[m];
        InferRequest r = c.compiled.create_infer_request();
        r.set_callback([count](std::exception_ptr) { ++*count; });
        for (int i = 0; i < kRuns; ++i) {
          const size_t k = static_cast<size_t>(q * 3 + i) % c.inputs.size();
          try {
            r.set_input_tensor(c.inputs[k]);
            r.start_async();
            r.wait();
            if (!same_bits(c.want[k], r.get_output_tensor())) ++mismatches;
          } catch (const Error&) {
            ++errors;
          }
        }
      });
    }
  for (auto& d : drivers) d.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(errors.load(), 0);
  for (auto& c : callbacks) EXPECT_EQ(c->load(), kRuns);
}

}  // namespace test_streams
