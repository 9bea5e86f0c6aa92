// If: ONNX If with each branch compiled for the fast path (a cpu::Executor of its own, made on
// the branch's first run), where the reference kernel would interpret the branch node by node.
// Models that hold their whole network in a branch (Silero VAD picks one of two networks by
// the sample rate) then run it on oneDNN and snippets kernels.
//
// A branch is an ir::Graph whose inputs are the values it reads from the enclosing graph (the
// frontend's captures, listed in the node's kiln_captures attribute and appended to its
// inputs). The node copies the branch with those inputs typed as this graph's edges (static
// shapes), runs it on the edges' tensors and copies its outputs into the node's outputs.
#include <cstring>

#include "core/strings.hpp"
#include "cpu/compile_pipeline.hpp"
#include "cpu/executor.hpp"
#include "cpu/nodes/node_factory.hpp"
#include "ir/op_registry.hpp"
#include "runtime/reference_executor.hpp"

namespace kiln::cpu {

namespace {

class IfNode : public Node {
 private:
  struct Branch {
    std::shared_ptr<ir::Graph> graph;   // the branch, its inputs typed as this graph's edges
    std::shared_ptr<const ir::Graph> original;  // the branch as the model has it
    std::vector<size_t> input_index;    // node input feeding each branch input
    std::unique_ptr<Executor> executor;  // made on the branch's first run
    // When the typed copy fails its shape inference (specialize_shapes found the branch cannot
    // take these shapes, or kiln's inference is stricter than the branch's run): the branch
    // runs as the model has it on the reference kernels, as the If op's own kernel would, and
    // fails there if it really cannot run.
    std::unique_ptr<runtime::ReferenceExecutor> reference;
    std::vector<Tensor> last;            // its previous outputs (written over when unshared)
    std::string why_reference;           // why the fast path could not take it
  };

 public:
  explicit IfNode(const ir::Node& n) : Node(n) {}
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
    for (int b = 0; b < 2; ++b) {
      const char* attr = b == 0 ? "then_branch" : "else_branch";
      Branch& br = branches_[b];
      br.original = source->attr_graph(attr);
      for (const ir::Value* in : br.original->inputs()) {  // which node input feeds each
        const size_t k = ir::capture_input(*source, in->name());
        KILN_CHECK(k != std::string::npos, cat(source->describe(), ": branch input '", in->name(),
                                               "' is not a value of the enclosing graph"));
        KILN_CHECK(k < inputs.size() && inputs[k], cat(source->describe(), ": no value for branch input '", in->name(), "'"));
        br.input_index.push_back(k);
      }
      KILN_CHECK(br.original->outputs().size() == outputs.size(),
                 cat(source->describe(), ": its ", attr, " makes ", br.original->outputs().size(),
                     " outputs, the node has ", outputs.size()));
      try {
        br.graph = typed_copy(*br.original, br.input_index);
      } catch (const Error& e) {
        br.why_reference = cat("its ", attr, " did not take these input shapes: ", e.what());
      }
    }
    return std::vector<InputLayout>(inputs.size(), InputLayout::plain());
  }

  // The branch with its inputs typed as this graph's edges, shapes inferred (throws when they
  // do not fit).
  std::shared_ptr<ir::Graph> typed_copy(const ir::Graph& original, const std::vector<size_t>& input_index) const {
    const std::shared_ptr<ir::Graph> body = original.clone();
    for (size_t i = 0; i < body->inputs().size(); ++i) {
      const Edge& e = *inputs[input_index[i]];
      body->inputs()[i]->type = {e.dtype, ir::PartialShape(e.shape)};
    }
    ir::infer_shapes(*body);
    return body;
  }

  void execute(dnnl::stream& stream) override {
    stream.wait();  // the condition and the captures may come from oneDNN primitives
    const Tensor cond = inputs[0]->tensor();
    KILN_CHECK(cond.size() == 1, cat(source->describe(), ": the condition must hold one value, got shape ",
                                     shape_to_string(cond.shape())));
    Branch& br = branches_[cond.to_f64()[0] != 0.0 ? 0 : 1];
    std::vector<Tensor> in;
    in.reserve(br.input_index.size());
    for (size_t k : br.input_index) in.push_back(inputs[k]->tensor());
    if (br.graph) {
      if (!br.executor) br.executor = std::make_unique<Executor>(br.graph, options_);
      br.last = br.executor->run(in, profiling ? &nested_profile : nullptr, &br.last);
    } else {
      if (!br.reference) {
        br.reference = std::make_unique<runtime::ReferenceExecutor>(br.original);
        br.reference->set_max_tensor_bytes(max_tensor_bytes(options_));
      }
      try {
        br.last = br.reference->run(in, nullptr, profiling ? &nested_profile : nullptr);
      } catch (const Error& e) {
        throw Error(cat(source->describe(), ": ", br.why_reference, "; running it as given: ", e.what()));
      }
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      const Tensor& t = br.last[i];
      KILN_CHECK(t.dtype() == outputs[i]->dtype && t.shape() == outputs[i]->shape,
                 cat(source->describe(), ": the branch gave output ", i, " as ", dtype_name(t.dtype()), " ",
                     shape_to_string(t.shape()), ", the graph planned ", dtype_name(outputs[i]->dtype), " ",
                     shape_to_string(outputs[i]->shape), br.why_reference.empty() ? "" : "; " + br.why_reference));
      if (t.byte_size()) std::memcpy(outputs[i]->data, t.raw(), t.byte_size());
    }
  }

 private:
  GraphOptions options_;
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
