// The snippets properties of compile_model: snippets_mode (SNIPPETS_MODE) ENABLE /
// IGNORE_CALLBACK / DISABLE and kiln_snippets_isa auto / avx512 / avx2, seen through the
// performance counters, with the outputs of every mode equal.
#include <gtest/gtest.h>
#include <kiln/core.hpp>
#include <kiln/error.hpp>


#include "ir/graph.hpp"
#include "ir/op_registry.hpp"
#include "cpu/isa.hpp"
#include "precision_util.hpp"
#include "tensor_test_util.hpp"
#include "cpu/emitters/x64/target_machine.hpp"

namespace kiln::test::test_snippets_properties {
namespace {

// x -> Conv -> Relu -> Sigmoid -> Mul(., x') -> Tanh: Relu is a conv post-op unless
// IGNORE_CALLBACK; the rest is one snippets kernel unless DISABLE.
std::shared_ptr<Model> conv_chain() {
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = 13;
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 4, 8, 8})});
  auto* c = g->add_node("Conv", {x, g->add_constant("w", random_tensor({4, 4, 3, 3}, 1, 2.0f))}, 1, "conv");
  c->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  auto* r = g->add_node("Relu", {c->output(0)}, 1, "relu");
  auto* s = g->add_node("Sigmoid", {r->output(0)}, 1, "sigmoid");
  auto* m = g->add_node("Mul", {s->output(0), x}, 1, "mul");
  auto* t = g->add_node("Tanh", {m->output(0)}, 1, "tanh");
  g->add_output(t->output(0));
  ir::infer_shapes(*g);
  return std::make_shared<Model>(g);
}

struct Outcome {
  Tensor out;
  std::vector<ProfilingInfo> rows;
};

Outcome run(AnyMap props) {
  props["enable_profiling"] = "YES";
  CompiledModel cm = Core().compile_model(conv_chain(), f32_properties(props));
  InferRequest req = cm.create_infer_request();
  req.set_input_tensor(random_tensor({1, 4, 8, 8}, 7, 2.0f));
  req.infer();
  return {req.get_output_tensor().clone(), req.get_profiling_info()};
}

const ProfilingInfo* row(const Outcome& r, const std::string& name) {
  for (const auto& p : r.rows)
    if (p.node_name == name) return &p;
  return nullptr;
}

size_t subgraph_rows(const Outcome& r, const std::string& exec_prefix = "snippet_") {
  size_t n = 0;
  for (const auto& p : r.rows) n += p.node_type == "Subgraph" && p.exec_type.rfind(exec_prefix, 0) == 0;
  return n;
}

void expect_same(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.size(), b.size());
  for (int64_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a.data<float>()[i], b.data<float>()[i], 1e-5 + 1e-5 * std::abs(b.data<float>()[i])) << i;
}

TEST(SnippetsProperties, ModesChangeWhatIsTokenized) {
  const Outcome on = run({});
  const Outcome off = run({{"snippets_mode", "DISABLE"}});
  const Outcome all = run({{"SNIPPETS_MODE", "IGNORE_CALLBACK"}});
  // without a snippets target (SSE4.1) no mode tokenizes: the ops keep their own nodes
  const bool target = cpu::x64::best_isa().has_value();
  EXPECT_EQ(subgraph_rows(on), target ? 1u : 0u);
  EXPECT_EQ(subgraph_rows(off), 0u);
  EXPECT_EQ(subgraph_rows(all), target ? 1u : 0u);
  // ENABLE: relu went into the convolution; IGNORE_CALLBACK: into the subgraph
  ASSERT_TRUE(row(on, "relu") && row(all, "relu"));
  EXPECT_EQ(row(on, "relu")->fused_into, "conv");
  if (target) {
    EXPECT_NE(row(all, "relu")->fused_into, "conv");
  } else {
    EXPECT_EQ(row(all, "relu")->fused_into, "conv");
  }
  EXPECT_EQ(row(all, "relu")->status, ProfilingInfo::Status::optimized_out);
  expect_same(on.out, off.out);
  expect_same(all.out, off.out);
}

TEST(SnippetsProperties, IsaIsForcedAndReported) {
  auto runs = [](snippets::Isa isa) {
    try {
      cpu::x64::make_target_machine(isa)->check_available();
      return true;
    } catch (const Error&) {
      return false;
    }
  };
  const bool avx512 = runs(snippets::Isa::Avx512), avx2 = runs(snippets::Isa::Avx2);
  CompiledModel cm = Core().compile_model(conv_chain(), f32_properties());
  EXPECT_EQ(cm.get_property("kiln_snippets_isa"), avx512 ? "avx512" : avx2 ? "avx2" : "none");
  EXPECT_EQ(cm.get_property("snippets_mode"), "ENABLE");
  if (!avx512) {  // an ISA the CPU (or KILN_MAX_CPU_ISA) does not give is an error naming it
    try {
      Core().compile_model(conv_chain(), {{"kiln_snippets_isa", "avx512"}});
      ADD_FAILURE() << "kiln_snippets_isa=avx512 accepted on " << cpu::isa_description();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(cpu::isa_description()), std::string::npos) << e.what();
    }
  }
  if (!avx2) {
    EXPECT_THROW(Core().compile_model(conv_chain(), {{"kiln_snippets_isa", "avx2"}}), Error);
    return;
  }
  const Outcome forced = run({{"kiln_snippets_isa", "avx2"}});
  EXPECT_EQ(subgraph_rows(forced, "snippet_avx2_f32"), 1u);
  expect_same(forced.out, run({{"snippets_mode", "DISABLE"}}).out);
  CompiledModel cm2 = Core().compile_model(conv_chain(), f32_properties({{"kiln_snippets_isa", "avx2"}}));
  EXPECT_EQ(cm2.get_property("kiln_snippets_isa"), "avx2");
}

TEST(SnippetsProperties, BadValuesNameTheKey) {
  for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
           {"snippets_mode", "sometimes"}, {"SNIPPETS_MODE", "1"}, {"kiln_snippets_isa", "sse4"}}) {
    try {
      Core().compile_model(conv_chain(), {{k, v}});
      ADD_FAILURE() << k << "=" << v << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(k), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace kiln::test::test_snippets_properties
