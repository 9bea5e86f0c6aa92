#pragma once
// Helpers shared by the cpu::Graph unit tests (test_cpu_*.cpp): random f32 tensors, an
// element-wise closeness check, "run on the reference executor and on a cpu::Graph and
// compare", and queries over the nodes of a cpu::Graph.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cpu/graph.hpp"
#include "ir/graph.hpp"
#include "ir/op_registry.hpp"
#include "runtime/reference_executor.hpp"
#include "tensor_test_util.hpp"
#include "transforms/pass_log.hpp"
#include "transforms/specialize_shapes.hpp"

namespace kiln::test {

// Asserts same shape and |want - got| <= atol + rtol * |want| element-wise. With
// `match_nonfinite`, equal values (also equal infinities) pass and a NaN in `want` needs a
// NaN in `got`; without it any non-finite value fails.
inline void expect_close(const Tensor& want, const Tensor& got, double rtol = 1e-4, double atol = 1e-4,
                         bool match_nonfinite = false) {
  ASSERT_EQ(want.shape(), got.shape());
  auto a = want.to_f64(), b = got.to_f64();
  for (size_t i = 0; i < a.size(); ++i) {
    if (match_nonfinite) {
      if (a[i] == b[i]) continue;  // also infinities
      if (std::isnan(a[i])) {
        ASSERT_TRUE(std::isnan(b[i])) << "at " << i << ": " << b[i] << " vs NaN";
        continue;
      }
    }
    ASSERT_LE(std::fabs(a[i] - b[i]), atol + rtol * std::fabs(a[i])) << "at " << i << ": " << b[i] << " vs " << a[i];
  }
}

struct CompareOptions {
  double rtol = 1e-4;
  double atol = 1e-4;
  bool match_nonfinite = false;  // see expect_close
  // Report an exception from building / running the cpu::Graph as a test failure (then
  // rethrow), and print the cpu::Graph's description when KILN_TEST_DESCRIBE is set.
  bool diagnostics = false;
  // Optimizer passes not to run: by default none, so that node kinds are tested alone;
  // fusion tests clear it.
  std::set<std::string> disabled_passes = {"all-fusions"};
  transforms::PassLog* log = nullptr;  // what the passes did
  // As for a model whose input shapes vary (GraphOptions::shapes_vary and shape_agnostic): nodes
  // take kiln's shape-agnostic kernels where they have them.
  bool shape_agnostic = false;
};

// For the fusion tests: every optimizer pass on, what they did into `log`, rtol 1e-4 / atol 1e-5.
inline CompareOptions fusing(transforms::PassLog* log) {
  CompareOptions o;
  o.disabled_passes.clear();
  o.log = log;
  o.rtol = 1e-4;
  o.atol = 1e-5;
  return o;
}

// Runs g on the reference executor and on a cpu::Graph made from a specialised copy,
// compares every output and returns the cpu::Graph.
inline std::unique_ptr<cpu::Graph> compare_with_reference(const std::shared_ptr<ir::Graph>& g,
                                                          const std::vector<Tensor>& inputs,
                                                          const CompareOptions& opt) {
  ir::infer_shapes(*g);
  runtime::ReferenceExecutor ref(g);
  auto want = ref.run(inputs);
  auto copy = g->clone();
  std::vector<Shape> shapes;
  for (auto& t : inputs) shapes.push_back(t.shape());
  auto r = transforms::specialize_shapes(*copy, shapes);
  EXPECT_TRUE(r.all_static);
  std::unique_ptr<cpu::Graph> cg;
  std::vector<Tensor> got;
  // f32 against the f32 reference (GraphOptions bypass inference_precision's CPU-dependent default)
  cpu::GraphOptions options{opt.disabled_passes, opt.log};
  options.bf16 = false;
  options.shapes_vary = options.shape_agnostic = opt.shape_agnostic;
  if (opt.diagnostics) {
    try {
      cg = std::make_unique<cpu::Graph>(copy, options);
      got = cg->run(inputs);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "cpu::Graph failed: " << e.what();
      throw;
    }
    if (std::getenv("KILN_TEST_DESCRIBE")) std::cout << cg->describe();
  } else {
    cg = std::make_unique<cpu::Graph>(copy, options);
    got = cg->run(inputs);
  }
  EXPECT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size() && i < got.size(); ++i)
    expect_close(want[i], got[i], opt.rtol, opt.atol, opt.match_nonfinite);
  return cg;
}

inline std::unique_ptr<cpu::Graph> compare_with_reference(const std::shared_ptr<ir::Graph>& g,
                                                          const std::vector<Tensor>& inputs, double rtol = 1e-4,
                                                          double atol = 1e-4) {
  CompareOptions opt;
  opt.rtol = rtol;
  opt.atol = atol;
  return compare_with_reference(g, inputs, opt);
}

// Number of nodes of `type` in g.
inline size_t count_type(const cpu::Graph& g, const std::string& type) {
  size_t n = 0;
  for (auto& node : g.nodes()) n += type == node->type();
  return n;
}

// Every node of `type` in g runs a JIT (non-"ref") implementation.
inline void expect_jit(const cpu::Graph& g, const std::string& type) {
  for (auto& n : g.nodes())
    if (type == n->type()) {
      EXPECT_EQ(n->impl.rfind("ref", 0), std::string::npos) << n->name << ": " << n->impl;
    }
}

// The node of g named `name`, or null.
inline const cpu::Node* find(const cpu::Graph& g, const std::string& name) {
  for (auto& n : g.nodes())
    if (n->name == name) return n.get();
  return nullptr;
}

// A pass log as text, one entry a line (for failure messages).
inline std::string explain(const transforms::PassLog& log) {
  std::string s;
  for (auto& e : log.entries) s += (e.applied ? "applied " : "skipped ") + e.pass + " " + e.where + ": " + e.message + "\n";
  return s;
}

// Does an entry applied (or skipped) hold `text` in "where: message"?
inline bool log_has(const transforms::PassLog& log, bool applied, const std::string& text) {
  for (auto& e : log.entries)
    if (e.applied == applied && (e.where + ": " + e.message).find(text) != std::string::npos) return true;
  return false;
}

// A 3x3 Conv (pads 1) of `x`: weights [co, ci, 3, 3] uniform in +-w_scale and a bias, random
// from `seed`; named `name` (its constants `name`_w, `name`_b).
inline ir::Value* conv3x3(ir::Graph& g, ir::Value* x, int64_t ci, int64_t co, uint32_t seed, const std::string& name,
                          float w_scale) {
  auto* c = g.add_node("Conv", {x, g.add_constant(name + "_w", random_tensor({co, ci, 3, 3}, seed, w_scale)),
                                g.add_constant(name + "_b", random_tensor({co}, seed + 1))},
                       1, name);
  c->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  return c->output(0);
}

// An empty graph importing the default domain at `opset`.
inline std::shared_ptr<ir::Graph> make_graph(int opset = 13) {
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = opset;
  return g;
}

// A bidirectional LSTM (hidden size 8, random weights) over x [T, n, 6] of the given dims, its
// three outputs the graph's.
inline std::shared_ptr<ir::Graph> bidirectional_lstm_graph(ir::PartialShape x_shape) {
  auto g = make_graph(14);
  auto* x = g->add_input("x", {DType::f32, std::move(x_shape)});
  auto* n = g->add_node("LSTM", {x, g->add_constant("W", random_tensor({2, 32, 6}, 1, 0.5f)),
                                 g->add_constant("R", random_tensor({2, 32, 8}, 2, 0.5f)),
                                 g->add_constant("B", random_tensor({2, 64}, 3, 0.5f))},
                        3, "lstm");
  n->attrs["hidden_size"] = int64_t(8);
  n->attrs["direction"] = std::string("bidirectional");
  for (size_t i = 0; i < 3; ++i) g->add_output(n->output(i));
  return g;
}

// The node of `g` that writes `e`, or null (a graph input).
inline const cpu::Node* producer(const cpu::Graph& g, const cpu::Edge* e) {
  for (const auto& n : g.nodes())
    for (const cpu::Edge* o : n->outputs)
      if (o == e) return n.get();
  return nullptr;
}

}  // namespace kiln::test
