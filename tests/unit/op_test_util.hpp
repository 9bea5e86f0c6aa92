#pragma once
// Helpers shared by the op-family unit tests (test_ops_*.cpp): build a one-node graph over
// example input tensors, run it through ir::infer_shapes + runtime::ReferenceExecutor, and
// check errors.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/strings.hpp"
#include "ir/graph.hpp"
#include "ir/op_registry.hpp"
#include "runtime/reference_executor.hpp"

namespace kiln::test {

// Infers shapes of `g`, runs it on `feeds` (one per graph input, in order) and returns the outputs.
inline std::vector<Tensor> run_graph(const std::shared_ptr<ir::Graph>& g, const std::vector<Tensor>& feeds) {
  ir::infer_shapes(*g);
  runtime::ReferenceExecutor ex(g);
  return ex.run(feeds);
}

// One-node graph builder: graph inputs (dtype + shape from the example tensors, fed when
// run), constant inputs and omitted optional inputs, in node-input order.
struct OneNode {
  std::shared_ptr<ir::Graph> g = std::make_shared<ir::Graph>();
  std::vector<ir::Value*> node_inputs;
  std::vector<Tensor> feeds;
  ir::Node* node = nullptr;

  explicit OneNode(int opset = 17) { g->opset_imports[""] = opset; }
  OneNode& input(const Tensor& t) {
    node_inputs.push_back(g->add_input(cat("in", node_inputs.size()), {t.dtype(), ir::PartialShape(t.shape())}));
    feeds.push_back(t);
    return *this;
  }
  // Graph input declared with shape `s` (e.g. symbolic), fed with `t`.
  OneNode& input_typed(const Tensor& t, ir::PartialShape s) {
    node_inputs.push_back(g->add_input(cat("in", node_inputs.size()), {t.dtype(), std::move(s)}));
    feeds.push_back(t);
    return *this;
  }
  OneNode& constant(const Tensor& t) {
    node_inputs.push_back(g->add_constant(cat("c", node_inputs.size()), t));
    return *this;
  }
  OneNode& absent() {
    node_inputs.push_back(nullptr);
    return *this;
  }
  // Adds the node (opset = the graph's default-domain import); its outputs become graph outputs.
  ir::Node* make(const std::string& op, size_t num_outputs = 1, const std::string& name = "") {
    node = g->add_node(op, node_inputs, num_outputs, name);
    node->set_opset(g->opset_imports[""]);
    for (size_t i = 0; i < num_outputs; ++i) g->add_output(node->output(i));
    return node;
  }
  std::vector<Tensor> run() { return run_graph(g, feeds); }
};

// Builds a one-node graph (node "n0", opset 17) over `inputs`, all graph inputs except those
// marked in `absent` (omitted optional inputs), runs it and returns the outputs.
inline std::vector<Tensor> run_op(const std::string& op, const std::vector<Tensor>& inputs,
                                  const std::map<std::string, ir::Attribute>& attrs = {}, size_t num_outputs = 1,
                                  const std::vector<bool>& absent = {}) {
  OneNode t(17);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i < absent.size() && absent[i]) t.absent();
    else t.input(inputs[i]);
  }
  t.make(op, num_outputs, "n0")->attrs = attrs;
  return t.run();
}

template <typename T>
std::vector<T> vals(const Tensor& t) {
  const T* p = t.data<T>();
  return std::vector<T>(p, p + t.size());
}

inline Tensor f32(std::vector<float> v, Shape s) { return Tensor::from_vector<float>(v, std::move(s)); }
inline Tensor i64(std::vector<int64_t> v, Shape s) { return Tensor::from_vector<int64_t>(v, std::move(s)); }

// Expects fn() to throw kiln::Error whose message contains `substr`.
template <class Fn>
void expect_error(Fn&& fn, const std::string& substr) {
  try {
    fn();
    ADD_FAILURE() << "expected kiln::Error containing '" << substr << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(substr), std::string::npos) << e.what();
  }
}

}  // namespace kiln::test
