// cpu::Graph: oneDNN-backed nodes against the reference executor, layouts and
// reorders, the memory planner, and the plan cache for dynamic shapes.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <map>
#include <set>
#include <random>
#include <thread>

#include "cpu/dnnl_util.hpp"
#include "cpu/executor.hpp"
#include "cpu/gemm_f32.hpp"
#include "cpu/graph.hpp"
#include "cpu/isa.hpp"
#include "cpu/memory_planner.hpp"
#include "ir/op_registry.hpp"
#include "runtime/reference_executor.hpp"
#include "transforms/specialize_shapes.hpp"

#include "cpu_test_util.hpp"
#include "page_test_util.hpp"

namespace test_cpu_graph {

using namespace kiln;
using namespace kiln::test;

namespace {

struct ConvCase {
  Shape x;
  int64_t oc, group;
  std::vector<int64_t> kernel, strides, dilations, pads;
  std::string auto_pad = "NOTSET";
  bool bias = true;
};

}  // namespace

TEST(CpuConvolution, MatchesReferenceOverOddShapes) {
  std::vector<ConvCase> cases = {
      {{1, 3, 17, 19}, 17, 1, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {{2, 17, 9, 9}, 33, 1, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, "NOTSET", false},
      {{1, 33, 13, 11}, 33, 33, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}},        // depthwise, strided
      {{1, 16, 15, 15}, 24, 4, {3, 3}, {1, 1}, {2, 2}, {2, 2, 2, 2}},         // grouped, dilated
      {{1, 5, 10, 7}, 7, 1, {2, 3}, {2, 1}, {1, 1}, {0, 1, 1, 0}},            // asymmetric pads
      {{1, 6, 11, 11}, 8, 2, {3, 3}, {2, 2}, {1, 1}, {}, "SAME_UPPER"},
      {{1, 6, 11, 11}, 8, 1, {4, 4}, {3, 3}, {1, 1}, {}, "SAME_LOWER"},
      {{2, 3, 31}, 9, 1, {5}, {2}, {1}, {2, 2}},                              // 1D
      {{1, 4, 5, 6, 7}, 3, 1, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},  // 3D
  };
  uint32_t seed = 1;
  for (auto& c : cases) {
    auto g = std::make_shared<ir::Graph>();
    g->opset_imports[""] = 13;
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(c.x)});
    Shape ws = {c.oc, c.x[1] / c.group};
    ws.insert(ws.end(), c.kernel.begin(), c.kernel.end());
    std::vector<ir::Value*> ins = {x, g->add_constant("w", random_tensor(ws, seed++, 0.5f))};
    if (c.bias) ins.push_back(g->add_constant("b", random_tensor({c.oc}, seed++)));
    auto* conv = g->add_node("Conv", ins, 1, "conv");
    conv->attrs["group"] = c.group;
    conv->attrs["kernel_shape"] = c.kernel;
    conv->attrs["strides"] = c.strides;
    conv->attrs["dilations"] = c.dilations;
    if (c.auto_pad == "NOTSET") conv->attrs["pads"] = c.pads;
    else conv->attrs["auto_pad"] = c.auto_pad;
    g->add_output(conv->output(0));
    SCOPED_TRACE(shape_to_string(c.x) + " oc " + std::to_string(c.oc) + " group " + std::to_string(c.group));
    auto cg = compare_with_reference(g, {random_tensor(c.x, seed++)});
    ASSERT_EQ(count_type(*cg, "Convolution"), 1u) << cg->describe();
    for (auto& n : cg->nodes()) {
      if (std::string(n->type()) == "Convolution") {
        EXPECT_EQ(n->impl.rfind("ref", 0), std::string::npos) << n->impl;
      }
    }
  }
}

TEST(CpuLayouts, ConvChainsStayBlockedAndReorderOnlyAtTheBoundary) {
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = 13;
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 32, 14, 14})});
  auto conv = [&](ir::Value* in, const std::string& name, uint32_t seed) {
    auto* n = g->add_node("Conv", {in, g->add_constant(name + "_w", random_tensor({32, 32, 3, 3}, seed, 0.1f))}, 1, name);
    n->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
    return n->output(0);
  };
  auto* c1 = conv(x, "c1", 1);
  auto* c2 = conv(c1, "c2", 2);
  auto* sign = g->add_node("Sign", {c2}, 1, "sign");  // no oneDNN kind: a Reference node, needs plain
  g->add_output(sign->output(0));
  auto cg = compare_with_reference(g, {random_tensor({1, 32, 14, 14}, 3)});
  // c1 -> c2 is passed in the convolution's own (blocked on AVX2/AVX-512) layout:
  // there is a reorder into the first conv and one out to the reference Sign, none between.
  std::vector<std::string> order;
  for (auto& n : cg->nodes()) order.push_back(n->type());
  size_t reorders = count_type(*cg, "Reorder");
  const cpu::Edge* mid = cg->nodes()[order[0] == std::string("Reorder") ? 1 : 0]->outputs[0];
  if (mid->is_plain()) {
    EXPECT_EQ(reorders, 0u) << cg->describe();  // this CPU's convolution prefers plain
  } else {
    EXPECT_EQ(reorders, 2u) << cg->describe();
    EXPECT_EQ(order.front(), "Reorder");
    EXPECT_EQ(order[1], "Convolution");
    EXPECT_EQ(order[2], "Convolution");
    EXPECT_EQ(order[3], "Reorder");
    EXPECT_EQ(order[4], "Reference");
  }
}

TEST(CpuMemoryPlanner, LiveBuffersNeverOverlap) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<cpu::BufferRequest> req;
    for (int i = 0; i < 40; ++i) {
      int first = static_cast<int>(rng() % 30);
      req.push_back({1 + rng() % 5000, first, first + static_cast<int>(rng() % 8)});
    }
    auto plan = cpu::plan_memory(req);
    size_t sum = 0;
    for (size_t i = 0; i < req.size(); ++i) {
      sum += (req[i].bytes + 63) / 64 * 64;
      EXPECT_EQ(plan.offsets[i] % cpu::MemoryPlan::kAlignment, 0u);
      EXPECT_LE(plan.offsets[i] + req[i].bytes, plan.total_bytes);
      for (size_t j = 0; j < i; ++j) {
        bool live_together = req[i].first <= req[j].last && req[j].first <= req[i].last;
        bool overlap = plan.offsets[i] < plan.offsets[j] + req[j].bytes && plan.offsets[j] < plan.offsets[i] + req[i].bytes;
        EXPECT_FALSE(live_together && overlap) << "buffers " << i << " and " << j;
      }
    }
    EXPECT_LE(plan.total_bytes, sum);
  }
  // a chain reuses memory: a -> b -> c -> d, each live for two steps, needs two slots
  auto plan = cpu::plan_memory({{1024, 0, 1}, {1024, 1, 2}, {1024, 2, 3}, {1024, 3, 4}});
  EXPECT_EQ(plan.total_bytes, 2048u);
}

TEST(CpuExecutor, PlansAreCachedPerInputShape) {
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = 13;
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(std::vector<ir::Dim>{ir::Dim::sym("n"), 4, 8, 8})});
  auto* c = g->add_node("Conv", {x, g->add_constant("w", random_tensor({6, 4, 3, 3}, 1))}, 1, "conv");
  // a shape computation that specialisation folds away: Flatten via Shape/Gather/Reshape
  auto* shape = g->add_node("Shape", {c->output(0)}, 1, "shape");
  auto* n0 = g->add_node("Gather", {shape->output(0), g->add_constant("i0", Tensor::scalar<int64_t>(0))}, 1, "n0");
  auto* n0u = g->add_node("Unsqueeze", {n0->output(0), g->add_constant("ax", Tensor::from_vector<int64_t>({0}, {1}))}, 1, "n0u");
  auto* tgt = g->add_node("Concat", {n0u->output(0), g->add_constant("m1", Tensor::from_vector<int64_t>({-1}, {1}))}, 1, "tgt");
  tgt->attrs["axis"] = int64_t(0);
  auto* r = g->add_node("Reshape", {c->output(0), tgt->output(0)}, 1, "flat");
  g->add_output(r->output(0));
  ir::infer_shapes(*g);
  runtime::ReferenceExecutor ref(g);
  cpu::Executor ex(g);
  for (int64_t n : {1, 3, 1, 3, 2}) {
    Tensor in = random_tensor({n, 4, 8, 8}, static_cast<uint32_t>(n));
    expect_close(ref.run({in})[0], ex.run({in})[0]);
  }
  EXPECT_EQ(ex.cached_plans(), 3u);
  const auto& plan = ex.plan_for({{3, 4, 8, 8}});
  ASSERT_TRUE(plan.cpu);
  EXPECT_EQ(plan.graph->num_nodes(), 2u);  // Conv + Reshape; the shape chain was folded
}

TEST(CpuExecutor, ThePlanCacheKeepsTheMostRecentlyUsedShapes) {
  // capacity 2 over batches 1, 2, 3, 1, 3: at most two plans live; a dropped shape is planned
  // again when it comes back, with the same results; each thread's graphs follow the cache
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = 13;
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(std::vector<ir::Dim>{ir::Dim::sym("n"), 4, 8, 8})});
  auto* c = g->add_node("Conv", {x, g->add_constant("w", random_tensor({6, 4, 3, 3}, 1))}, 1, "conv");
  auto* r = g->add_node("Relu", {c->output(0)}, 1, "relu");
  g->add_output(r->output(0));
  ir::infer_shapes(*g);
  runtime::ReferenceExecutor ref(g);
  cpu::Executor ex(g, {}, 2);
  EXPECT_EQ(ex.plan_capacity(), 2u);
  std::vector<int64_t> seen;
  for (int64_t n : {1, 2, 3, 1, 3, 3}) {
    Tensor in = random_tensor({n, 4, 8, 8}, static_cast<uint32_t>(n));
    expect_close(ref.run({in})[0], ex.run({in})[0]);
    EXPECT_LE(ex.cached_plans(), 2u);
  }
  // built: 1, 2, 3 (drops 1), 1 again (drops 2), 3 still cached, 3 again: four graphs
  EXPECT_EQ(ex.graphs_built(), 4u);
  // two threads cycling through more shapes than the cache holds: every result right
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 12; ++i) {
        const int64_t n = 1 + (i + t) % 5;
        Tensor in = random_tensor({n, 4, 8, 8}, static_cast<uint32_t>(10 * n + t));
        const Tensor want = ref.run({in})[0], got = ex.run({in})[0];
        for (int64_t k = 0; k < want.size(); ++k)
          if (std::fabs(want.data<float>()[k] - got.data<float>()[k]) > 1e-4f + 1e-3f * std::fabs(want.data<float>()[k])) {
            ++wrong;
            break;
          }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(ex.cached_plans(), 2u);
}

TEST(CpuArena, GrowsByHalfAgainAndKeepsItsBufferWhenLarger) {
  cpu::Arena a;
  EXPECT_EQ(a.capacity(), 0u);
  void* p = a.reserve(1000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % cpu::Arena::kAlignment, 0u);
  EXPECT_GE(a.capacity(), 1000u);
  EXPECT_EQ(a.reserve(10), p);  // smaller: the same bytes
  EXPECT_EQ(a.reallocations(), 1u);
  a.reserve(1100);  // a little more: grows by half, so the next step up fits
  EXPECT_GE(a.capacity(), 1500u);
  const size_t c = a.capacity();
  a.reserve(c);
  EXPECT_EQ(a.reallocations(), 2u);
  a.reserve(10 * c);  // far more: exactly what is asked (rounded to the alignment)
  EXPECT_EQ(a.capacity(), 10 * c);
  EXPECT_EQ(a.reallocations(), 3u);
}

// From 2 MiB on, a grown arena takes over the old one's pages instead of faulting in (and the
// kernel zeroing) fresh ones for the part already used: what the old arena held is at the front
// of the new one (fresh pages would read as zeros). Not a promise to the graphs, whose contents
// do not outlive a run: the evidence that the touched memory was kept.
TEST(CpuArena, ALargeArenaGrowsIntoThePagesItHad) {
  cpu::Arena a;
  const size_t mib = size_t{1} << 20;
  auto* p = static_cast<unsigned char*>(a.reserve(4 * mib));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (2 * mib), 0u);  // huge-page aligned
  for (size_t i = 0; i < 4 * mib; i += 4096) p[i] = static_cast<unsigned char>(i / 4096 % 251 + 1);
  auto* q = static_cast<unsigned char*>(a.reserve(16 * mib));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % (2 * mib), 0u);
  EXPECT_GE(a.capacity(), 16 * mib);
  EXPECT_EQ(a.reallocations(), 2u);
  size_t kept = 0;
  for (size_t i = 0; i < 4 * mib; i += 4096) kept += q[i] == static_cast<unsigned char>(i / 4096 % 251 + 1);
  EXPECT_EQ(kept, 4 * mib / 4096);
  q[16 * mib - 1] = 7;  // the new part is there too
  EXPECT_EQ(q[16 * mib - 1], 7);
}

TEST(CpuArena, PopulateBringsEveryPageInAndKeepsWhatItHolds) {
  if (!kiln::test::system_populates()) GTEST_SKIP() << "the kernel has no MADV_POPULATE_WRITE (before Linux 5.14)";
  cpu::Arena a;
  const size_t mib = size_t{1} << 20;
  auto* p = static_cast<unsigned char*>(a.reserve(8 * mib));  // fresh mapped pages, untouched
  const size_t pages = a.capacity() / kiln::page_bytes();
  p[0] = 42;  // one page holds something already
  EXPECT_LT(kiln::test::resident_pages(p, a.capacity()), pages / 2);
  a.populate();
  EXPECT_EQ(kiln::test::resident_pages(p, a.capacity()), pages);
  EXPECT_EQ(p[0], 42);
  EXPECT_EQ(a.data(), p);
  EXPECT_EQ(a.reallocations(), 1u);
}

// compile_model prepares its first plan ahead (Executor::prepare): the thread's arena is then in
// memory, and the first inference faults none of it in.
TEST(CpuExecutor, PreparingAPlanBringsTheThreadsArenaIn) {
  if (!kiln::test::system_populates()) GTEST_SKIP() << "the kernel has no MADV_POPULATE_WRITE (before Linux 5.14)";
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = 13;
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(std::vector<ir::Dim>{1, 8, 128, 128})});
  auto* c1 = g->add_node("Conv", {x, g->add_constant("w1", random_tensor({32, 8, 3, 3}, 1))}, 1, "c1");
  c1->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  auto* r = g->add_node("Tanh", {c1->output(0)}, 1, "act");
  auto* c2 = g->add_node("Conv", {r->output(0), g->add_constant("w2", random_tensor({32, 32, 3, 3}, 2))}, 1, "c2");
  c2->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  auto* pool = g->add_node("GlobalAveragePool", {c2->output(0)}, 1, "pool");
  g->add_output(pool->output(0));
  ir::infer_shapes(*g);
  cpu::Executor ex(g);
  EXPECT_EQ(ex.thread_arena(), nullptr);
  ex.prepare({{1, 8, 128, 128}});
  const cpu::Arena* arena = ex.thread_arena();
  ASSERT_NE(arena, nullptr);
  const size_t page = kiln::page_bytes();
  ASSERT_GE(arena->capacity(), 2 * size_t{32 * 128 * 128 * 4});  // two 2 MiB intermediates at least
  EXPECT_GE(kiln::test::resident_pages(arena->data(), arena->capacity()), arena->capacity() / page - 1);
  // and the inference runs right on those pages
  runtime::ReferenceExecutor ref(g);
  Tensor in = random_tensor({1, 8, 128, 128}, 3);
  expect_close(ref.run({in})[0], ex.run({in})[0]);
  EXPECT_EQ(ex.thread_arena(), arena);
}

TEST(CpuExecutor, AThreadsGraphsShareOneArena) {
  // widths growing, shrinking and alternating: each plan's graph binds its buffers to the
  // thread's one arena, wherever the last growth moved it, and results stay right
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = 13;
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(std::vector<ir::Dim>{1, 4, 6, ir::Dim::sym("w")})});
  auto* c1 = g->add_node("Conv", {x, g->add_constant("w1", random_tensor({8, 4, 3, 3}, 1))}, 1, "c1");
  c1->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  auto* r = g->add_node("Sigmoid", {c1->output(0)}, 1, "act");
  auto* c2 = g->add_node("Conv", {r->output(0), g->add_constant("w2", random_tensor({5, 8, 1, 1}, 2))}, 1, "c2");
  auto* t = g->add_node("Transpose", {c2->output(0)}, 1, "t");
  t->attrs["perm"] = std::vector<int64_t>{0, 3, 1, 2};
  g->add_output(t->output(0));
  g->add_output(c1->output(0));
  ir::infer_shapes(*g);
  runtime::ReferenceExecutor ref(g);
  cpu::Executor ex(g);  // GraphOptions{}: f32
  std::vector<Tensor> previous;
  size_t largest = 0, sum = 0;
  for (int64_t w : {8, 64, 8, 40, 64, 8, 64}) {
    Tensor in = random_tensor({1, 4, 6, w}, static_cast<uint32_t>(w));
    auto want = ref.run({in});
    auto got = ex.run({in}, nullptr, &previous);
    ASSERT_EQ(got.size(), 2u);
    expect_close(want[0], got[0]);
    expect_close(want[1], got[1]);
    previous = got;
    const auto& plan = ex.plan_for({in.shape()});
    ASSERT_TRUE(plan.cpu);
    if (w == 64 && largest < plan.cpu->arena_bytes()) largest = plan.cpu->arena_bytes();
    EXPECT_GE(ex.thread_arena_bytes(), plan.cpu->arena_bytes());
  }
  for (int64_t w : {8, 40, 64}) sum += ex.plan_for({{1, 4, 6, w}}).cpu->arena_bytes();
  // one arena: as large as the largest plan needs (with the growth margin), less than all of them
  EXPECT_GE(ex.thread_arena_bytes(), largest);
  EXPECT_LT(ex.thread_arena_bytes(), sum);
}

TEST(CpuExecutor, WeightsFoldedPerPlanArePackedOncePerModel) {
  // Conv -> BatchNormalization: every plan folds the normalisation into new conv weights;
  // equal bytes share one tensor, so the weights cache packs them once for all widths
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = 13;
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(std::vector<ir::Dim>{1, 16, 5, ir::Dim::sym("w")})});
  auto* c = g->add_node("Conv", {x, g->add_constant("w", random_tensor({32, 16, 3, 3}, 1))}, 1, "conv");
  c->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  auto* bn = g->add_node("BatchNormalization",
                         {c->output(0), g->add_constant("scale", random_tensor({32}, 2, 0.5f, 1.5f)),
                          g->add_constant("bias", random_tensor({32}, 3)), g->add_constant("mean", random_tensor({32}, 4)),
                          g->add_constant("var", random_tensor({32}, 5, 0.5f, 1.5f))},
                         1, "bn");
  g->add_output(bn->output(0));
  ir::infer_shapes(*g);
  runtime::ReferenceExecutor ref(g);
  for (bool symbolic : {true, false}) {
    SCOPED_TRACE(symbolic ? "folded once, on symbolic shapes" : "folded per plan (SymbolicShapes disabled)");
    cpu::GraphOptions o;
    if (!symbolic) o.disabled_passes.insert("SymbolicShapes");
    cpu::Executor ex(g, o);
    for (int64_t w : {7, 9, 12, 7}) {
      Tensor in = random_tensor({1, 16, 5, w}, static_cast<uint32_t>(w));
      expect_close(ref.run({in})[0], ex.run({in})[0]);
    }
    EXPECT_EQ(ex.cached_plans(), 3u);
    EXPECT_EQ(ex.uses_ir_template(), symbolic);
    // per plan, equal folded weights share one tensor (the bias is below the size worth sharing);
    // the template folds them once, so there is nothing to share
    EXPECT_EQ(ex.shared_constants(), symbolic ? 0u : 1u);
    EXPECT_EQ(ex.weights().entries(), 1u);  // packed once, not once per width
  }
}

TEST(CpuImplNames, RememberedPerOperationAndPostOps) {
  using dnnl::memory;
  const auto f32 = memory::data_type::f32;
  auto conv_desc = [&](int64_t w, int64_t oc) {
    return dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                           memory::desc({1, 8, 5, w}, f32, memory::format_tag::any),
                                           memory::desc({oc, 8, 3, 3}, f32, memory::format_tag::any),
                                           memory::desc({1, oc, 5, w}, f32, memory::format_tag::any), {1, 1}, {0, 0},
                                           {1, 1}, {1, 1});
  };
  auto with = [](auto add) {
    dnnl::post_ops po;
    add(po);
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    return attr;
  };
  using PD = dnnl::convolution_forward::primitive_desc;
  const auto relu = with([](dnnl::post_ops& po) { po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f); });
  const auto leaky = with([](dnnl::post_ops& po) { po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.1f, 0.0f); });
  auto add_of = [&](memory::dims d) {
    return with([d](dnnl::post_ops& po) {
      po.append_binary(dnnl::algorithm::binary_add, memory::desc(d, memory::data_type::f32, memory::format_tag::abcd));
    });
  };
  // the remembered name is oneDNN's, for each operation
  for (int64_t oc : {16, 3})
    EXPECT_EQ(cpu::impl_name<PD>(conv_desc(9, oc), relu), PD(conv_desc(9, oc), relu, cpu::cpu_engine()).impl_info_str());
  EXPECT_EQ(cpu::impl_name<PD>(conv_desc(9, 16), relu), cpu::impl_name<PD>(conv_desc(9, 16), relu));
  // keys: every parameter of the post-ops counts
  EXPECT_NE(cpu::post_ops_key(relu), cpu::post_ops_key(leaky));
  EXPECT_NE(cpu::post_ops_key(add_of({1, 16, 1, 1})), cpu::post_ops_key(add_of({1, 1, 1, 1})));
  EXPECT_NE(cpu::post_ops_key(relu), cpu::post_ops_key(dnnl::primitive_attr()));
  EXPECT_EQ(cpu::post_ops_key(relu), cpu::post_ops_key(with([](dnnl::post_ops& po) {
              po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
            })));
}

TEST(CpuPrimitiveMemo, LayersAlikeShareOnePrimitiveAndCapacityZeroTurnsItOff) {
  // two Convolution layers of one shape and post-ops (a network's repeated blocks in small; on
  // every ISA oneDNN primitives, where static FullyConnected layers may run kiln's GEMM): the
  // second takes the first one's primitive and descriptor; results stay the reference's
  auto build = [] {
    auto g = make_graph(17);
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 16, 6, 6})});
    auto* a = g->add_node("Conv", {x, g->add_constant("w1", random_tensor({16, 16, 1, 1}, 1, 0.3f))}, 1, "conv1");
    auto* ra = g->add_node("Relu", {a->output(0)}, 1, "r1");
    auto* b = g->add_node("Conv", {ra->output(0), g->add_constant("w2", random_tensor({16, 16, 1, 1}, 2, 0.3f))}, 1, "conv2");
    auto* rb = g->add_node("Relu", {b->output(0)}, 1, "r2");
    g->add_output(rb->output(0));
    ir::infer_shapes(*g);
    return g;
  };
  auto& stats = cpu::primitive_memo_stats();
  const auto g = build();
  const Tensor in = random_tensor({1, 16, 6, 6}, 3);
  const Tensor want = runtime::ReferenceExecutor(g).run({in})[0];
  const size_t hits = stats.hits.load(), misses = stats.misses.load();
  {
    cpu::Graph first(g);
    expect_close(want, first.run({in})[0]);
  }
  EXPECT_GE(stats.hits.load() - hits, 1u);    // conv2 took conv1's
  EXPECT_LE(stats.misses.load() - misses, 1u);  // at most conv1 made one (an earlier test may have)
  // capacity 0 (property cpu_runtime_cache_capacity): nothing kept, nothing found
  const int capacity = dnnl::get_primitive_cache_capacity();
  dnnl::set_primitive_cache_capacity(0);
  const size_t hits0 = stats.hits.load(), misses0 = stats.misses.load();
  {
    cpu::Graph second(g);
    expect_close(want, second.run({in})[0]);
  }
  dnnl::set_primitive_cache_capacity(capacity);
  EXPECT_EQ(stats.hits.load(), hits0);
  EXPECT_EQ(stats.misses.load(), misses0);
}

// NonZero on the input: nothing before the cut (no runtime graph), the cut alone, no tail
TEST(CpuExecutor, DataDependentShapeOfTheFirstNodeRunsTheCutAlone) {
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = 13;
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{6})});
  auto* nz = g->add_node("NonZero", {x}, 1, "nz");
  g->add_output(nz->output(0));
  ir::infer_shapes(*g);
  cpu::Executor ex(g);
  auto out = ex.run({Tensor::from_vector<float>({0, 1, 0, 2, 3, 0}, {6})});
  EXPECT_EQ(out[0].to_i64(), (std::vector<int64_t>{1, 3, 4}));
  const cpu::Executor::Plan& plan = ex.plan_for({{6}});
  EXPECT_FALSE(plan.cpu);
  ASSERT_TRUE(plan.split);
  EXPECT_FALSE(plan.split->tail);
  EXPECT_NE(plan.fallback_reason.find("depends on data"), std::string::npos);
}

TEST(CpuViews, ReshapeAndFlattenShareTheirInputsMemory) {
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = 13;
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{2, 3, 4})});
  auto* a = g->add_node("Neg", {x}, 1, "neg");
  auto* r = g->add_node("Reshape", {a->output(0), g->add_constant("s", Tensor::from_vector<int64_t>({6, 4}, {2}))}, 1,
                        "reshape");
  auto* f = g->add_node("Flatten", {r->output(0)}, 1, "flatten");
  f->attrs["axis"] = int64_t(0);
  auto* b = g->add_node("Abs", {f->output(0)}, 1, "abs");
  g->add_output(b->output(0));
  g->add_output(r->output(0));  // a view that is also a graph output
  auto cg = compare_with_reference(g, {random_tensor({2, 3, 4}, 5)});
  ASSERT_EQ(count_type(*cg, "View"), 2u) << cg->describe();
  const cpu::Edge* neg_out = nullptr;
  for (auto& n : cg->nodes()) {
    if (n->name == "neg") neg_out = n->outputs[0];
    if (std::string(n->type()) == "View") {
      ASSERT_NE(neg_out, nullptr);
      EXPECT_EQ(n->outputs[0]->data, neg_out->data) << n->name;
    }
  }
  // the arena holds neg's output and abs's output only (96 bytes each, 64-aligned)
  EXPECT_EQ(cg->arena_bytes(), 256u) << cg->describe();
}

TEST(CpuTranspose, MatchesReferenceForEveryPermutationShape) {
  std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {
      {{1, 17, 12, 8}, {0, 2, 1, 3}},  // BERT's head split
      {{1, 12, 17, 8}, {0, 2, 3, 1}},  // K transposed
      {{3, 5}, {}},                    // default: reverse
      {{2, 3, 4, 5, 6}, {4, 0, 3, 1, 2}},
      {{33}, {0}},
  };
  uint32_t seed = 11;
  for (auto& [shape, perm] : cases) {
    auto g = std::make_shared<ir::Graph>();
    g->opset_imports[""] = 13;
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(shape)});
    auto* t = g->add_node("Transpose", {x}, 1, "t");
    if (!perm.empty()) t->attrs["perm"] = perm;
    g->add_output(t->output(0));
    SCOPED_TRACE(shape_to_string(shape));
    auto cg = compare_with_reference(g, {random_tensor(shape, seed++)});
    EXPECT_EQ(count_type(*cg, "Transpose"), 1u) << cg->describe();
  }
  // after a convolution the input arrives in the convolution's layout and is reordered first
  {
    auto g = std::make_shared<ir::Graph>();
    g->opset_imports[""] = 13;
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 16, 7, 9})});
    auto* c = g->add_node("Conv", {x, g->add_constant("w", random_tensor({32, 16, 3, 3}, 9, 0.2f))}, 1, "conv");
    c->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
    auto* t = g->add_node("Transpose", {c->output(0)}, 1, "to_nhwc");
    t->attrs["perm"] = std::vector<int64_t>{0, 2, 3, 1};
    g->add_output(t->output(0));
    auto cg = compare_with_reference(g, {random_tensor({1, 16, 7, 9}, 10)});
    EXPECT_EQ(count_type(*cg, "Transpose"), 1u) << cg->describe();
  }
  // a dtype oneDNN cannot hold stays on the reference kernel
  auto g = std::make_shared<ir::Graph>();
  auto* x = g->add_input("x", {DType::i64, ir::PartialShape(Shape{2, 3})});
  auto* t = g->add_node("Transpose", {x}, 1, "t");
  g->add_output(t->output(0));
  ir::infer_shapes(*g);
  cpu::Graph cg(g);
  EXPECT_EQ(count_type(cg, "Reference"), 1u);
}

TEST(CpuInPlace, EltwiseAndBinaryWriteOverInputsNothingReadsLater) {
  // conv -> relu -> sigmoid -> add(sigmoid, conv2) -> tanh, plus a relu whose input stays live
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 8, 10, 10})});
  auto* c1 = g->add_node("Conv", {x, g->add_constant("w1", random_tensor({16, 8, 3, 3}, 1, 0.2f))}, 1, "conv1");
  c1->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  auto* relu = g->add_node("Relu", {c1->output(0)}, 1, "relu");         // conv1 dies here: in place
  auto* sig = g->add_node("Sigmoid", {relu->output(0)}, 1, "sigmoid");  // relu dies here: in place
  auto* c2 = g->add_node("Conv", {x, g->add_constant("w2", random_tensor({16, 8, 3, 3}, 2, 0.2f))}, 1, "conv2");
  c2->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  auto* keep = g->add_node("Exp", {c2->output(0)}, 1, "exp");  // conv2 is read again below: not in place
  auto* add = g->add_node("Add", {keep->output(0), c2->output(0)}, 1, "add");      // exp dies here: in place
  auto* add2 = g->add_node("Add", {sig->output(0), add->output(0)}, 1, "add2");    // both die: in place
  auto* out = g->add_node("Tanh", {add2->output(0)}, 1, "tanh");  // a graph output may be written in place too
  g->add_output(out->output(0));
  auto cg = compare_with_reference(g, {random_tensor({1, 8, 10, 10}, 3)});
  std::map<std::string, const cpu::Node*> by_name;
  for (auto& n : cg->nodes()) by_name[n->name] = n.get();
  auto same = [&](const char* a, const char* b) { return by_name.at(a)->outputs[0]->data == by_name.at(b)->outputs[0]->data; };
  EXPECT_TRUE(same("relu", "conv1")) << cg->describe();
  EXPECT_TRUE(same("sigmoid", "conv1"));
  EXPECT_FALSE(same("exp", "conv2"));
  EXPECT_TRUE(same("add", "exp"));
  EXPECT_TRUE(same("add2", "sigmoid") || same("add2", "add"));
  EXPECT_TRUE(same("tanh", "add2"));
  EXPECT_EQ(cg->in_place_nodes(), 5u) << cg->describe();
}

TEST(CpuInPlace, NeverOverGraphInputsOrTheSameBufferReadTwice) {
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{4, 32})});
  auto* relu = g->add_node("Relu", {x}, 1, "relu");  // over the user's input: never
  auto* twice = g->add_node("Add", {relu->output(0), relu->output(0)}, 1, "twice");
  auto* neg = g->add_node("Neg", {twice->output(0)}, 1, "neg");
  g->add_output(neg->output(0));
  Tensor in = random_tensor({4, 32}, 4);
  Tensor copy = in.clone();
  auto cg = compare_with_reference(g, {in});
  expect_close(copy, in, 0, 0);  // the input is untouched
  EXPECT_EQ(cg->in_place_nodes(), 1u) << cg->describe();  // only neg over twice
}

TEST(CpuConcatInPlace, ProducersWriteTheirSliceOfTheOutput) {
  // N = 1, plain, axis 1: each input is one contiguous slice of the output
  auto build = [](bool b_is_output) {
    auto g = make_graph();
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 3, 5, 4})});
    auto* a = g->add_node("Exp", {x}, 1, "a");
    auto* b = g->add_node("Neg", {x}, 1, "b");
    auto* c = g->add_node("Erf", {x}, 1, "c");  // a Reference node writes into the output too
    auto* cat = g->add_node("Concat", {a->output(0), b->output(0), c->output(0)}, 1, "cat");
    cat->attrs["axis"] = int64_t(1);
    auto* y = g->add_node("Abs", {cat->output(0)}, 1, "abs");
    g->add_output(y->output(0));
    if (b_is_output) g->add_output(b->output(0));
    return g;
  };
  // an input that is also a graph output stays a buffer of its own: the Concat copies
  auto cg = compare_with_reference(build(true), {random_tensor({1, 3, 5, 4}, 6)});
  EXPECT_EQ(cg->concat_in_place_nodes(), 0u) << cg->describe();

  auto cg2 = compare_with_reference(build(false), {random_tensor({1, 3, 5, 4}, 7)});
  ASSERT_EQ(cg2->concat_in_place_nodes(), 1u) << cg2->describe();
  std::map<std::string, const cpu::Node*> by_name;
  for (auto& n : cg2->nodes()) by_name[n->name] = n.get();
  const char* base = static_cast<const char*>(by_name.at("cat")->outputs[0]->data);
  EXPECT_EQ(by_name.at("a")->outputs[0]->data, base);
  EXPECT_EQ(by_name.at("b")->outputs[0]->data, base + 60 * 4);
  EXPECT_EQ(by_name.at("c")->outputs[0]->data, base + 120 * 4);
  EXPECT_EQ(by_name.at("cat")->impl, "in_place");
}

TEST(CpuConcatInPlace, NotWhenSlicesAreStrided) {
  // N = 2: an input's rows are interleaved with the other input's in the output
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{2, 3, 4})});
  auto* a = g->add_node("Exp", {x}, 1, "a");
  auto* b = g->add_node("Neg", {x}, 1, "b");
  auto* cat = g->add_node("Concat", {a->output(0), b->output(0)}, 1, "cat");
  cat->attrs["axis"] = int64_t(1);
  g->add_output(cat->output(0));
  auto cg = compare_with_reference(g, {random_tensor({2, 3, 4}, 8)});
  EXPECT_EQ(cg->concat_in_place_nodes(), 0u) << cg->describe();
}

// A SqueezeNet Fire module in the graph of a model whose shapes vary: its two expanding
// convolutions' outputs are slices of the Concat's. For a batch of more than one image a slice's
// images lie further apart than its own size; the Concat is still no copy where every producer
// writes each image where the layout says (Node::writes_images_apart: kiln's Winograd and its
// GEMM over channel blocks), which on AVX2 without AVX-512 they do (the 3x3 one as im2col rows
// over the small map, by Winograd over the larger). Each producer then writes at its channel
// offset of the Concat's output, and the results are the reference's at batch 1, 2 and 3.
TEST(CpuConcatInPlace, ImagesApartWhereTheProducersWriteThemSo) {
  for (const auto& [h, w] : {std::pair<int64_t, int64_t>{18, 20}, {50, 54}})
  for (int64_t batch : {1, 2, 3}) {
    SCOPED_TRACE(cat("batch ", batch, ", ", h, " x ", w));
    const int64_t plane = ((h - 3) / 2 + 1) * ((w - 3) / 2 + 1);  // after the pool
    auto g = make_graph();
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{batch, 3, h, w})});
    auto relu = [&](ir::Value* v, const std::string& name) { return g->add_node("Relu", {v}, 1, name)->output(0); };
    auto conv1x1 = [&](ir::Value* v, int64_t ci, int64_t co, uint32_t seed, const std::string& name) {
      return relu(g->add_node("Conv", {v, g->add_constant(name + "_w", random_tensor({co, ci, 1, 1}, seed, 0.3f)),
                                       g->add_constant(name + "_b", random_tensor({co}, seed + 1))},
                              1, name)
                      ->output(0),
                  name + "_relu");
    };
    auto* stem = relu(conv3x3(*g, x, 3, 32, 1, "stem", 0.3f), "stem_relu");
    auto* pool = g->add_node("MaxPool", {stem}, 1, "pool");
    pool->attrs["kernel_shape"] = std::vector<int64_t>{3, 3};
    pool->attrs["strides"] = std::vector<int64_t>{2, 2};
    auto* squeeze = conv1x1(pool->output(0), 32, 16, 3, "squeeze");
    auto* e1 = conv1x1(squeeze, 16, 64, 5, "expand1x1");
    auto* e3 = relu(conv3x3(*g, squeeze, 16, 64, 7, "expand3x3", 0.3f), "expand3x3_relu");
    auto* concat = g->add_node("Concat", {e1, e3}, 1, "cat");
    concat->attrs["axis"] = int64_t(1);
    g->add_output(conv1x1(concat->output(0), 128, 16, 9, "next_squeeze"));
    transforms::PassLog log;
    CompareOptions opt = fusing(&log);
    opt.shape_agnostic = true;
    auto cg = compare_with_reference(g, {random_tensor({batch, 3, h, w}, 11)}, opt);
    const cpu::Node* cat_node = nullptr;
    for (auto& n : cg->nodes())
      if (n->name == "cat") cat_node = n.get();
    ASSERT_NE(cat_node, nullptr) << cg->describe();
    std::vector<const cpu::Node*> producers;
    for (const cpu::Edge* in : cat_node->inputs) producers.push_back(producer(*cg, in));
    ASSERT_EQ(producers.size(), 2u) << cg->describe();
    ASSERT_TRUE(producers[0] && producers[1]) << cg->describe();
    bool apart = true, concat_layout = true;
    for (const cpu::Node* p : producers) {
      apart &= p->writes_images_apart();
      concat_layout &= p->outputs[0]->layout_name() == cat_node->outputs[0]->layout_name();
    }
    if (cpu::gemm_f32::available() && !cpu::isa_at_least(cpu::Isa::avx512_core)) {
      EXPECT_TRUE(apart) << "kiln's kernels write both expansions on AVX2: " << cg->describe();
      EXPECT_TRUE(concat_layout) << "both in channel blocks of 8 on AVX2: " << cg->describe();
    }
    // (with AVX-512 the 3x3 is oneDNN's, in blocks of 16, and kiln's 1x1 channels-last: a
    // source in another layout is reordered into the output, never planned into it)
    if (concat_layout && (batch == 1 || apart)) {  // one image: each slice is contiguous whoever writes it
      ASSERT_EQ(cat_node->impl, "in_place") << cg->describe();
      const char* base = static_cast<const char*>(cat_node->outputs[0]->data);
      EXPECT_EQ(producers[0]->outputs[0]->data, base);
      EXPECT_EQ(producers[1]->outputs[0]->data, base + 64 * plane * sizeof(float)) << "channels 64.. of image 0";
    } else {
      EXPECT_NE(cat_node->impl, "in_place") << cg->describe();
    }
  }
}

// A Concat whose sources all have its layout, plain or channels-last, copies each row's runs
// itself ("rows"): many rows (a thread each), few rows with long runs (cut into 64 KiB pieces
// the threads share), and channel-last convolution outputs along C. Always the reference's result.
TEST(CpuConcatRows, EveryRowShapeMatchesTheReference) {
  struct Case {
    Shape a, b;
    int64_t axis;
  };
  for (const Case& c : {Case{{300, 5}, {300, 7}, 1},             // 300 rows of 5 + 7 floats
                        Case{{2, 3, 4}, {2, 6, 4}, 1},            // 2 rows
                        Case{{1, 40000}, {1, 30000}, 1},          // one row, runs of 160 and 120 KB
                        Case{{3, 2, 20000}, {3, 2, 20000}, 0}}) { // along the outermost dim
    auto g = make_graph();
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(c.a)});
    auto* y = g->add_input("y", {DType::f32, ir::PartialShape(c.b)});
    auto* a = g->add_node("Exp", {x}, 1, "a");
    auto* b = g->add_node("Neg", {y}, 1, "b");
    auto* cat = g->add_node("Concat", {a->output(0), b->output(0)}, 1, "cat");
    cat->attrs["axis"] = c.axis;
    g->add_output(cat->output(0));
    g->add_output(a->output(0));  // a buffer of its own: the Concat copies rather than placing it
    auto cg = compare_with_reference(g, {random_tensor(c.a, 11), random_tensor(c.b, 12)});
    const cpu::Node* node = find(*cg, "cat");
    ASSERT_NE(node, nullptr);
    EXPECT_EQ(node->impl, "rows") << cg->describe();
  }
  // two convolutions' outputs along C: copied as rows when both are plain or both channels-last
  // (what this CPU's convolutions pick), else by oneDNN
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 8, 10, 10})});
  ir::Value* a = conv3x3(*g, x, 8, 16, 13, "ca", 0.3f);
  ir::Value* b = conv3x3(*g, x, 8, 24, 14, "cb", 0.3f);
  auto* cat = g->add_node("Concat", {a, b}, 1, "cat");
  cat->attrs["axis"] = int64_t(1);
  g->add_output(cat->output(0));
  auto cg = compare_with_reference(g, {random_tensor({1, 8, 10, 10}, 15)});
  const cpu::Node* node = find(*cg, "cat");
  ASSERT_NE(node, nullptr);
  std::set<std::string> layouts;
  for (const cpu::Edge* e : node->inputs) {
    const dnnl::memory::dims dims(e->shape.begin(), e->shape.end());
    const dnnl::memory::desc nhwc(dims, dnnl::memory::data_type::f32, dnnl::memory::format_tag::acdb);
    layouts.insert(e->is_plain() ? "plain" : *e->blocked == nhwc ? "acdb" : "other");
  }
  const bool rows = layouts.size() == 1 && (*layouts.begin() == "plain" || *layouts.begin() == "acdb");
  if (node->impl != "in_place") {
    EXPECT_EQ(node->impl == "rows", rows) << node->impl << " " << *layouts.begin() << "\n" << cg->describe();
  }
}

// A source in another layout than the Concat's channels-last destination (here a plain graph
// input between two convolutions' outputs) is written by a reorder into its slice while the
// others are copied as rows ("rows_reorders"): many rows (a thread each) and few (pieces).
// Below AVX-512 the convolutions write channel blocks and oneDNN's concat does it all.
TEST(CpuConcatRows, ASourceInAnotherLayoutIsReorderedIntoItsSlice) {
  for (const Shape& xs : {Shape{2, 4, 10, 10}, Shape{1, 4, 4, 4}}) {
    SCOPED_TRACE(shape_to_string(xs));
    auto g = make_graph();
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(xs)});
    auto* y = g->add_input("y", {DType::f32, ir::PartialShape(xs)});
    ir::Value* a = conv3x3(*g, x, 4, 16, 21, "ca", 0.3f);  // 4 input channels: no Winograd
    ir::Value* b = conv3x3(*g, x, 4, 32, 23, "cb", 0.3f);
    auto* cat = g->add_node("Concat", {a, y, b}, 1, "cat");
    cat->attrs["axis"] = int64_t(1);
    g->add_output(conv3x3(*g, cat->output(0), 52, 8, 25, "after", 0.3f));
    auto cg = compare_with_reference(g, {random_tensor(xs, 26), random_tensor(xs, 27)});
    const cpu::Node* node = find(*cg, "cat");
    ASSERT_NE(node, nullptr);
    const cpu::Edge* out = node->outputs[0];
    const dnnl::memory::desc nhwc(dnnl::memory::dims(out->shape.begin(), out->shape.end()),
                                  dnnl::memory::data_type::f32, dnnl::memory::format_tag::acdb);
    const bool channels_last = !out->is_plain() && *out->blocked == nhwc;
    EXPECT_EQ(node->impl == "rows_reorders", channels_last) << node->impl << "\n" << cg->describe();
  }
}

// The same into channel blocks: sources of whole blocks in the destination's layout are copied
// as runs (one per image and source) and a plain one is reordered into its slice, where the
// convolutions write channel blocks (AVX2 and AVX-512: nChw8c / nChw16c); oneDNN's generic
// concat had the whole mix (its reference kernel on SqueezeNet's first fire module).
TEST(CpuConcatRows, APlainSourceIsReorderedIntoItsSliceOfChannelBlocks) {
  for (const Shape& xs : {Shape{2, 8, 10, 10}, Shape{1, 8, 4, 4}}) {
    SCOPED_TRACE(shape_to_string(xs));
    auto g = make_graph();
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(xs)});
    auto* y = g->add_input("y", {DType::f32, ir::PartialShape(Shape{xs[0], 16, xs[2], xs[3]})});
    ir::Value* a = conv3x3(*g, x, 8, 16, 31, "ca", 0.3f);
    ir::Value* b = conv3x3(*g, x, 8, 32, 33, "cb", 0.3f);
    auto* cat = g->add_node("Concat", {a, y, b}, 1, "cat");
    cat->attrs["axis"] = int64_t(1);
    g->add_output(conv3x3(*g, cat->output(0), 64, 8, 35, "after", 0.3f));
    auto cg = compare_with_reference(g, {random_tensor(xs, 36), random_tensor({xs[0], 16, xs[2], xs[3]}, 37)});
    const cpu::Node* node = find(*cg, "cat");
    ASSERT_NE(node, nullptr);
    const cpu::Edge* out = node->outputs[0];
    const auto& blk = out->is_plain() ? dnnl::memory::desc().data.format_desc.blocking : out->blocked->data.format_desc.blocking;
    const bool channel_blocks = !out->is_plain() && blk.inner_nblks == 1 && blk.inner_idxs[0] == 1 && blk.inner_blks[0] <= 16;
    if (channel_blocks) {
      EXPECT_EQ(node->impl, "rows_reorders") << cg->describe();
    }
  }
}

// Outputs are written straight into the tensors run() returns (the previous run's when the
// caller hands them back): also a Concat whose inputs are placed inside it, an output read by
// later nodes, one listed twice, a Reshape view of another buffer, and a graph input as output.
TEST(CpuGraphOutputs, WrittenIntoTheReturnedTensorsEveryLayoutOfThePlan) {
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 3, 8, 8})});
  auto* r = g->add_node("Relu", {x}, 1, "relu")->output(0);
  auto* n = g->add_node("Neg", {x}, 1, "neg")->output(0);
  auto* cat_node = g->add_node("Concat", {r, n}, 1, "concat");
  cat_node->attrs["axis"] = int64_t{1};
  auto* e = g->add_node("Exp", {x}, 1, "exp")->output(0);
  auto* a = g->add_node("Abs", {e}, 1, "abs")->output(0);
  auto* s = g->add_node("Sigmoid", {x}, 1, "sigmoid")->output(0);
  auto* shape = g->add_constant("shape", Tensor::from_vector<int64_t>({1, 192}, Shape{2}));
  auto* v = g->add_node("Reshape", {s, shape}, 1, "reshape")->output(0);
  g->add_output(cat_node->output(0));
  g->add_output(e);
  g->add_output(a);
  g->add_output(v);
  g->add_output(e);  // twice
  g->add_output(x);  // an input
  ir::infer_shapes(*g);
  runtime::ReferenceExecutor ref(g);
  cpu::Graph cg(g);
  EXPECT_NE(cg.describe().find("1 concats in place"), std::string::npos) << cg.describe();
  std::vector<Tensor> prev;
  const void* concat_buffer = nullptr;
  for (uint32_t rep = 0; rep < 3; ++rep) {
    SCOPED_TRACE("run " + std::to_string(rep));
    const std::vector<Tensor> in = {random_tensor({1, 3, 8, 8}, 40 + rep, 2.0f)};
    auto want = ref.run(in);
    std::vector<Tensor> got = cg.run(in, nullptr, &prev);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) expect_close(want[i], got[i], 1e-5, 1e-6);
    EXPECT_NE(got[1].raw(), got[4].raw());  // the same value, two tensors
    if (rep > 0) {
      EXPECT_EQ(got[0].raw(), concat_buffer);  // handed back: written over
    }
    concat_buffer = got[0].raw();
    prev = std::move(got);
  }
  // a caller holding an output keeps its values
  Tensor held = prev[0];
  const std::vector<Tensor> in = {random_tensor({1, 3, 8, 8}, 50, 2.0f)};
  Tensor before = held.clone();
  auto got = cg.run(in, nullptr, &prev);
  EXPECT_NE(got[0].raw(), held.raw());
  expect_close(before, held, 0, 0);
  expect_close(ref.run(in)[0], got[0], 1e-5, 1e-6);
}

}  // namespace test_cpu_graph
