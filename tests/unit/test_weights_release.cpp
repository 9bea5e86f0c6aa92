// A model handed over to compile_model (compile_model(std::move(model))) keeps each weight
// once: the original bytes of a weight every reader packed go back to the system as it is
// packed (cpu/release_sources.hpp). Asserted here: what is given back (and what must stay:
// a weight something reads as it is, a model someone else still holds, a model whose shapes
// vary), that the outputs are those of the same model compiled without handing it over
// (bit for bit) on every stream and on a thread that builds its graph after the release,
// and that other input shapes are refused with the reason.
#include <gtest/gtest.h>

#include <kiln/core.hpp>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cpu_test_util.hpp"
#include "ir/graph.hpp"
#include "ir/op_registry.hpp"

namespace test_weights_release {

using namespace kiln;
using namespace kiln::test;

namespace {

constexpr int64_t kK = 256, kN = 512, kOut = 128;  // W1 512 KiB, W2 256 KiB: whole pages

// x[4,256] -> MatMul(W1) -> Relu -> MatMul(W2) -> y; with `raw_reader`, also
// W1 + ReduceSum(x) -> s (a reader of W1's bytes as they are, at every run). `batch` < 0: x's
// first dim is symbolic.
std::shared_ptr<Model> mlp(bool raw_reader = false, int64_t batch = 4) {
  auto g = make_graph();
  ir::PartialShape xs = batch < 0 ? ir::PartialShape(std::vector<ir::Dim>{ir::Dim::sym("n"), ir::Dim(kK)}) : ir::PartialShape(Shape{batch, kK});
  auto* x = g->add_input("x", {DType::f32, xs});
  auto* w1 = g->add_constant("w1", random_tensor({kK, kN}, 21, 0.1f));
  auto* m1 = g->add_node("MatMul", {x, w1}, 1, "fc1");
  auto* r = g->add_node("Relu", {m1->output(0)}, 1, "relu");
  auto* m2 = g->add_node("MatMul", {r->output(0), g->add_constant("w2", random_tensor({kN, kOut}, 22, 0.1f))}, 1, "fc2");
  g->add_output(m2->output(0));
  if (raw_reader) {
    auto* sum = g->add_node("ReduceSum", {x}, 1, "sum_x");  // keepdims: [1, 1]
    auto* s = g->add_node("Add", {w1, sum->output(0)}, 1, "w1_plus");
    g->add_output(s->output(0));
  }
  ir::infer_shapes(*g);
  return std::make_shared<Model>(g);
}

// A Conv with a 144 KiB weight: x[1,64,8,8] -> Conv 3x3 (64 -> 64, pad 1) -> y
std::shared_ptr<Model> conv() {
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 64, 8, 8})});
  auto* c = g->add_node("Conv", {x, g->add_constant("w", random_tensor({64, 64, 3, 3}, 23, 0.05f))}, 1, "conv");
  c->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  g->add_output(c->output(0));
  ir::infer_shapes(*g);
  return std::make_shared<Model>(g);
}

size_t released(const CompiledModel& c) { return std::stoull(c.get_property("kiln_released_weights_bytes")); }
size_t packed(const CompiledModel& c) { return std::stoull(c.get_property("kiln_weights_bytes")); }

std::vector<Tensor> infer(const CompiledModel& c, const Tensor& x) {
  InferRequest r = c.create_infer_request();
  r.set_input_tensor(x);
  r.infer();
  std::vector<Tensor> out;
  for (size_t i = 0; i < c.outputs().size(); ++i) out.push_back(r.get_output_tensor(i).clone());
  return out;
}

void expect_identical(const std::vector<Tensor>& want, const std::vector<Tensor>& got) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(want[i].shape(), got[i].shape());
    EXPECT_EQ(0, std::memcmp(want[i].raw(), got[i].raw(), want[i].byte_size())) << "output " << i;
  }
}

const AnyMap kF32 = {{"inference_precision", "f32"}};

}  // namespace

TEST(WeightsRelease, AHandedOverModelGivesBackWhatItPacked) {
  Core core;
  const Tensor x = random_tensor({4, kK}, 1);
  CompiledModel kept = core.compile_model(mlp(), kF32);  // a temporary: handed over
  std::shared_ptr<Model> mine = mlp();
  CompiledModel held = core.compile_model(mine, kF32);  // still ours: nothing given back
  EXPECT_EQ(released(held), 0u);
  EXPECT_GT(packed(held), 0u);
  // both weights (768 KiB) go back, less the partial pages at their ends
  EXPECT_GE(released(kept), (kK * kN + kN * kOut) * sizeof(float) - 4 * 4096);
  EXPECT_LE(released(kept), (kK * kN + kN * kOut) * sizeof(float));
  const std::vector<Tensor> want = infer(held, x);
  expect_identical(want, infer(kept, x));
  expect_identical(want, infer(kept, x));  // and again
  // the model we hold still reads its own weights
  expect_identical(want, infer(core.compile_model(mine, kF32), x));
}

TEST(WeightsRelease, ConvolutionWeightsToo) {
  Core core;
  const Tensor x = random_tensor({1, 64, 8, 8}, 2);
  std::shared_ptr<Model> mine = conv();
  CompiledModel held = core.compile_model(mine, kF32);
  CompiledModel kept = core.compile_model(conv(), kF32);
  EXPECT_GT(released(kept), 64u * 64 * 9 * sizeof(float) - 2 * 4096);
  expect_identical(infer(held, x), infer(kept, x));
}

TEST(WeightsRelease, EveryStreamAndLaterThreadsFindThePackedCopies) {
  Core core;
  const Tensor x = random_tensor({4, kK}, 3);
  std::shared_ptr<Model> mine = mlp();
  const std::vector<Tensor> want = infer(core.compile_model(mine, kF32), x);
  {  // two streams: each builds its graph at compile time, one packs and gives back, the other finds the copy
    AnyMap p = kF32;
    p["num_streams"] = "2";
    CompiledModel c = core.compile_model(mlp(), p);
    EXPECT_GT(released(c), 0u);
    std::vector<InferRequest> reqs(4);
    for (auto& r : reqs) {
      r = c.create_infer_request();
      r.set_input_tensor(x);
      r.start_async();
    }
    for (auto& r : reqs) {
      r.wait();
      expect_identical(want, {r.get_output_tensor(0).clone()});
    }
  }
  {  // no streams: each calling thread builds its own graph, here one started after the release
    AnyMap p = kF32;
    p["num_streams"] = "0";
    CompiledModel c = core.compile_model(mlp(), p);
    EXPECT_GT(released(c), 0u);
    std::vector<Tensor> got;
    std::thread t([&] { got = infer(c, x); });
    t.join();
    expect_identical(want, got);
  }
}

TEST(WeightsRelease, AWeightReadAsItIsStays) {
  Core core;
  const Tensor x = random_tensor({4, kK}, 4);
  std::shared_ptr<Model> mine = mlp(/*raw_reader=*/true);
  const std::vector<Tensor> want = infer(core.compile_model(mine, kF32), x);
  CompiledModel c = core.compile_model(mlp(true), kF32);
  // W2 goes back; W1, which ReduceSum reads as it is, stays whole
  EXPECT_GT(released(c), 0u);
  EXPECT_LE(released(c), kN * kOut * sizeof(float));
  expect_identical(want, infer(c, x));  // W1 + sum(x) is not zeros + sum(x)
}

TEST(WeightsRelease, AModelSomeoneElseHoldsIsNotTouched) {
  Core core;
  std::shared_ptr<Model> m = mlp();
  std::shared_ptr<ir::Graph> graph = m->graph();  // its graph held apart from the model
  CompiledModel c = core.compile_model(std::move(m), kF32);
  EXPECT_EQ(released(c), 0u);
  std::shared_ptr<Model> twice = mlp();
  std::shared_ptr<Model> copy = twice;
  CompiledModel c2 = core.compile_model(std::move(twice), kF32);
  EXPECT_EQ(released(c2), 0u);
}

TEST(WeightsRelease, AModelWhoseShapesVaryKeepsItsWeights) {
  Core core;
  CompiledModel c = core.compile_model(mlp(false, -1), kF32);
  const Tensor x3 = random_tensor({3, kK}, 5), x7 = random_tensor({7, kK}, 6);
  std::shared_ptr<Model> mine = mlp(false, -1);
  CompiledModel held = core.compile_model(mine, kF32);
  expect_identical(infer(held, x3), infer(c, x3));
  expect_identical(infer(held, x7), infer(c, x7));
  EXPECT_EQ(released(c), 0u);
}

TEST(WeightsRelease, OtherShapesAreRefusedWithTheReason) {
  Core core;
  CompiledModel c = core.compile_model(mlp(), kF32);
  ASSERT_GT(released(c), 0u);
  const RuntimeModel same = c.get_runtime_model();
  EXPECT_TRUE(same.reference_reason.empty()) << same.reference_reason;
  const RuntimeModel other = c.get_runtime_model({Shape{2, kK}});
  EXPECT_NE(other.reference_reason.find("gave back the original bytes"), std::string::npos) << other.reference_reason;
  // and the plan of its own shapes is still there
  std::shared_ptr<Model> mine = mlp();
  const Tensor x = random_tensor({4, kK}, 7);
  expect_identical(infer(core.compile_model(mine, kF32), x), infer(c, x));
}

TEST(WeightsRelease, TheCompiledModelReportsItsMemory) {
  Core core;
  CompiledModel c = core.compile_model(mlp(), kF32);
  EXPECT_GE(packed(c), (kK * kN + kN * kOut) * sizeof(float));  // in the primitives' layouts (maybe padded)
  infer(c, random_tensor({4, kK}, 8));
  // the intermediate tensors: at least the [4, 512] hidden activation
  EXPECT_GE(std::stoull(c.get_property("kiln_arena_bytes")), 4u * kN * sizeof(float));
  AnyMap reference = kF32;
  reference["kiln_executor"] = "reference";
  CompiledModel r = core.compile_model(mlp(), reference);
  EXPECT_EQ(r.get_property("kiln_weights_bytes"), "0");
  EXPECT_EQ(r.get_property("kiln_released_weights_bytes"), "0");
}

}  // namespace test_weights_release
