#pragma once
// Helpers shared by the ir::Graph pass tests (test_transforms_*.cpp): small graph building,
// random tensors, node counts, PassLog lookups, and "the rewritten graph computes what the
// original computed" on the reference executor.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ir/graph.hpp"
#include "ir/op_registry.hpp"
#include "runtime/reference_executor.hpp"
#include "tensor_test_util.hpp"
#include "transforms/pass_log.hpp"

namespace kiln::test {

inline std::shared_ptr<ir::Graph> new_graph(int opset = 17) {
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = opset;
  return g;
}

inline ir::ValueType f32_type(std::vector<ir::Dim> dims) { return {DType::f32, ir::PartialShape(std::move(dims))}; }

// An f32 tensor uniform in [lo, hi).
inline Tensor rand_f32(Shape s, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  return random_tensor(std::move(s), seed, lo, hi);
}

inline Tensor f32_filled(Shape s, float v) {
  Tensor t(DType::f32, std::move(s));
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.size(); ++i) p[i] = v;
  return t;
}

inline size_t count_op(const ir::Graph& g, const std::string& op) {
  size_t n = 0;
  for (const ir::Node* node : g.nodes()) n += node->op_type() == op;
  return n;
}

inline std::vector<std::string> output_names(const ir::Graph& g) {
  std::vector<std::string> out;
  for (const ir::Value* v : g.outputs()) out.push_back(v->name());
  return out;
}

// The entries of `pass` in `log` (applied or skipped).
inline std::vector<transforms::PassLog::Entry> entries(const transforms::PassLog& log, const std::string& pass,
                                                       bool applied) {
  std::vector<transforms::PassLog::Entry> out;
  for (auto& e : log.entries)
    if (e.pass == pass && e.applied == applied) out.push_back(e);
  return out;
}

// Equal dtypes and shapes, element-wise |want - got| <= atol + rtol * |want| (NaN must meet
// NaN). cpu_test_util.hpp's expect_close checks no dtype and takes non-finite values optionally.
inline void expect_close_same_dtype(const Tensor& want, const Tensor& got, double rtol, double atol) {
  ASSERT_EQ(want.shape(), got.shape());
  ASSERT_EQ(want.dtype(), got.dtype());
  auto a = want.to_f64(), b = got.to_f64();
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i])) {
      ASSERT_TRUE(std::isnan(b[i])) << "at " << i;
      continue;
    }
    ASSERT_LE(std::fabs(a[i] - b[i]), atol + rtol * std::fabs(a[i])) << "at " << i << ": " << b[i] << " vs " << a[i];
  }
}

// Infers shapes of `after` (which also validates every node), runs both graphs on the
// reference executor with `feeds` and compares every output.
inline void expect_same_outputs(const std::shared_ptr<ir::Graph>& before, const std::shared_ptr<ir::Graph>& after,
                                const std::vector<Tensor>& feeds, double rtol = 1e-4, double atol = 1e-5) {
  ir::infer_shapes(*after);
  runtime::ReferenceExecutor ref(before), opt(after);
  auto want = ref.run(feeds);
  auto got = opt.run(feeds);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) expect_close_same_dtype(want[i], got[i], rtol, atol);
}

}  // namespace kiln::test
