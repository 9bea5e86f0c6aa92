// Graphs whose shapes depend on data: the cut (transforms/split_at_data_dependent) and the
// executor that runs the head on the fast path, the cut on the reference kernels and the tail
// through an executor of its own (cpu/executor.hpp).
#include <gtest/gtest.h>

#include <kiln/core.hpp>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "cpu/executor.hpp"
#include "ir/op_registry.hpp"
#include "runtime/reference_executor.hpp"
#include "transforms/specialize_shapes.hpp"
#include "transforms/split_at_data_dependent.hpp"

#include "tools/common/npy.hpp"

#include "cpu_test_util.hpp"
#include "test_models_util.hpp"
#include "precision_util.hpp"
#include "tensor_test_util.hpp"

namespace test_cpu_data_dependent {

using namespace kiln;
using namespace kiln::test;

namespace {

Tensor i64s(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::from_vector<int64_t>(std::move(v), {n});
}

std::vector<std::string> names(const std::vector<ir::Value*>& vs) {
  std::vector<std::string> out;
  for (const ir::Value* v : vs) out.push_back(v->name());
  return out;
}

// Columns of the detector's rows: its weight spans whole pages (release_packed_sources gives
// back pages)
constexpr int64_t kWidth = 256;

// x [rows, kWidth] -> MatMul w -> Relu = r (an output); the rows of r whose sum is positive,
// found by NonZero (a count that depends on the data), gathered and multiplied by w again
// (the weight the head packs) plus a bias: `picked`. With `nested`, of those the rows whose
// largest element exceeds 0.5 go through a second NonZero: `second`. The NonZero's own
// output is an output too.
// rows < 0: a dynamic dim "rows"
std::shared_ptr<ir::Graph> detector(int64_t rows, bool nested, Tensor weight = {}) {
  auto g = std::make_shared<ir::Graph>();
  g->name = "detector";
  g->opset_imports[""] = 13;
  ir::PartialShape shape(Shape{std::max<int64_t>(rows, 1), kWidth});
  if (rows < 0) shape.dims[0] = ir::Dim::sym("rows");
  auto* x = g->add_input("x", {DType::f32, shape});
  auto* w = g->add_constant("w", weight.defined() ? weight : random_tensor({kWidth, kWidth}, 3, 0.1f));
  auto* mm = g->add_node("MatMul", {x, w}, {"mm"}, "mm");
  auto* r = g->add_node("Relu", {mm->output(0)}, {"r"}, "relu");
  auto* sum = g->add_node("ReduceSum", {r->output(0), g->add_constant("axis1", i64s({1}))}, {"sum"}, "sum");
  sum->attrs["keepdims"] = int64_t(0);
  auto* pos = g->add_node("Greater", {sum->output(0), g->add_constant("zero", Tensor::scalar<float>(0.f))}, {"pos"},
                          "pos");
  auto* nz = g->add_node("NonZero", {pos->output(0)}, {"nz"}, "nz");
  auto* idx = g->add_node("Squeeze", {nz->output(0), g->add_constant("axis0", i64s({0}))}, {"idx"}, "idx");
  auto* rows_of = g->add_node("Gather", {r->output(0), idx->output(0)}, {"rows_of"}, "gather");
  auto* again = g->add_node("MatMul", {rows_of->output(0), w}, {"again"}, "again");
  auto* picked =
      g->add_node("Add", {again->output(0), g->add_constant("bias", random_tensor({kWidth}, 4))}, {"picked"}, "bias_add");
  g->add_output(picked->output(0));
  g->add_output(r->output(0));
  g->add_output(nz->output(0));
  if (nested) {
    auto* mx = g->add_node("ReduceMax", {picked->output(0)}, {"mx"}, "max");
    mx->attrs["axes"] = std::vector<int64_t>{1};
    mx->attrs["keepdims"] = int64_t(0);
    auto* big = g->add_node("Greater", {mx->output(0), g->add_constant("half", Tensor::scalar<float>(0.5f))},
                            {"big"}, "big");
    auto* nz2 = g->add_node("NonZero", {big->output(0)}, {"nz2"}, "nz2");
    auto* idx2 = g->add_node("Squeeze", {nz2->output(0), g->add_constant("axis0b", i64s({0}))}, {"idx2"}, "idx2");
    auto* sel = g->add_node("Gather", {picked->output(0), idx2->output(0)}, {"sel"}, "gather2");
    auto* neg = g->add_node("Neg", {sel->output(0)}, {"second"}, "neg");
    g->add_output(neg->output(0));
  }
  ir::infer_shapes(*g);
  return g;
}

// x whose rows have a positive sum after the head where `keep` says so, roughly: rows
// of large positive or negative values
Tensor rows_input(const std::vector<bool>& keep, uint32_t seed) {
  const int64_t rows = static_cast<int64_t>(keep.size());
  Tensor t = random_tensor({rows, kWidth}, seed);
  float* p = t.data<float>();
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < kWidth; ++j) p[i * kWidth + j] = keep[static_cast<size_t>(i)] ? p[i * kWidth + j] * 4 : 0.f;
  return t;
}

void expect_same(const std::vector<Tensor>& want, const std::vector<Tensor>& got) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(want[i].shape(), got[i].shape()) << "output " << i;
    ASSERT_EQ(want[i].dtype(), got[i].dtype()) << "output " << i;
    if (want[i].dtype() == DType::i64) {
      EXPECT_EQ(want[i].to_i64(), got[i].to_i64()) << "output " << i;
    } else {
      SCOPED_TRACE(testing::Message() << "output " << i);
      expect_close(want[i], got[i]);
    }
  }
}

}  // namespace

TEST(TransformsSplitAtDataDependent, CutsBeforeTheFirstShapeThatDependsOnData) {
  auto g = detector(6, /*nested=*/false);
  ASSERT_FALSE(transforms::specialize_shapes(*g, {{6, kWidth}}).all_static);
  const auto s = transforms::split_at_data_dependent_shapes(*g);
  ASSERT_TRUE(s);
  // head: MatMul, Relu, ReduceSum, Greater; cut: NonZero; tail: Squeeze, Gather, MatMul, Add
  EXPECT_EQ(s->head->num_nodes(), 4u);
  EXPECT_EQ(s->cut_nodes, 1u);
  EXPECT_EQ(s->tail_nodes, 4u);
  EXPECT_EQ(s->first_dynamic, "nz");
  EXPECT_NE(s->cut_node.find("NonZero"), std::string::npos) << s->cut_node;
  EXPECT_EQ(names(s->head->inputs()), (std::vector<std::string>{"x"}));
  // what the later parts read (pos, r) and the model's output r, once
  std::vector<std::string> head_out = names(s->head->outputs());
  std::sort(head_out.begin(), head_out.end());
  EXPECT_EQ(head_out, (std::vector<std::string>{"pos", "r"}));
  EXPECT_EQ(names(s->cut->inputs()), (std::vector<std::string>{"pos"}));
  EXPECT_EQ(names(s->cut->outputs()), (std::vector<std::string>{"nz"}));
  ASSERT_TRUE(s->tail);
  std::vector<std::string> tail_in = names(s->tail->inputs());
  std::sort(tail_in.begin(), tail_in.end());
  EXPECT_EQ(tail_in, (std::vector<std::string>{"nz", "r"}));
  EXPECT_EQ(names(s->tail->outputs()), (std::vector<std::string>{"picked"}));
  // the weight both MatMuls read is a constant of the head and of the tail, the same storage
  const ir::Value* w_head = s->head->find_value("w");
  const ir::Value* w_tail = s->tail->find_value("w");
  ASSERT_TRUE(w_head && w_tail && w_head->is_constant() && w_tail->is_constant());
  EXPECT_EQ(w_head->constant().raw(), w_tail->constant().raw());
  // every shape of the head is static; the tail's input from the cut is not
  for (const ir::Node* n : s->head->nodes())
    for (const ir::Value* o : n->outputs()) EXPECT_TRUE(o->type.shape.is_static()) << o->name();
  EXPECT_FALSE(s->tail->find_value("nz")->type.shape.is_static());
}

TEST(TransformsSplitAtDataDependent, NothingToCut) {
  // static shapes everywhere: no cut
  auto s = std::make_shared<ir::Graph>();
  s->opset_imports[""] = 13;
  auto* x = s->add_input("x", {DType::f32, ir::PartialShape(Shape{2, 3})});
  auto* n = s->add_node("Relu", {x}, {"y"}, "relu");
  s->add_output(n->output(0));
  ir::infer_shapes(*s);
  EXPECT_FALSE(transforms::split_at_data_dependent_shapes(*s));
  // a node reading a value computed after the cut is in the tail even where its inputs'
  // shapes are static (a NonZero's count through Shape and a Range)
  auto h = std::make_shared<ir::Graph>();
  h->opset_imports[""] = 13;
  auto* v = h->add_input("v", {DType::f32, ir::PartialShape(Shape{5})});
  auto* nz = h->add_node("NonZero", {v}, {"nz"}, "nz");
  auto* shape = h->add_node("Shape", {nz->output(0)}, {"shape"}, "shape");
  auto* count = h->add_node("ReduceProd", {shape->output(0)}, {"count"}, "count");
  count->attrs["keepdims"] = int64_t(0);
  auto* range = h->add_node("Range", {h->add_constant("start", Tensor::scalar<int64_t>(0)), count->output(0),
                                      h->add_constant("step", Tensor::scalar<int64_t>(1))},
                            {"range"}, "range");
  h->add_output(range->output(0));
  ir::infer_shapes(*h);
  ASSERT_FALSE(transforms::specialize_shapes(*h, {{5}}).all_static);
  const auto c = transforms::split_at_data_dependent_shapes(*h);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->head->num_nodes(), 0u);
  EXPECT_EQ(c->cut_nodes, 1u);  // NonZero only: the Range reads the count
  EXPECT_EQ(c->tail_nodes, 3u);
}

TEST(TransformsSplitAtDataDependent, TheTailAsTheModelHasItTakesAnyShape) {
  auto model = detector(6, /*nested=*/false);
  std::shared_ptr<ir::Graph> g = model->clone();
  ASSERT_FALSE(transforms::specialize_shapes(*g, {{6, kWidth}}).all_static);
  const auto s = transforms::split_at_data_dependent_shapes(*g, model.get());
  ASSERT_TRUE(s && s->tail);
  EXPECT_TRUE(s->tail_from_model);
  EXPECT_EQ(s->tail_nodes, 4u);
  EXPECT_EQ(s->cut_key, "nz;");
  for (const ir::Value* in : s->tail->inputs()) {
    ASSERT_TRUE(in->type.shape.rank_known) << in->name();
    EXPECT_EQ(in->type.shape.rank(), 2u) << in->name();
    for (const ir::Dim& d : in->type.shape.dims) EXPECT_TRUE(d.is_unknown()) << in->name();
  }
  // the tail's nodes are the model's: its weight is the model's constant
  EXPECT_EQ(s->tail->find_value("w")->constant().raw(), model->find_value("w")->constant().raw());

  // a model whose cut node has another name (an If inlined by the specialisation, say): the
  // tail is the specialised graph's, its inputs of any shape as well
  auto elsewhere = std::make_shared<ir::Graph>();  // no node 'nz'
  const auto own = transforms::split_at_data_dependent_shapes(*g, elsewhere.get());
  ASSERT_TRUE(own && own->tail);
  EXPECT_FALSE(own->tail_from_model);
  for (const ir::Value* in : own->tail->inputs())
    for (const ir::Dim& d : in->type.shape.dims) EXPECT_TRUE(d.is_unknown()) << in->name();
}

TEST(TransformsSplitAtDataDependent, TailKeysEqualAcrossShapesUnlessAConstantDiffers) {
  const Tensor w = random_tensor({kWidth, kWidth}, 3, 0.1f);  // large: keyed by its storage
  auto tail_of = [&](int64_t rows, float bias_scale) {
    auto g = detector(rows, false, w);
    if (bias_scale != 1.f) {
      Tensor b = random_tensor({kWidth}, 4);
      for (int64_t i = 0; i < kWidth; ++i) b.data<float>()[i] *= bias_scale;
      g->find_value("bias")->set_constant(b);
    }
    EXPECT_FALSE(transforms::specialize_shapes(*g, {{rows, kWidth}}).all_static);
    return transforms::split_at_data_dependent_shapes(*g)->tail;
  };
  const std::string six = transforms::tail_key(*tail_of(6, 1.f));
  EXPECT_EQ(six, transforms::tail_key(*tail_of(9, 1.f))) << "the same tail cut from another input shape";
  EXPECT_NE(six, transforms::tail_key(*tail_of(6, 2.f))) << "another bias";
}

TEST(CpuExecutorDataDependent, HeadOnTheFastPathCutAndTailAfter) {
  auto g = detector(6, /*nested=*/false);
  runtime::ReferenceExecutor ref(detector(6, false));  // its own weights: the executor gives back the model's
  cpu::GraphOptions o;
  o.release_packed_sources = true;  // the head's packed weight is the tail's too: it must keep its copy
  cpu::Executor ex(g, o);
  const cpu::Executor::Plan& plan = ex.plan_for({{6, kWidth}});
  ASSERT_TRUE(plan.split) << plan.fallback_reason;
  ASSERT_TRUE(plan.cpu) << "the head has a runtime graph";
  EXPECT_NE(plan.fallback_reason.find("4 nodes before it run on the fast path"), std::string::npos)
      << plan.fallback_reason;
  EXPECT_NE(count_type(*plan.cpu, "FullyConnected"), 0u) << plan.cpu->describe();
  // counts of picked rows: some, all, none (an empty tail), some again
  const std::vector<std::vector<bool>> keeps = {{true, false, true, false, false, true},
                                                {true, true, true, true, true, true},
                                                {false, false, false, false, false, false},
                                                {false, true, false, false, true, false},
                                                {true, false, true, false, false, true}};
  uint32_t seed = 10;
  for (const auto& keep : keeps) {
    const std::vector<Tensor> in = {rows_input(keep, seed++)};
    SCOPED_TRACE(testing::Message() << "run " << seed - 10);
    expect_same(ref.run(in), ex.run(in));
  }
  EXPECT_EQ(ex.cached_plans(), 1u);  // one plan for the model's shapes; the tail plans its own
  // the tail packs its weights into the model's cache (a tail made for another count finds them)
  ASSERT_TRUE(plan.split->tail);
  EXPECT_EQ(&plan.split->tail->weights(), &ex.weights());
  std::vector<ProfilingInfo> rows;
  ex.run({rows_input(keeps[0], 1)}, &rows);
  auto has = [&](const std::string& node, const std::string& exec) {
    return std::any_of(rows.begin(), rows.end(), [&](const ProfilingInfo& r) {
      return r.node_name == node && r.exec_type.find(exec) != std::string::npos;
    });
  };
  EXPECT_TRUE(has("nz", "ref_")) << "the cut runs on the reference kernels";
  EXPECT_TRUE(has("relu", "")) << "head rows";
  EXPECT_TRUE(has("bias_add", "") || has("again", "")) << "tail rows";
}

TEST(CpuExecutorDataDependent, TheTailCutsAgainAtItsOwnDataDependentShape) {
  auto g = detector(8, /*nested=*/true);
  runtime::ReferenceExecutor ref(g);
  cpu::Executor ex(g);
  ASSERT_TRUE(ex.plan_for({{8, kWidth}}).split);
  uint32_t seed = 40;
  for (int run = 0; run < 6; ++run) {
    std::vector<bool> keep(8);
    for (size_t i = 0; i < keep.size(); ++i) keep[i] = (i * 7 + static_cast<size_t>(run) * 3) % 5 < 3;
    const std::vector<Tensor> in = {rows_input(keep, seed++)};
    SCOPED_TRACE(testing::Message() << "run " << run);
    expect_same(ref.run(in), ex.run(in));
  }
  // the first tail's plans (one per count of picked rows) all cut again before the second
  // NonZero, and share one executor for what follows it
  const cpu::Executor::Plan& top = ex.plan_for({{8, kWidth}});
  ASSERT_TRUE(top.split && top.split->tail);
  cpu::Executor& first_tail = *top.split->tail;
  ASSERT_GE(first_tail.cached_plans(), 2u);
  const cpu::Executor* second_tail = nullptr;
  for (int64_t count = 1; count <= 8; ++count) {
    std::vector<Shape> shapes;
    for (const ir::Value* in : first_tail.graph().inputs())
      shapes.push_back(in->name() == "nz" ? Shape{1, count} : Shape{8, kWidth});
    const cpu::Executor::Plan& p = first_tail.plan_for(shapes);
    ASSERT_TRUE(p.split && p.split->tail) << count << ": " << p.fallback_reason;
    if (!second_tail) second_tail = p.split->tail.get();
    EXPECT_EQ(p.split->tail.get(), second_tail) << count;
  }
}

TEST(CpuExecutorDataDependent, PlansOfOtherInputShapesShareTheModelsTail) {
  auto g = detector(-1, /*nested=*/false);
  runtime::ReferenceExecutor ref(g);
  cpu::Executor ex(g, {}, /*plan_capacity=*/2);
  std::weak_ptr<cpu::Executor> tail;
  uint32_t seed = 90;
  for (int64_t rows : {6, 9, 4, 6, 11}) {  // 11 drops the plan of 9 (two kept)
    std::vector<bool> keep(static_cast<size_t>(rows));
    for (size_t i = 0; i < keep.size(); ++i) keep[i] = i % 3 != 1;
    const std::vector<Tensor> in = {rows_input(keep, seed++)};
    SCOPED_TRACE(testing::Message() << rows << " rows");
    expect_same(ref.run(in), ex.run(in));
    std::shared_ptr<const cpu::Executor::Plan> plan = ex.find_plan({in[0].shape()});
    ASSERT_TRUE(plan && plan->split && plan->split->tail);
    if (tail.expired()) tail = plan->split->tail;
    EXPECT_EQ(plan->split->tail, tail.lock()) << "one executor for the tail of every input shape";
  }
  EXPECT_LE(ex.cached_plans(), 2u);
}

TEST(CpuExecutorDataDependent, ALongChainOfCutsEndsOnTheReferenceExecutor) {
  // 40 NonZeros one after the other, each reading the last one's indices (plus one, so none
  // is dropped): a cut at every one, more than GraphOptions::kMaxCuts
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = 13;
  ir::Value* v = g->add_input("x", {DType::f32, ir::PartialShape(Shape{8})});
  ir::Value* flat = g->add_constant("flat", i64s({-1}));
  ir::Value* one = g->add_constant("one", Tensor::scalar<float>(1.f));
  for (int i = 0; i < 40; ++i) {
    const std::string k = std::to_string(i);
    auto* nz = g->add_node("NonZero", {v}, {"nz" + k}, "nz" + k);
    auto* r = g->add_node("Reshape", {nz->output(0), flat}, {"r" + k}, "r" + k);
    auto* c = g->add_node("Cast", {r->output(0)}, {"c" + k}, "c" + k);
    c->attrs["to"] = int64_t(1);
    v = g->add_node("Add", {c->output(0), one}, {"v" + k}, "add" + k)->output(0);
  }
  g->add_output(v);
  ir::infer_shapes(*g);
  const std::vector<Tensor> in = {Tensor::from_vector<float>({0, 1, 0, 2, 3, 0, 5, 1}, {8})};
  cpu::Executor ex(g);
  expect_same(runtime::ReferenceExecutor(g).run(in), ex.run(in));
  // the executors of the tails, one inside the other: kMaxCuts of them cut, the last does not
  int cuts = 0;
  cpu::Executor* e = &ex;
  std::vector<Shape> shapes = {{8}};
  while (true) {
    const cpu::Executor::Plan& p = e->plan_for(shapes);
    if (!p.split) {
      EXPECT_NE(p.fallback_reason.find("cuts at such shapes before it"), std::string::npos) << p.fallback_reason;
      break;
    }
    ++cuts;
    ASSERT_TRUE(p.split->tail);
    e = p.split->tail.get();
    shapes.assign(e->graph().inputs().size(), Shape{1, 5});  // the last NonZero's 5 indices
  }
  EXPECT_EQ(cuts, cpu::GraphOptions::kMaxCuts);
}

TEST(CpuExecutorDataDependent, DisabledTheWholeGraphRunsOnTheReferenceExecutor) {
  auto g = detector(6, false);
  cpu::GraphOptions o;
  o.disabled_passes.insert(transforms::kSplitAtDataDependentShapes);
  cpu::Executor ex(g, o);
  const cpu::Executor::Plan& plan = ex.plan_for({{6, kWidth}});
  EXPECT_FALSE(plan.split);
  EXPECT_FALSE(plan.cpu);
  const std::vector<Tensor> in = {rows_input({true, false, true, true, false, false}, 5)};
  expect_same(runtime::ReferenceExecutor(g).run(in), ex.run(in));
}

TEST(CpuExecutorDataDependent, ThroughTheApiOnTwoStreamsAtOnce) {
  auto ref_graph = detector(6, /*nested=*/true);
  runtime::ReferenceExecutor ref(ref_graph);
  Core core;
  CompiledModel cm =
      core.compile_model(std::make_shared<Model>(detector(6, true)), f32_properties({{"num_streams", "2"}}));
  const RuntimeModel m = cm.get_runtime_model();
  EXPECT_TRUE(m.reference_reason.empty()) << m.reference_reason;
  EXPECT_NE(m.data_dependent.find("'nz'"), std::string::npos) << m.data_dependent;
  EXPECT_TRUE(std::any_of(m.nodes.begin(), m.nodes.end(), [](const RuntimeNode& n) { return n.type == "FullyConnected"; }));
  std::vector<std::vector<Tensor>> inputs, want;
  for (uint32_t i = 0; i < 6; ++i) {
    std::vector<bool> keep(6);
    for (size_t r = 0; r < keep.size(); ++r) keep[r] = (r + i) % 3 != 0 || i == 5;
    inputs.push_back({rows_input(keep, 70 + i)});
    want.push_back(ref.run(inputs.back()));
  }
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      InferRequest r = cm.create_infer_request();
      for (int i = 0; i < 12; ++i) {
        const size_t k = static_cast<size_t>(t * 5 + i) % inputs.size();
        r.set_input_tensor(inputs[k][0]);
        r.infer();
        for (size_t o = 0; o < want[k].size(); ++o) {
          const Tensor got = r.get_output_tensor(o);
          if (got.shape() != want[k][o].shape()) {
            ++bad;
            continue;
          }
          const auto a = got.to_f64(), b = want[k][o].to_f64();
          for (size_t e = 0; e < a.size(); ++e)
            if (std::abs(a[e] - b[e]) > 1e-4 + 1e-4 * std::abs(b[e])) {
              ++bad;
              break;
            }
        }
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
}

// tests/models/make_test_models.py's detector (torch's export of a threshold, NMS and RoIAlign):
// cut after its backbone, and what torch computed
TEST(CpuExecutorDataDependent, TorchExportedDetector) {
  const auto dir = test_models_dir() / "detector";
  const auto path = test_model("detector");
  Core core;
  CompiledModel cm = core.compile_model(core.read_model(path.string()), f32_properties());
  const RuntimeModel m = cm.get_runtime_model();
  EXPECT_NE(m.data_dependent.find("NonZero"), std::string::npos) << m.data_dependent;
  EXPECT_TRUE(std::any_of(m.nodes.begin(), m.nodes.end(), [](const RuntimeNode& n) { return n.type == "Convolution"; }));
  InferRequest r = cm.create_infer_request();
  r.set_input_tensor(tools::read_npy((dir / "inputs" / "input.npy").string()));
  r.infer();
  const char* names[] = {"boxes", "scores", "features"};
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(names[i]);
    expect_close(tools::read_npy((dir / "ref_outputs" / (std::string(names[i]) + ".npy")).string()),
                 r.get_output_tensor(i), 1e-3, 1e-4);
  }
}

}  // namespace test_cpu_data_dependent
