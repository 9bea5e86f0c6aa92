// If: ONNX If with each branch compiled for the fast path (a cpu::Executor of its own, made on
// the branch's first run), where the reference kernel would interpret the branch node by node.
// Models that hold their whole network in a branch (Silero VAD picks one of two networks by
// the sample rate) then run it on oneDNN and snippets kernels.
//
// A branch is an ir::Graph whose inputs are the values it reads from the enclosing graph (the
// frontend's captures, listed in the node's kiln_captures attribute and appended to its
// inputs). The node copies the branch with those inputs typed as this graph's edges (static
// shapes), runs it on the edges' tensors and copies its outputs into the node's outputs.
#include <algorithm>
#include <cstring>

#include "core/strings.hpp"
#include "cpu/executor.hpp"
#include "cpu/nodes/node_factory.hpp"
#include "ir/op_registry.hpp"

namespace kiln::cpu {

namespace {

class IfNode : public Node {
 private:
  struct Branch {
    std::shared_ptr<ir::Graph> graph;   // the branch, its inputs typed as this graph's edges
    std::vector<size_t> input_index;    // node input feeding each branch input
    std::unique_ptr<Executor> executor;  // made on the branch's first run
    std::vector<Tensor> last;            // its previous outputs (written over when unshared)
    std::string error;                   // the branch does not fit this graph's shapes: why
  };

 public:
  explicit IfNode(const ir::Node& n) {
    source = &n;
    name = n.name();
  }
  const char* type() const override { return "If"; }
  NodeKind kind() const override { return NodeKind::If; }

  void take_options(const GraphOptions& options) override {
    options_.disabled_passes = options.disabled_passes;
    options_.user_patterns = options.user_patterns;
    options_.bf16 = options.bf16;
    options_.snippets_mode = options.snippets_mode;
    options_.snippets_isa = options.snippets_isa;
    options_.max_tensor_bytes = options.max_tensor_bytes;
  }

  std::vector<InputLayout> prepare() override {
    impl = "branches:fast";
    const std::vector<std::string> names =
        source->has_attr("kiln_captures") ? source->attr_strings("kiln_captures") : std::vector<std::string>{};
    first_capture_ = source->num_inputs() - names.size();
    for (int b = 0; b < 2; ++b) {
      const char* attr = b == 0 ? "then_branch" : "else_branch";
      try {
        prepare_branch(branches_[b], attr, names);
      } catch (const Error& e) {  // a branch these shapes do not fit: an error if it is taken
        branches_[b].error = cat(source->describe(), ": its ", attr, " cannot take these inputs: ", e.what());
      }
    }
    return std::vector<InputLayout>(inputs.size(), InputLayout::plain());
  }

  void prepare_branch(Branch& br, const char* attr, const std::vector<std::string>& names) {
    const std::shared_ptr<ir::Graph> body = source->attr_graph(attr)->clone();
    {
      for (ir::Value* in : body->inputs()) {
        const auto it = std::find(names.begin(), names.end(), in->name());
        KILN_CHECK(it != names.end(), cat(source->describe(), ": branch input '", in->name(),
                                          "' is not a value of the enclosing graph"));
        const size_t k = first_capture_ + static_cast<size_t>(it - names.begin());
        KILN_CHECK(k < inputs.size() && inputs[k], cat(source->describe(), ": no value for branch input '", in->name(), "'"));
        in->type = {inputs[k]->dtype, ir::PartialShape(inputs[k]->shape)};
        br.input_index.push_back(k);
      }
      ir::infer_shapes(*body);
      KILN_CHECK(body->outputs().size() == outputs.size(),
                 cat(source->describe(), ": a branch makes ", body->outputs().size(), " outputs, the node has ",
                     outputs.size()));
      br.graph = body;
    }
  }

  void execute(dnnl::stream& stream) override {
    stream.wait();  // the condition and the captures may come from oneDNN primitives
    const Tensor cond = inputs[0]->tensor();
    KILN_CHECK(cond.size() == 1, cat(source->describe(), ": the condition must hold one value, got shape ",
                                     shape_to_string(cond.shape())));
    Branch& br = branches_[cond.to_f64()[0] != 0.0 ? 0 : 1];
    if (!br.error.empty()) throw Error(br.error);
    if (!br.executor) br.executor = std::make_unique<Executor>(br.graph, options_);
    std::vector<Tensor> in;
    in.reserve(br.input_index.size());
    for (size_t k : br.input_index) in.push_back(inputs[k]->tensor());
    br.last = br.executor->run(in, profiling ? &nested_profile : nullptr, &br.last);
    for (size_t i = 0; i < outputs.size(); ++i) {
      const Tensor& t = br.last[i];
      KILN_CHECK(t.dtype() == outputs[i]->dtype && t.shape() == outputs[i]->shape,
                 cat(source->describe(), ": the branch gave output ", i, " as ", dtype_name(t.dtype()), " ",
                     shape_to_string(t.shape()), ", the graph planned ", dtype_name(outputs[i]->dtype), " ",
                     shape_to_string(outputs[i]->shape)));
      if (t.byte_size()) std::memcpy(outputs[i]->data, t.raw(), t.byte_size());
    }
  }

 private:
  GraphOptions options_;
  size_t first_capture_ = 0;
  Branch branches_[2];
};

}  // namespace

bool if_supports(const ir::Node& n) {
  if (n.op_type() != "If" || !n.is_onnx_domain() || n.num_inputs() < 1) return false;
  for (const ir::Value* v : n.inputs())
    if (!v || v->type.kind != ValueKind::tensor || v->type.dtype == DType::string || !v->type.shape.is_static())
      return false;
  for (const ir::Value* v : n.outputs())
    if (!v || v->type.kind != ValueKind::tensor || v->type.dtype == DType::string || !v->type.shape.is_static())
      return false;
  return true;
}

std::unique_ptr<Node> make_if_node(const ir::Node& n) { return std::make_unique<IfNode>(n); }

}  // namespace kiln::cpu
