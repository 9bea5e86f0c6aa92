// Snippets kernels storing bf16 outputs (CompileOptions::bf16_outputs, for Subgraphs read by
// bf16 convolutions): bit-exact round-to-nearest-even of the f32 results, every tail, unrolled
// offsets; and in a model, the Subgraph between bf16 convolutions adds no Reorder.
#include <gtest/gtest.h>

#include <kiln/core.hpp>
#include <kiln/error.hpp>

#include <bit>
#include <cmath>

#include "cpu/dnnl_util.hpp"
#include "cpu/isa.hpp"
#include "cpu_test_util.hpp"
#include "precision_util.hpp"
#include "cpu/emitters/x64/target_machine.hpp"
#include "tensor_test_util.hpp"
#include "test_snippets_util.hpp"

namespace kiln::test::test_snippets_bf16 {
namespace {

// f32 -> bf16 bits, round to nearest even (NaN kept a NaN).
uint16_t to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

bool bf16_kernels() {
  return cpu::x64::make_target_machine(snippets::Isa::Avx512)->supports_bf16_outputs();
}

TEST(SnippetsBf16, OutputsAreTheF32ResultsRoundedToNearestEven) {
  if (!bf16_kernels()) GTEST_SKIP() << "no native bf16 in " << cpu::isa_description();
  for (int64_t n : {1, 15, 16, 17, 33, 100, 1000}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const Shape s = {3, n};
    auto g = snippets_body({s, {1, n}});
    ir::Value* m = g->add_node("Mul", {g->inputs()[0], g->inputs()[1]}, 1)->output(0);
    ir::Value* a = g->add_node("Add", {m, scalar_const(*g, 0.75f)}, 1)->output(0);
    g->add_output(g->add_node("Relu", {a}, 1)->output(0));
    ir::infer_shapes(*g);
    Tensor x = random_tensor(s, 1, 3.0f), y = random_tensor({1, n}, 2, 3.0f);
    x.data<float>()[0] = std::nanf("");
    auto want = runtime::ReferenceExecutor(g).run({x, y});
    snippets::CompileOptions opt;
    opt.target = cpu::x64::shared_target_machine(snippets::Isa::Avx512);
    opt.fuse_fma = false;  // the reference rounds the Mul and the Add apart
    opt.bf16_outputs = true;
    auto k = snippets::compile(*g, {{s, {1, n}}, s}, opt);
    ASSERT_EQ(k->output_bytes(), 2);
    std::vector<uint16_t> got(static_cast<size_t>(3 * n) + 8, 0xdead);  // + a guard past the end
    k->run({x.data<float>(), y.data<float>()}, {reinterpret_cast<float*>(got.data())}, 0, k->rows());
    int bad = 0;
    for (int64_t i = 0; i < 3 * n; ++i) {
      const float w = want[0].data<float>()[i];
      const uint16_t g16 = got[static_cast<size_t>(i)];
      const bool ok = std::isnan(w) ? (g16 & 0x7f80) == 0x7f80 && (g16 & 0x7f) != 0 : g16 == to_bf16(w);
      if (!ok && ++bad <= 5) ADD_FAILURE() << "element " << i << ": kernel 0x" << std::hex << g16 << ", want 0x" << to_bf16(w);
    }
    for (size_t i = static_cast<size_t>(3 * n); i < got.size(); ++i) EXPECT_EQ(got[i], 0xdead) << "wrote past the end";
  }
}

TEST(SnippetsBf16, AvailableOnlyWhereTheCpuStoresBf16) {
  auto g = snippets_body({{2, 8}});
  g->add_output(g->add_node("Relu", {g->inputs()[0]}, 1)->output(0));
  snippets::CompileOptions opt;
  opt.bf16_outputs = true;
  opt.target = cpu::x64::shared_target_machine(snippets::Isa::Avx2);
  try {
    cpu::x64::make_target_machine(snippets::Isa::Avx2)->check_available();
  } catch (const Error&) {
    GTEST_SKIP() << "no AVX2 in " << cpu::isa_description();
  }
  EXPECT_THROW(snippets::compile(*g, {{{2, 8}}, {2, 8}}, opt), Error);  // AVX2 kernels store f32 only
}

// conv -> x * relu(x) (a Subgraph: x is read twice) -> abs -> conv -> GlobalAveragePool: in
// bf16 the Subgraph writes bf16 for the second convolution, so there are no more Reorders
// than in f32.
TEST(SnippetsBf16, ASubgraphBetweenBf16ConvolutionsWritesBf16) {
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = 13;
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 32, 14, 14})});
  auto conv = [&](ir::Value* in, const char* name, uint32_t seed) {
    auto* c = g->add_node("Conv", {in, g->add_constant(std::string(name) + "_w", random_tensor({32, 32, 3, 3}, seed, 0.2f))}, 1, name);
    c->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
    return c->output(0);
  };
  auto* c1 = conv(x, "conv1", 1);
  auto* m = g->add_node("Mul", {c1, g->add_node("Relu", {c1}, 1, "relu")->output(0)}, 1, "mul")->output(0);
  auto* t = g->add_node("Abs", {m}, 1, "abs")->output(0);
  g->add_output(g->add_node("GlobalAveragePool", {conv(t, "conv2", 2)}, 1, "gap")->output(0));
  ir::infer_shapes(*g);
  auto model = std::make_shared<Model>(g);
  if (bf16_refused_here(model)) GTEST_SKIP() << "no bf16 on " << cpu::isa_description() << " (refused, as it must be)";
  Tensor in = random_tensor({1, 32, 14, 14}, 3);
  auto run = [&](const std::string& precision, size_t* reorders, std::string* subgraph) {
    CompiledModel cm = Core().compile_model(model, {{"inference_precision", precision}, {"enable_profiling", "YES"}});
    InferRequest req = cm.create_infer_request();
    req.set_input_tensor(in);
    req.infer();
    *reorders = 0;
    for (auto& row : req.get_profiling_info()) {
      *reorders += row.node_type == "Reorder";
      if (row.node_type == "Subgraph" && row.status == ProfilingInfo::Status::executed) *subgraph = row.exec_type;
    }
    return req.get_output_tensor().clone();
  };
  size_t r32 = 0, r16 = 0;
  std::string e32, e16;
  Tensor y32 = run("f32", &r32, &e32), y16 = run("bf16", &r16, &e16);
  if (cpu::x64::best_isa()) {  // with a snippets target the mul / relu / abs chain is a Subgraph
    ASSERT_FALSE(e16.empty());
    EXPECT_EQ(e16.rfind("snippet_", 0), 0u) << e16;
  }
  if (cpu::bf16_native() && bf16_kernels()) {
    EXPECT_LE(r16, r32);
  }
  double max_abs = 0;
  for (int64_t i = 0; i < y32.size(); ++i) max_abs = std::max(max_abs, std::fabs(static_cast<double>(y32.data<float>()[i])));
  expect_close(y32, y16, 3e-2, 3e-2 * max_abs);
}

}  // namespace
}  // namespace kiln::test::test_snippets_bf16
