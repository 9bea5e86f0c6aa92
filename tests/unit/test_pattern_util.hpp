#pragma once
// Helpers of the pattern-mapping tests (test_pattern_*.cpp): a small graph builder with
// random float inputs, and "run before / run after" numeric comparison on the reference
// executor.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/strings.hpp"
#include "ir/graph.hpp"
#include "ir/op_registry.hpp"
#include "runtime/reference_executor.hpp"

namespace kiln::test {

struct GraphBuilder {
  std::shared_ptr<ir::Graph> g = std::make_shared<ir::Graph>();
  std::vector<Tensor> feeds;
  std::mt19937 rng{1234};
  size_t counter = 0;

  explicit GraphBuilder(int opset = 17) { g->opset_imports[""] = opset; }

  Tensor random(const Shape& s, float lo = -2.f, float hi = 2.f) {
    Tensor t(DType::f32, s);
    std::uniform_real_distribution<float> d(lo, hi);
    for (int64_t i = 0; i < t.size(); ++i) t.data<float>()[i] = d(rng);
    return t;
  }
  ir::Value* input(const std::string& name, const Shape& s) {
    feeds.push_back(random(s));
    return g->add_input(name, {DType::f32, ir::PartialShape(s)});
  }
  ir::Value* constant(const Tensor& t) { return g->add_constant(cat("c", counter++), t); }
  ir::Value* scalar(float v) { return constant(Tensor::scalar<float>(v)); }
  ir::Value* vec(const Shape& s) { return constant(random(s, 0.5f, 1.5f)); }
  ir::Node* node(const std::string& op, const std::vector<ir::Value*>& ins, const std::string& name = "",
                 const std::map<std::string, ir::Attribute>& attrs = {}, const std::string& domain = "") {
    ir::Node* n = g->add_node(op, ins, 1, name.empty() ? cat(op, "_", counter++) : name, domain);
    n->attrs = attrs;
    return n;
  }
  ir::Value* op(const std::string& op, const std::vector<ir::Value*>& ins, const std::string& name = "",
                const std::map<std::string, ir::Attribute>& attrs = {}) {
    return node(op, ins, name, attrs)->output(0);
  }
  void output(ir::Value* v) { g->add_output(v); }

  std::vector<Tensor> run() const { return run_on(g); }
  std::vector<Tensor> run_on(const std::shared_ptr<ir::Graph>& graph) const {
    ir::infer_shapes(*graph);
    runtime::ReferenceExecutor ex(graph);
    return ex.run(feeds);
  }
};

// Decomposed LayerNorm over the last axis as PyTorch exports it; gamma / beta optional.
inline ir::Value* decomposed_layer_norm(GraphBuilder& b, ir::Value* x, const std::string& p, int64_t c, float eps,
                                        bool scale = true, bool bias = true, float exponent = 2.f,
                                        std::vector<int64_t> axes = {-1}) {
  ir::Value* mean = b.op("ReduceMean", {x}, p + "/ReduceMean", {{"axes", axes}});
  ir::Value* d = b.op("Sub", {x, mean}, p + "/Sub");
  ir::Value* sq = b.op("Pow", {d, b.scalar(exponent)}, p + "/Pow");
  ir::Value* var = b.op("ReduceMean", {sq}, p + "/ReduceMean_1", {{"axes", axes}});
  ir::Value* ve = b.op("Add", {var, b.scalar(eps)}, p + "/Add");
  ir::Value* sd = b.op("Sqrt", {ve}, p + "/Sqrt");
  ir::Value* y = b.op("Div", {d, sd}, p + "/Div");
  if (scale) y = b.op("Mul", {y, b.vec({c})}, p + "/Mul");
  if (bias) y = b.op("Add", {y, b.vec({c})}, p + "/Add_1");
  return y;
}

inline size_t count_ops(const ir::Graph& g, const std::string& op) {
  size_t n = 0;
  for (const ir::Node* node : g.nodes()) n += node->op_type() == op;
  return n;
}

inline void expect_close(const std::vector<Tensor>& want, const std::vector<Tensor>& got, double rtol = 1e-4,
                         double atol = 1e-5) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t k = 0; k < want.size(); ++k) {
    ASSERT_EQ(want[k].shape(), got[k].shape()) << "output " << k;
    std::vector<double> a = want[k].to_f64(), b = got[k].to_f64();
    size_t bad = 0;
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      double err = std::abs(a[i] - b[i]);
      if (err > atol + rtol * std::abs(a[i])) ++bad;
      worst = std::max(worst, err);
    }
    EXPECT_EQ(bad, 0u) << "output " << k << ": " << bad << " of " << a.size() << " elements differ, max abs error "
                       << worst;
  }
}

}  // namespace kiln::test
