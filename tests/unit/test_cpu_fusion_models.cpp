// The fusions on real models (tests/models/make_test_models.py; test_models_util.hpp):
// compiled for one 1x3x224x224 image, no Eltwise,
// Binary, BatchNorm or Reference runtime node is left (every activation, residual Add and
// BatchNormalization is fused or folded), and ResNet-50 accumulates its residual sums in
// at least 16 convolutions (sum post-op).
#include <gtest/gtest.h>

#include <kiln/core.hpp>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "cpu/executor.hpp"
#include "test_models_util.hpp"

namespace test_cpu_fusion_models {

using namespace kiln;

namespace {

struct Compiled {
  std::shared_ptr<Model> model;
  std::unique_ptr<cpu::Executor> exec;
  const cpu::Executor::Plan* plan = nullptr;
};

Compiled compile(const std::filesystem::path& path) {
  Compiled c;
  c.model = Core().read_model(path.string());
  c.exec = std::make_unique<cpu::Executor>(c.model->graph());
  c.plan = &c.exec->plan_for({{1, 3, 224, 224}});
  return c;
}

// Runtime nodes of a kind that should all have been fused away: "type name" per node.
std::vector<std::string> unfused(const cpu::Graph& g) {
  std::vector<std::string> out;
  for (auto& n : g.nodes()) {
    const std::string t = n->type();
    if (t == "Eltwise" || t == "Binary" || t == "BatchNorm" || t == "Reference")
      out.push_back(t + " " + n->name + (n->source ? " (" + n->source->op_type() + ")" : ""));
  }
  return out;
}

std::string skipped_entries(const transforms::PassLog& log) {
  std::string s;
  for (auto& e : log.entries)
    if (!e.applied) s += e.pass + " " + e.where + ": " + e.message + "\n";
  return s;
}

}  // namespace

TEST(CpuFusionModels, ResNet50EveryActivationAndBatchNormFusedAndResidualSums) {
  const auto path = test::test_model("resnet50");
  if (!std::filesystem::exists(path)) return;
  Compiled c = compile(path);
  ASSERT_NE(c.plan->cpu, nullptr) << c.plan->fallback_reason;
  const cpu::Graph& g = *c.plan->cpu;
  EXPECT_EQ(unfused(g), std::vector<std::string>{}) << skipped_entries(c.plan->log);
  size_t sums = 0, convs = 0;
  for (auto& n : g.nodes())
    if (std::string(n->type()) == "Convolution") {
      ++convs;
      sums += n->post_ops()->sum_input() >= 0;
    }
  EXPECT_GE(sums, 16u) << skipped_entries(c.plan->log);
  EXPECT_EQ(convs, 53u);
}

TEST(CpuFusionModels, MobileNetV2EveryActivationAndBatchNormFused) {
  const auto path = test::test_model("mobilenet_v2");
  if (!std::filesystem::exists(path)) return;
  Compiled c = compile(path);
  ASSERT_NE(c.plan->cpu, nullptr) << c.plan->fallback_reason;
  EXPECT_EQ(unfused(*c.plan->cpu), std::vector<std::string>{}) << skipped_entries(c.plan->log);
}

}  // namespace test_cpu_fusion_models
