// CompiledModel::get_runtime_model: the runtime graph the requests run, through the public API
// (what `kiln benchmark -exec_graph_path` writes without compiling the model again).
#include <gtest/gtest.h>

#include <kiln/core.hpp>

#include <algorithm>

#include "cpu/executor.hpp"
#include "cpu_test_util.hpp"
#include "ir/graph.hpp"
#include "ir/op_registry.hpp"
#include "precision_util.hpp"

namespace test_runtime_model {

using namespace kiln;
using namespace kiln::test;

namespace {

// x[N,4,8,8] -> Conv -> Relu -> output; N is the dim `batch` when `dynamic`.
std::shared_ptr<ir::Graph> conv_relu_graph(bool dynamic) {
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = 13;
  ir::PartialShape shape(Shape{1, 4, 8, 8});
  if (dynamic) shape.dims[0] = ir::Dim::sym("batch");
  auto* x = g->add_input("x", {DType::f32, shape});
  auto* c = g->add_node("Conv", {x, g->add_constant("w", random_tensor({8, 4, 3, 3}, 1))}, 1, "conv");
  c->attrs["pads"] = ir::Attribute(std::vector<int64_t>{1, 1, 1, 1});
  auto* r = g->add_node("Relu", {c->output(0)}, 1, "relu");
  g->add_output(r->output(0));
  ir::infer_shapes(*g);
  return g;
}
std::shared_ptr<Model> conv_relu(bool dynamic) { return std::make_shared<Model>(conv_relu_graph(dynamic)); }

const RuntimeNode* find_type(const RuntimeModel& m, const std::string& type) {
  auto it = std::find_if(m.nodes.begin(), m.nodes.end(), [&](const RuntimeNode& n) { return n.type == type; });
  return it == m.nodes.end() ? nullptr : &*it;
}

}  // namespace

TEST(RuntimeModel, TheConvolutionWithItsFusedReluAndOutputs) {
  Core core;
  CompiledModel cm = core.compile_model(conv_relu(false), f32_properties({}));
  const RuntimeModel m = cm.get_runtime_model();
  const RuntimeNode* conv = find_type(m, "Convolution");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->original, "conv");
  EXPECT_NE(std::find(conv->fused.begin(), conv->fused.end(), "relu"), conv->fused.end());  // a post-op
  EXPECT_FALSE(conv->exec_type.empty());
  EXPECT_EQ(std::count(conv->inputs.begin(), conv->inputs.end(), "w"), 0);  // weights are left out
  EXPECT_EQ(find_type(m, "Eltwise"), nullptr);  // the Relu has no node of its own
  // the last node writes the model's output, in f32 with the model's shape
  ASSERT_FALSE(m.nodes.empty());
  const RuntimeNode::Output& out = m.nodes.back().outputs.at(0);
  EXPECT_EQ(out.shape, (Shape{1, 8, 8, 8}));
  EXPECT_EQ(out.precision, DType::f32);
  EXPECT_FALSE(out.layout.empty());
}

TEST(RuntimeModel, DynamicShapesNeedTheInputShapes) {
  Core core;
  CompiledModel cm = core.compile_model(conv_relu(true), f32_properties({}));
  try {
    cm.get_runtime_model();
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'x'"), std::string::npos) << e.what();  // names the input
  }
  const RuntimeModel m = cm.get_runtime_model({{3, 4, 8, 8}});
  EXPECT_EQ(m.nodes.back().outputs.at(0).shape, (Shape{3, 8, 8, 8}));
  // the plan is the one inference uses: running that shape now finds it in the cache
  const std::string misses = cm.get_property("kiln_plan_cache_misses");
  InferRequest req = cm.create_infer_request();
  req.set_input_tensor(random_tensor({3, 4, 8, 8}, 2));
  req.infer();
  EXPECT_EQ(cm.get_property("kiln_plan_cache_misses"), misses);
  EXPECT_THROW(cm.get_runtime_model({{3, 4, 8, 8}, {1}}), Error);  // two shapes for one input
  EXPECT_THROW(cm.get_runtime_model({{3, 5, 8, 8}}), Error);       // channels the weights do not take
}

TEST(RuntimeModel, TheReferenceExecutorHasNoneAndSaysWhy) {
  Core core;
  CompiledModel cm = core.compile_model(conv_relu(false), {{"kiln_executor", "reference"}});
  const RuntimeModel m = cm.get_runtime_model();
  EXPECT_TRUE(m.nodes.empty());
  EXPECT_NE(m.reference_reason.find("reference"), std::string::npos) << m.reference_reason;
}

TEST(RuntimeModel, TheOptimizersDecisionsComeWithIt) {
  Core core;
  CompiledModel cm = core.compile_model(conv_relu(false), f32_properties({}));
  const RuntimeModel m = cm.get_runtime_model();
  EXPECT_TRUE(m.reference_reason.empty());
  // the Relu went into the convolution: the pass that did it says so, naming both
  auto it = std::find_if(m.fusions.begin(), m.fusions.end(), [](const FusionDecision& d) {
    return d.applied && d.pass == "FuseConvolutionAndSimpleOperation";
  });
  ASSERT_NE(it, m.fusions.end());
  EXPECT_NE(it->where.find("conv"), std::string::npos) << it->where;
  EXPECT_NE(it->where.find("relu"), std::string::npos) << it->where;
  // with that pass disabled the Relu keeps a node of its own
  CompiledModel off = core.compile_model(conv_relu(false),
                                         f32_properties({{"kiln_disable_passes", "FuseConvolutionAndSimpleOperation"}}));
  const RuntimeModel m2 = off.get_runtime_model();
  EXPECT_GT(m2.nodes.size(), m.nodes.size());
  EXPECT_EQ(std::count_if(m2.fusions.begin(), m2.fusions.end(),
                          [](const FusionDecision& d) { return d.applied && d.pass == "FuseConvolutionAndSimpleOperation"; }),
            0);
}

// What get_runtime_model inspects is the executor's only while its plan cache keeps it: a
// service asking for the runtime model of every new shape stays bounded (each plan and its
// graph, about 390 KiB for BERT-6, used to be kept for the executor's lifetime).
TEST(RuntimeModel, InspectingManyShapesKeepsNoMorePlansThanTheCache) {
  cpu::Executor ex(conv_relu_graph(true), {}, /*plan_capacity=*/2);
  std::weak_ptr<const cpu::Executor::Plan> first;
  {
    const cpu::Executor::Inspection seen = ex.inspect({{1, 4, 8, 8}});
    ASSERT_NE(seen.cpu, nullptr);
    EXPECT_EQ(seen.cpu->output_edges().at(0)->shape, (Shape{1, 8, 8, 8}));
    first = seen.plan;
  }
  EXPECT_FALSE(first.expired());  // the cache has it
  for (int64_t n : {2, 3, 4}) EXPECT_NE(ex.inspect({{n, 4, 8, 8}}).cpu, nullptr);
  EXPECT_TRUE(first.expired());  // dropped by the cache, held by no one else
  EXPECT_EQ(ex.cached_plans(), 2u);
}

}  // namespace test_runtime_model
