#pragma once
// Helpers for the snippets tests: small body graphs and comparing a kernel's outputs with
// the reference executor.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <kiln/error.hpp>

#include "cpu/isa.hpp"
#include "ir/graph.hpp"
#include "ir/op_registry.hpp"
#include "runtime/reference_executor.hpp"
#include "snippets/generator.hpp"
#include "cpu/emitters/x64/target_machine.hpp"

namespace kiln::test {

inline std::shared_ptr<ir::Graph> snippets_body(const std::vector<Shape>& inputs) {
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = 17;
  for (size_t i = 0; i < inputs.size(); ++i)
    g->add_input("in" + std::to_string(i), ir::ValueType{DType::f32, ir::PartialShape(inputs[i])});
  return g;
}

inline ir::Value* scalar_const(ir::Graph& g, float v) {
  return g.add_constant(g.unique_name("c"), Tensor::from_vector<float>({v}, Shape{}));
}

// |a - b| <= atol + rtol |b|, NaN where the reference has NaN, the same infinities.
inline bool close(float a, float b, float rtol, float atol) {
  if (std::isnan(b)) return std::isnan(a);
  if (std::isinf(b)) return a == b;
  if (std::isnan(a) || std::isinf(a)) return false;
  return std::fabs(a - b) <= atol + rtol * std::fabs(b);
}

// Runs the body on the reference executor and the compiled kernel (all rows at once),
// returns the number of mismatching elements (and reports the first few).
inline int64_t compare_with_reference(const std::shared_ptr<ir::Graph>& body, const std::vector<Tensor>& inputs,
                                      float rtol, float atol, const snippets::CompileOptions& opt = {}) {
  ir::infer_shapes(*body);
  runtime::ReferenceExecutor ref(body);
  auto expected = ref.run(inputs);
  snippets::KernelShapes ks;
  for (const auto& t : inputs) ks.inputs.push_back(t.shape());
  ks.output = expected.at(0).shape();
  auto kernel = snippets::compile(*body, ks, opt);
  std::vector<Tensor> outs;
  std::vector<const float*> ins;
  std::vector<float*> optr;
  for (const auto& t : inputs) ins.push_back(t.data<float>());
  for (size_t o = 0; o < expected.size(); ++o) {
    outs.emplace_back(DType::f32, ks.output);
    optr.push_back(outs.back().data<float>());
  }
  kernel->run(ins, optr, 0, kernel->rows());
  int64_t bad = 0;
  for (size_t o = 0; o < expected.size(); ++o) {
    EXPECT_EQ(expected[o].size(), outs[o].size());
    const float* e = expected[o].data<float>();
    const float* a = outs[o].data<float>();
    for (int64_t i = 0; i < outs[o].size(); ++i) {
      bool ok = rtol == 0.0f && atol == 0.0f ? (std::isnan(e[i]) ? std::isnan(a[i]) : a[i] == e[i])
                                             : close(a[i], e[i], rtol, atol);
      if (!ok && ++bad <= 5)
        ADD_FAILURE() << "output " << o << " element " << i << ": kernel " << a[i] << ", reference " << e[i] << "\n"
                      << kernel->describe();
    }
  }
  return bad;
}

// CompileOptions with the widest target the instruction set in use runs (the CPU layer's x64
// machine, as the Subgraph node hands it to the compiler).
inline snippets::CompileOptions best_target_options() {
  snippets::CompileOptions o;
  o.target = cpu::x64::shared_target_machine();
  return o;
}

// A test run on both x64 targets: AVX-512 and AVX2 (forced on AVX-512 CPUs; skipped where the
// CPU lacks the ISA). isa_options() are the default CompileOptions for the parameter's ISA.
class SnippetsIsaTest : public ::testing::TestWithParam<snippets::Isa> {
 protected:
  void SetUp() override {
    try {
      cpu::x64::make_target_machine(GetParam())->check_available();
    } catch (const Error& e) {
      GTEST_SKIP() << e.what();
    }
  }
  snippets::CompileOptions isa_options() const {
    snippets::CompileOptions o;
    o.target = cpu::x64::shared_target_machine(GetParam());
    return o;
  }
};

// For the tests that compile kernels with the default target: skipped (with the reason)
// where the instruction set in use has no snippets target (SSE4.1, or capped there).
#define KILN_SKIP_WITHOUT_SNIPPETS_TARGET()                                                        \
  do {                                                                                            \
    if (!cpu::x64::best_isa()) GTEST_SKIP() << "no snippets target on " << cpu::isa_description(); \
  } while (0)

inline std::string isa_param_name(const ::testing::TestParamInfo<snippets::Isa>& info) { return snippets::isa_name(info.param); }
#define KILN_SNIPPETS_BOTH_ISAS(suite) \
  INSTANTIATE_TEST_SUITE_P(Isa, suite, ::testing::Values(snippets::Isa::Avx512, snippets::Isa::Avx2), isa_param_name)

}  // namespace kiln::test
