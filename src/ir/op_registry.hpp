#pragma once
// The op registry: every op kiln knows declares its inputs, outputs and attributes,
// a static shape/dtype inference function (symbolic dims propagate) and a reference
// kernel that runs on concrete tensors.
#include <kiln/error.hpp>
#include <kiln/tensor.hpp>

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/strings.hpp"
#include "ir/graph.hpp"

namespace kiln::ir {

struct AttrSpec {
  std::string name;
  AttrType type;
  bool required = false;
};

// Static inference over ir types (dims may be symbolic or unknown).
class InferContext {
 public:
  explicit InferContext(Node& node) : node_(node) {}
  const Node& node() const { return node_; }
  size_t num_inputs() const { return node_.num_inputs(); }
  size_t num_outputs() const { return node_.num_outputs(); }
  bool has_input(size_t i) const { return node_.has_input(i); }
  const ValueType& input_type(size_t i) const;  // throws if the input is absent
  DType input_dtype(size_t i) const { return input_type(i).dtype; }
  const PartialShape& input_shape(size_t i) const { return input_type(i).shape; }
  // The input's value when it is a constant (initializer / folded), else nullptr.
  const Tensor* input_constant(size_t i) const;
  void set_output(size_t i, DType dtype, PartialShape shape);  // a tensor
  void set_output_type(size_t i, ValueType type);             // any kind (sequence, optional)
  // An error whose message starts with the node's description.
  template <typename... Args>
  Error error(const Args&... args) const {
    return Error(cat(node_.describe(), ": ", args...));
  }

 private:
  Node& node_;
};

// The largest tensor a reference kernel may allocate on this thread, in bytes (0: no limit):
// kiln_max_tensor_bytes, for shapes that depend on data and are only known at run time.
// A TensorLimit sets it for its scope (the reference executor's run; nested control-flow
// bodies run inside that scope and keep it).
class TensorLimit {
 public:
  explicit TensorLimit(uint64_t bytes);
  ~TensorLimit();
  TensorLimit(const TensorLimit&) = delete;
  TensorLimit& operator=(const TensorLimit&) = delete;
  static uint64_t current();

 private:
  uint64_t previous_;
};

// Execution of the reference kernel on concrete tensors.
class RunContext {
 public:
  RunContext(const Node& node, std::vector<const Tensor*> inputs, std::vector<Tensor>& outputs)
      : node_(node), inputs_(std::move(inputs)), outputs_(outputs) {}
  const Node& node() const { return node_; }
  size_t num_inputs() const { return inputs_.size(); }
  size_t num_outputs() const { return outputs_.size(); }
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  const Tensor& input(size_t i) const;  // a tensor; throws if absent or a sequence / optional
  const Tensor& value(size_t i) const;  // any kind (sequence and optional ops); throws if absent
  // Allocates (zeroed) output i and returns it.
  // When the caller pre-placed output i (outputs[i] defined, same dtype and shape), that
  // tensor is zeroed and returned: kernels then write straight into the caller's memory.
  Tensor& allocate_output(size_t i, DType dtype, Shape shape);
  // The same without zeroing, for kernels that write every element of the output (Gather):
  // the bytes are whatever the memory held (string tensors: empty strings).
  Tensor& allocate_output_unzeroed(size_t i, DType dtype, Shape shape);
  // Sets output i to an existing tensor (may alias an input, e.g. Reshape / Identity).
  void set_output(size_t i, Tensor t);
  // Throws kiln::Error naming the node when a tensor of `bytes` (`what`, e.g. "output 0
  // [..] f32") would exceed TensorLimit::current(). allocate_output checks its outputs.
  void check_bytes(long double bytes, const std::string& what) const;
  template <typename... Args>
  Error error(const Args&... args) const {
    return Error(cat(node_.describe(), ": ", args...));
  }

 private:
  const Node& node_;
  std::vector<const Tensor*> inputs_;
  std::vector<Tensor>& outputs_;
};

struct OpSchema {
  std::string domain;  // "" = default ONNX domain
  std::string name;
  int since_version = 1;  // oldest opset of the domain this op exists in
  // Default domain: the newest revision of the operator kiln implements (an opset version
  // from onnx_op_versions()); every older one is implemented too. 0: the revisions up to
  // opset 17 (or since_version, for an operator added later). A model whose opset means a
  // newer revision is refused by name.
  int max_version = 0;
  size_t min_inputs = 1, max_inputs = 1;
  // Inputs before min_inputs that may still be omitted (an empty name), e.g. the zero points
  // between the scales of ONNX Runtime's QLinear* ops.
  std::vector<size_t> optional_inputs;
  size_t min_outputs = 1, max_outputs = 1;
  std::vector<AttrSpec> attrs;  // every attribute the op accepts
  // Takes the 8- / 4-bit element types (float8, int4, uint4, float4e2m1): the ops that convert
  // them (Cast, Q / DQ) or move them unchanged. Any other op given one is refused when the
  // model is read.
  bool takes_narrow_types = false;
  // Optional extra validation of attribute values (ranges, consistency); throw kiln::Error.
  std::function<void(const Node&)> validate;
  std::function<void(InferContext&)> infer;
  std::function<void(RunContext&)> run;
};

class OpRegistry {
 public:
  // The layers that define ops hand the registry a provider from a static initialiser
  // (src/ops/all_ops.cpp: every ONNX and contrib op; src/snippets/subgraph_op.cpp: kiln
  // Subgraph), so the ir layer never names them; the build links kiln_ops whole
  // (CMakeLists.txt) so that initialiser is part of every program. A provider only records
  // itself: the ops' own tables are other files' statics, not yet made at that point.
  using Provider = void (*)(OpRegistry&);
  static bool add_provider(Provider p);  // returns true (for use in a static initialiser)
  // The process's registry: every provider has run on it, on the first call.
  static OpRegistry& instance();
  void add(OpSchema schema);
  const OpSchema* find(const std::string& domain, const std::string& name) const;
  OpSchema* find_mutable(const std::string& domain, const std::string& name);  // while registering
  std::vector<const OpSchema*> all() const;

 private:
  // (domain, name) -> schema, looked up by views: every node of every plan's specialisation,
  // lowering and validation asks, and a key of two strings per lookup was a tenth of the lookups'
  // cost
  struct KeyLess {
    using is_transparent = void;
    template <class A, class B>
    bool operator()(const A& a, const B& b) const {
      const std::string_view ad = a.first, an = a.second, bd = b.first, bn = b.second;
      return ad < bd || (ad == bd && an < bn);
    }
  };
  std::map<std::pair<std::string, std::string>, OpSchema, KeyLess> ops_;
  // find()'s index: the schemas of each op name (views of ops_' keys, stable), one per domain
  // that has it; a hash and a domain or two compared instead of a walk down the ordered map,
  // asked for every node of every new input shape's graph
  std::unordered_map<std::string_view, std::vector<std::pair<std::string_view, const OpSchema*>>> by_name_;
};

// Default domain: the revisions of `s` kiln implements, oldest first (from
// onnx_op_versions(), up to s.max_version).
std::vector<int> implemented_versions(const OpSchema& s);

// Checks a node against its schema: op known (error names op, domain, opset and node), the
// operator's revision at the model's opset implemented (error names node, op, the version
// asked and the versions kiln has), input/output counts, attribute names/types/required,
// then schema.validate.
const OpSchema& validate_node(const Node& node);

// Runs validate_node + infer for every node in topological order, filling value types.
// A graph output keeps the declared type (from the model) where inference left the
// rank or a dim unknown.
void infer_shapes(Graph& graph);

}  // namespace kiln::ir
