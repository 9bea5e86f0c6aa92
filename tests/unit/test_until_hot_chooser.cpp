// kiln_convolutions_until_hot = auto: the chooser alone on made-up figures (its order of
// measuring, which figures it leaves out, the cost it compares), then a cpu::Executor in bf16
// mode that measures both precisions on a model's first new shapes and computes every shape
// within tolerance of the reference whichever it takes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <thread>

#include "cpu/executor.hpp"
#include "cpu/isa.hpp"
#include "cpu/until_hot_chooser.hpp"
#include "runtime/reference_executor.hpp"

#include "cpu_test_util.hpp"

namespace test_until_hot_chooser {

using namespace kiln;
using namespace kiln::test;
using cpu::UntilHotChooser;

constexpr int kMeasuring = 2 * (UntilHotChooser::kSamples + 1);  // graphs before the choice

// inference_precision = bf16, kiln_convolutions_until_hot = auto
cpu::GraphOptions bf16_auto() {
  cpu::GraphOptions o;
  o.bf16 = true;
  o.convolutions_until_hot = cpu::GraphOptions::UntilHot::measure;
  return o;
}

// The convolutions a run's profile shows executed, by node name: whether each computed in bf16.
std::map<std::string, bool> convolutions_in_bf16(const std::vector<ProfilingInfo>& rows) {
  std::map<std::string, bool> out;
  for (const ProfilingInfo& r : rows)
    if (r.node_type == "Convolution" && r.status == ProfilingInfo::Status::executed)
      out[r.node_name] = r.exec_type.find("bf16") != std::string::npos;
  return out;
}

// Answers next_f32 until the chooser has measured both precisions, recording for each graph
// `bf16` or `f32` = {build ms, first run ms per input element}; returns the order it asked for.
std::vector<bool> measure(UntilHotChooser& c, std::pair<double, double> bf16, std::pair<double, double> f32,
                          double elements = 1000) {
  std::vector<bool> order;
  for (int i = 0; i < kMeasuring; ++i) {
    const bool f = c.next_f32(elements, 1);
    order.push_back(f);
    const auto& [build, rate] = f ? f32 : bf16;
    c.record(f, build, rate * elements, elements);
  }
  return order;
}

TEST(UntilHotChooser, MeasuresBothPrecisionsAlternatelyBf16First) {
  UntilHotChooser c;
  EXPECT_EQ(c.describe().rfind("measuring", 0), 0u) << c.describe();
  const std::vector<bool> order = measure(c, {5, 0.01}, {1, 0.01});
  EXPECT_EQ(order, (std::vector<bool>{false, true, false, true, false, true}));
  // the first graph of each precision is left out (it pays for packing weights, making kernels)
  EXPECT_EQ(c.measured(false), UntilHotChooser::kSamples);
  EXPECT_EQ(c.measured(true), UntilHotChooser::kSamples);
}

TEST(UntilHotChooser, TakesTheCheaperPrecisionForTheNextShape) {
  {  // bf16 costs more to build and runs no faster (the CRNN's narrow convolutions)
    UntilHotChooser c;
    measure(c, {6, 0.02}, {2, 0.02});
    EXPECT_TRUE(c.next_f32(1000, 1));
    EXPECT_EQ(c.describe().rfind("f32:", 0), 0u) << c.describe();
  }
  {  // both cost as much to build, bf16 runs faster (a ResNet-50's)
    UntilHotChooser c;
    measure(c, {10, 0.03}, {10, 0.05});
    EXPECT_FALSE(c.next_f32(1000, 1));
    EXPECT_EQ(c.describe().rfind("bf16:", 0), 0u) << c.describe();
  }
  {  // bf16 builds 4 ms slower and runs 2 ms faster per 1000 elements: the shape and how often it runs decide
    UntilHotChooser c;
    measure(c, {6, 0.010}, {2, 0.012});
    EXPECT_TRUE(c.prefers_f32(1000, 1));   // 6 + 10 > 2 + 12
    EXPECT_FALSE(c.prefers_f32(1000, 3));  // 6 + 30 < 2 + 36
    EXPECT_FALSE(c.prefers_f32(5000, 1));  // 6 + 50 < 2 + 60
    EXPECT_TRUE(c.prefers_f32(1000, 0));   // runs at least once
    EXPECT_TRUE(c.next_f32(1000, 1));      // what it prefers is what it answers
  }
}

TEST(UntilHotChooser, LeavesOutEachPrecisionsFirstGraphAndTakesTheLeastOfTheRest) {
  // f32's first graph packed every weight and took 100 ms to build; one later f32 graph ran
  // 10x slower than the other (the machine was busy): neither makes bf16 look cheaper
  UntilHotChooser c;
  int f32_graphs = 0;
  for (int i = 0; i < kMeasuring; ++i) {
    const bool f = c.next_f32(1000, 1);
    if (f) ++f32_graphs;
    const double build = f ? (f32_graphs == 1 ? 100 : 2) : 6, run = f && f32_graphs == 2 ? 200 : 20;
    c.record(f, build, run, 1000);
  }
  EXPECT_TRUE(c.prefers_f32(1000, 1));
  EXPECT_NE(c.describe().find("bf16 26.0 ms"), std::string::npos) << c.describe();
  EXPECT_NE(c.describe().find("f32 22.0 ms"), std::string::npos) << c.describe();
}

TEST(UntilHotChooser, NowAndThenMeasuresTheOtherPrecisionAgain) {
  // f32 looked cheaper on the first graphs; every kRemeasure-th new shape takes bf16 again, and
  // when bf16's new figures are the cheaper ones, the choice follows them
  UntilHotChooser c;
  measure(c, {6, 0.02}, {2, 0.02});
  for (int i = 1; i < UntilHotChooser::kRemeasure; ++i) {
    ASSERT_TRUE(c.next_f32(1000, 1)) << i;
    c.record(true, 2, 20, 1000);
  }
  EXPECT_FALSE(c.prefers_f32(1000, 1));
  ASSERT_FALSE(c.next_f32(1000, 1));
  c.record(false, 1, 10, 1000);  // bf16 was slow on the first graphs only
  EXPECT_FALSE(c.prefers_f32(1000, 1));
  EXPECT_EQ(c.describe().rfind("bf16:", 0), 0u) << c.describe();
}

TEST(UntilHotChooser, AnswersBf16WhileTheMeasuringGraphsHaveNotRun) {
  // threads that build at once: every measuring graph was handed out, none has run yet
  UntilHotChooser c;
  for (int i = 0; i < kMeasuring; ++i) c.next_f32(1000, 1);
  EXPECT_FALSE(c.next_f32(1000, 1));
  EXPECT_EQ(c.describe().rfind("measuring", 0), 0u) << c.describe();
  // bf16's have all run, f32's not (or failed): f32 is measured again until it has its figures
  for (int i = 0; i < UntilHotChooser::kSamples + 1; ++i) c.record(false, 6, 20, 1000);
  c.record(true, 2, 20, 1000);  // f32's first, left out
  ASSERT_TRUE(c.next_f32(1000, 1));
  c.record(true, 2, 20, 1000);
  ASSERT_TRUE(c.next_f32(1000, 1));
  c.record(true, 2, 20, 1000);
  EXPECT_EQ(c.measured(true), UntilHotChooser::kSamples);
  EXPECT_EQ(c.describe().rfind("f32:", 0), 0u) << c.describe();
}

TEST(UntilHotChooser, TheExecutorMeasuresBothPrecisionsForNewShapesThenTakesTheCheaper) {
  // inference_precision = bf16, a model with convolutions and a varying width, auto: the first
  // new shapes alternate bf16 and f32 convolutions (bf16 first), each graph's build and first
  // run measured; later shapes take the precision the chooser names. Every shape stays within
  // bf16 tolerance of the reference, the f32 ones within f32's.
  if (!cpu::bf16_available()) GTEST_SKIP() << "no bf16 on " << cpu::isa_description();
  auto g = make_graph();
  using ir::Dim;
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape({1, 16, 8, Dim::sym("w")})});
  auto* c1 = g->add_node("Relu", {conv3x3(*g, x, 16, 32, 1, "c1", 0.5f)}, 1, "r1");
  g->add_output(g->add_node("Relu", {conv3x3(*g, c1->output(0), 32, 16, 3, "c2", 0.5f)}, 1, "r2")->output(0));
  ir::infer_shapes(*g);
  runtime::ReferenceExecutor ref(g);
  const cpu::GraphOptions o = bf16_auto();
  cpu::Executor ex(g, o);
  ASSERT_NE(ex.until_hot_chooser(), nullptr);
  auto max_abs = [](const Tensor& t) {
    double m = 0;
    for (int64_t i = 0; i < t.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(t.data<float>()[i])));
    return m;
  };
  for (int i = 0; i < kMeasuring + 3; ++i) {
    SCOPED_TRACE(cat("new shape ", i));
    const Shape s = {1, 16, 8, 9 + i};
    // what the chooser will answer for this shape past the measuring graphs (every graph so far ran once)
    const bool prefers_f32 = ex.until_hot_chooser()->prefers_f32(static_cast<double>(shape_size(s)), 1);
    const Tensor in = random_tensor(s, static_cast<uint32_t>(i + 1));
    std::vector<ProfilingInfo> rows;
    const auto got = ex.run({in}, &rows);
    const auto want = ref.run({in});
    const std::map<std::string, bool> convs = convolutions_in_bf16(rows);
    ASSERT_FALSE(convs.empty());
    const bool f32 = i < kMeasuring ? i % 2 == 1 : prefers_f32;
    for (const auto& [name, bf16] : convs) EXPECT_EQ(bf16, !f32) << name;
    if (f32)
      expect_close(want[0], got[0], 1e-4, 1e-4);
    else  // bf16 keeps 8 mantissa bits: errors of a few percent of the range after two convolutions
      expect_close(want[0], got[0], 2e-2, 5e-2 * max_abs(want[0]));
  }
  EXPECT_EQ(ex.until_hot_chooser()->measured(false) + ex.until_hot_chooser()->measured(true), kMeasuring + 3 - 2);
  EXPECT_EQ(ex.hot_rebuilds(), 0u);  // no shape ran often enough
  const std::string choice = ex.until_hot_choice();  // "bf16: ..." or "f32: ...", with the figures
  EXPECT_TRUE(choice.rfind("bf16: ", 0) == 0 || choice.rfind("f32: ", 0) == 0) << choice;
  EXPECT_NE(choice.find("to build and run"), std::string::npos) << choice;

  // nothing to choose: f32 mode, or a bf16 model without convolutions
  cpu::GraphOptions f32 = o;
  f32.bf16 = false;
  EXPECT_EQ(cpu::Executor(g, f32).until_hot_choice(), "");
  auto mm = make_graph();
  auto* v = mm->add_input("v", {DType::f32, ir::PartialShape({Dim::sym("m"), 32})});
  mm->add_output(mm->add_node("MatMul", {v, mm->add_constant("w", random_tensor({32, 8}, 9))}, 1, "fc")->output(0));
  ir::infer_shapes(*mm);
  EXPECT_EQ(cpu::Executor(mm, o).until_hot_chooser(), nullptr);
}

TEST(UntilHotChooser, TheTailAfterACutMeasuresItsOwnNewShapes) {
  // a convolution over x [1, 8, 6, w] (the head), then the columns of x whose sum is positive,
  // found by NonZero (a count that depends on the data), gathered from the head's output and
  // convolved again: the tail after the cut has an executor of its own, whose new shapes (one
  // per count) are measured alternately bf16 and f32 as the head's are
  if (!cpu::bf16_available()) GTEST_SKIP() << "no bf16 on " << cpu::isa_description();
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape({1, 8, 6, ir::Dim::sym("w")})});
  auto* c1 = g->add_node("Relu", {conv3x3(*g, x, 8, 8, 1, "c1", 0.5f)}, 1, "r1");
  auto* sum = g->add_node("ReduceSum", {x, g->add_constant("axes", Tensor::from_vector<int64_t>({0, 1, 2}, {3}))}, 1, "sum");
  sum->attrs["keepdims"] = int64_t(0);
  auto* pos = g->add_node("Greater", {sum->output(0), g->add_constant("zero", Tensor::scalar<float>(0.f))}, 1, "pos");
  auto* nz = g->add_node("NonZero", {pos->output(0)}, 1, "nz");
  auto* idx = g->add_node("Squeeze", {nz->output(0), g->add_constant("axis0", Tensor::from_vector<int64_t>({0}, {1}))}, 1, "idx");
  auto* cols = g->add_node("Gather", {c1->output(0), idx->output(0)}, 1, "cols");
  cols->attrs["axis"] = int64_t(3);
  g->add_output(g->add_node("Relu", {conv3x3(*g, cols->output(0), 8, 8, 3, "c2", 0.5f)}, 1, "r2")->output(0));
  ir::infer_shapes(*g);
  runtime::ReferenceExecutor ref(g);
  cpu::Executor ex(g, bf16_auto());
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE(cat("new shape ", i));
    const int64_t w = 10 + i, kept = 3 + i;  // a new width and a new count each time
    Tensor in = random_tensor({1, 8, 6, w}, static_cast<uint32_t>(i + 1));
    float* p = in.data<float>();
    for (int64_t k = 0; k < in.size(); ++k) p[k] = k % w < kept ? std::fabs(p[k]) + 0.1f : 0.f;
    std::vector<ProfilingInfo> rows;
    const auto got = ex.run({in}, &rows);
    const auto want = ref.run({in});
    ASSERT_EQ(got[0].shape(), (Shape{1, 8, 6, kept}));
    std::map<std::string, bool> bf16 = convolutions_in_bf16(rows);
    ASSERT_EQ(bf16.count("c1"), 1u);
    ASSERT_EQ(bf16.count("c2"), 1u);
    EXPECT_EQ(bf16["c1"], i % 2 == 0);  // the head's new shapes: bf16, f32, bf16, f32
    EXPECT_EQ(bf16["c2"], i % 2 == 0);  // and the tail's
    if (i % 2 == 1) expect_close(want[0], got[0], 1e-4, 1e-4);
  }
}

TEST(UntilHotChooser, ThreadsMeasureTogether) {
  // two threads run new shapes on one executor at once, each on graphs of its own: the chooser
  // takes both threads' figures, every graph built is measured (its precision's first left
  // out), and every output matches the reference within bf16 tolerance
  if (!cpu::bf16_available()) GTEST_SKIP() << "no bf16 on " << cpu::isa_description();
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape({1, 8, 6, ir::Dim::sym("w")})});
  g->add_output(g->add_node("Relu", {conv3x3(*g, x, 8, 8, 1, "c", 0.5f)}, 1, "r")->output(0));
  ir::infer_shapes(*g);
  runtime::ReferenceExecutor ref(g);
  cpu::Executor ex(g, bf16_auto());
  constexpr int kShapes = 12;
  std::vector<std::string> failures(2);
  auto worker = [&](int t) {
    try {
      for (int i = 0; i < kShapes; ++i) {
        const Tensor in = random_tensor({1, 8, 6, 5 + 2 * i + t}, static_cast<uint32_t>(10 * i + t));
        const Tensor got = ex.run({in})[0], want = ref.run({in})[0];
        for (int64_t k = 0; k < want.size(); ++k) {
          const float w = want.data<float>()[k], d = std::fabs(got.data<float>()[k] - w);
          if (d > 0.05f + 0.02f * std::fabs(w)) throw std::runtime_error(cat("shape ", i, " element ", k, ": ", d));
        }
      }
    } catch (const std::exception& e) {
      failures[static_cast<size_t>(t)] = e.what();
    }
  };
  std::thread a(worker, 0), b(worker, 1);
  a.join();
  b.join();
  EXPECT_EQ(failures[0], "");
  EXPECT_EQ(failures[1], "");
  EXPECT_EQ(ex.graphs_built(), 2u * kShapes);
  const cpu::UntilHotChooser& c = *ex.until_hot_chooser();
  EXPECT_EQ(c.measured(false) + c.measured(true), 2 * kShapes - 2);
  EXPECT_GE(c.measured(false), UntilHotChooser::kSamples);
  EXPECT_GE(c.measured(true), UntilHotChooser::kSamples);
}

}  // namespace test_until_hot_chooser
