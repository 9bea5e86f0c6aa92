// Users' CPUs have less than the build machine's: a kernel that runs AVX-512 code on an AVX2 CPU
// dies of an illegal instruction there, while every test on this machine passes. The tests run
// again with the instruction set capped (KILN_MAX_CPU_ISA, tests/CMakeLists.txt); under each cap
// every runtime node must name an implementation of that ISA or below ("brg:avx512_core",
// "kiln_attention:avx2_f32", "snippet_avx512_f32", "jit_uni_u8" ...). Each of kiln's own
// kernels names its ISA, so one whose available() lets it run above the cap shows here. (The
// attention kernel did: it ran AVX-512 code under the AVX2 cap, and crashed on AVX2 CPUs.)
// The graphs cover kiln's kernels in graphs whose shapes vary (GEMM, attention, layer norm, LSTM,
// snippets Subgraphs) and in static ones (the test models: convolutions, attention, snippets).
#include <gtest/gtest.h>

#include <kiln/core.hpp>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/strings.hpp"
#include "cpu/executor.hpp"
#include "cpu/isa.hpp"
#include "cpu_test_util.hpp"
#include "ir/op_registry.hpp"
#include "test_models_util.hpp"

namespace test_cpu_isa_impls {

using namespace kiln;
using namespace kiln::test;

namespace {

using ir::Dim;
using cpu::Isa;

// The highest ISA an implementation name mentions (oneDNN's and kiln's spellings), or nullopt.
std::optional<Isa> isa_named(const std::string& impl) {
  static const std::vector<std::pair<std::string, Isa>> names = {
      {"amx", Isa::avx512_core_amx},          {"avx512_core_bf16", Isa::avx512_core_bf16},
      {"bf16_avx512", Isa::avx512_core_bf16}, {"avx512_core_vnni", Isa::avx512_core_vnni},
      {"vnni_avx512", Isa::avx512_core_vnni}, {"avx512", Isa::avx512_core},
      {"avx2_vnni", Isa::avx2_vnni},          {"avx2", Isa::avx2},
      {"avx", Isa::avx},                      {"sse41", Isa::sse41}};
  for (const auto& [name, isa] : names)  // highest first
    if (impl.find(name) != std::string::npos) return isa;
  return std::nullopt;
}

// "node: impl" for every node whose implementation names an ISA above the one in use.
std::vector<std::string> above_isa(const cpu::Graph& g) {
  std::vector<std::string> out;
  for (const auto& n : g.nodes()) {
    const std::optional<Isa> isa = isa_named(n->impl);
    if (isa && static_cast<int>(*isa) > static_cast<int>(cpu::effective_isa()))
      out.push_back(cat(n->name, " (", n->type(), "): ", n->impl));
  }
  return out;
}

ir::PartialShape dims(std::vector<Dim> d) { return ir::PartialShape(std::move(d)); }

// A transformer layer on [n, L, 16] whose shapes vary: FullyConnected with a ReLU, attention with a
// mask, LayerNorm, a residual Add, and an elementwise chain (a snippets Subgraph).
std::shared_ptr<ir::Graph> varying_transformer() {
  auto g = make_graph(17);
  g->opset_imports["kiln"] = 1;
  auto* x = g->add_input("x", {DType::f32, dims({Dim::sym("n"), Dim::sym("L"), 16})});
  auto* mask = g->add_input("mask", {DType::f32, dims({Dim::sym("n"), 1, 1, Dim::sym("L")})});
  auto* fc = g->add_node("MatMul", {x, g->add_constant("w", random_tensor({16, 16}, 1, 0.3f))}, 1, "fc")->output(0);
  auto* fb = g->add_node("Add", {fc, g->add_constant("b", random_tensor({16}, 2))}, 1, "fc_bias")->output(0);
  auto* act = g->add_node("Relu", {fb}, 1, "relu")->output(0);
  ir::Node* a = g->add_node("MultiHeadAttention", {act, act, act, mask}, 1, "mha", "kiln");
  a->attrs["num_heads"] = ir::Attribute(int64_t{4});
  a->attrs["scale"] = ir::Attribute(0.5f);
  auto* res = g->add_node("Add", {a->output(0), x}, 1, "residual")->output(0);
  auto* ln = g->add_node("LayerNormalization",
                         {res, g->add_constant("ls", random_tensor({16}, 3)), g->add_constant("lb", random_tensor({16}, 4))},
                         1, "ln")->output(0);
  auto* t = g->add_node("Tanh", {ln}, 1, "tanh")->output(0);
  g->add_output(g->add_node("Mul", {t, ln}, 1, "mul")->output(0));
  return g;
}

}  // namespace

TEST(CpuIsaImpls, NamesTheirInstructionSets) {
  EXPECT_EQ(isa_named("brg:avx512_core"), Isa::avx512_core);
  EXPECT_EQ(isa_named("brgconv_1x1_avx512_core_vnni_u8"), Isa::avx512_core_vnni);
  EXPECT_EQ(isa_named("jit:avx2"), Isa::avx2);
  EXPECT_EQ(isa_named("kiln_attention:avx2_f32"), Isa::avx2);
  EXPECT_EQ(isa_named("snippet_avx512_f32"), Isa::avx512_core);
  EXPECT_EQ(isa_named("jit:sse41"), Isa::sse41);
  EXPECT_EQ(isa_named("jit_uni_u8"), std::nullopt);
  EXPECT_EQ(isa_named("ref:any"), std::nullopt);
}

TEST(CpuIsaImpls, VaryingShapesRunKernelsOfTheIsaInUse) {
  for (const auto& [g, shapes] :
       std::vector<std::pair<std::shared_ptr<ir::Graph>, std::vector<std::vector<Shape>>>>{
           {varying_transformer(), {{{1, 7, 16}, {1, 1, 1, 7}}, {{2, 33, 16}, {2, 1, 1, 33}}}},
           {bidirectional_lstm_graph(dims({Dim::sym("T"), Dim::sym("n"), 6})), {{{5, 1, 6}}, {{12, 3, 6}}}}}) {
    ir::infer_shapes(*g);
    cpu::Executor ex(g);
    for (const auto& s : shapes) {
      const auto& plan = ex.plan_for(s);
      ASSERT_TRUE(plan.cpu) << plan.fallback_reason;
      EXPECT_EQ(above_isa(*plan.cpu), std::vector<std::string>{})
          << "ISA in use " << cpu::isa_description() << "\n" << plan.cpu->describe();
      std::vector<Tensor> in;
      uint32_t seed = 1;
      for (const Shape& sh : s) in.push_back(random_tensor(sh, seed++));
      EXPECT_NO_THROW(ex.run(in));  // (an illegal instruction would end the process here)
    }
  }
}

TEST(CpuIsaImpls, TestModelsRunKernelsOfTheIsaInUse) {
  for (const std::string name : {"bert_small", "efficientnet_b0", "resnet50"}) {
    SCOPED_TRACE(name);
    const auto path = test_model(name);
    if (!std::filesystem::exists(path)) continue;  // test_model() reported it
    auto model = Core().read_model(path.string());
    cpu::Executor ex(model->graph());
    std::vector<Shape> shapes;
    for (const ir::Value* v : model->graph()->inputs()) shapes.push_back(v->type.shape.to_shape());
    const auto& plan = ex.plan_for(shapes);
    ASSERT_TRUE(plan.cpu) << plan.fallback_reason;
    EXPECT_EQ(above_isa(*plan.cpu), std::vector<std::string>{}) << "ISA in use " << cpu::isa_description();
  }
}

}  // namespace test_cpu_isa_impls
