#pragma once
// Helpers shared by the ir::Graph rewrite passes (remove_identity_ops, fold_batch_norm,
// fold_pad, qdq_to_fake_quantize): erasing nodes while looping over an earlier snapshot
// of the graph, replacing a value without changing the graph's output names, and small
// questions about constants and readers.
#include <kiln/tensor.hpp>

#include <string>
#include <unordered_set>
#include <vector>

#include "ir/graph.hpp"

namespace kiln::transforms {

// Wraps a graph for one pass. Passes loop over g.topo_order() taken before they start;
// every node the editor erases is remembered so the loop can skip it (`erased`).
class GraphEditor {
 public:
  explicit GraphEditor(ir::Graph& g) : g_(g) {}
  ir::Graph& graph() { return g_; }

  bool erased(const ir::Node* n) const { return gone_.count(n) != 0; }
  // Erases a node whose outputs are no longer read (ir::Graph::erase_node).
  void erase(ir::Node* n);

  // Every reader of `from` (consumers and graph output slots) reads `to` instead, then
  // `dead` (the producer of `from`, now unread) is erased. When `from` was a graph output,
  // `to` takes over its name so the graph's output names do not change (see `rename`);
  // check why_not_replaceable first. Returns `to` (a new Value* when it was renamed).
  ir::Value* replace_and_erase(ir::Node* dead, ir::Value* from, ir::Value* to);

  // Gives `v` (an output of a node) the name `name`, which no value may hold, by
  // rebuilding its producer (same op, name, attributes, inputs; readers moved over).
  // Returns the renamed value; the old producer is erased.
  ir::Value* rename(ir::Value* v, const std::string& name);

 private:
  ir::Node* copy_node(ir::Node* src, const std::vector<std::string>& output_names, const std::string& name);
  ir::Graph& g_;
  std::unordered_set<const ir::Node*> gone_;
};

// Empty when `to` can replace `from` everywhere (GraphEditor::replace_and_erase);
// otherwise why not: a graph output can only pass to a value made by a node that is not
// already a graph output itself.
std::string why_not_replaceable(const ir::Graph& g, const ir::Value* from, const ir::Value* to);

// A written-out Swish on `x` (as fuse_simple_chain fuses it): Sigmoid(x) read only by
// Mul(x, Sigmoid(x)) (either order), x f32 and read by those two only, the Mul's output of x's
// shape. Returns the Mul (its Sigmoid is its other input's producer) or null. MarkSkipped and
// FuseSqueezeExcite ask it.
const ir::Node* written_out_swish(const ir::Graph& g, const ir::Value* x);

// Who reads `v` besides node `except`: "relu_9", "the graph output 'y'", or "" for no one.
std::string other_reader(const ir::Graph& g, const ir::Value* v, const ir::Node* except);

// Every element of `t` (any dtype, bool as 0 / 1; any shape) equals `value` exactly.
bool all_equal(const Tensor& t, double value);
// Every element of `v` (an attribute's integers) is `x` (true for none).
bool all_equal(const std::vector<int64_t>& v, int64_t x);

// Dim `d` of `v`'s shape where it is static, else -1 (unknown rank, too few dims, a symbol).
int64_t static_dim(const ir::Value* v, size_t d);

// A new f32 constant named after `base` (made unique).
ir::Value* add_f32_constant(ir::Graph& g, const std::string& base, const std::vector<double>& values, Shape shape);

// The default ONNX domain ("" or "ai.onnx").
inline bool is_onnx_domain(const ir::Node& n) { return n.is_onnx_domain(); }

}  // namespace kiln::transforms
