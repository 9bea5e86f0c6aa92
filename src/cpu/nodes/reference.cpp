// Reference: runs any op with the spine's reference kernel on plain tensors. The
// fallback for everything the oneDNN-backed kinds do not cover.
#include <cstring>

#include "core/strings.hpp"
#include "cpu/nodes/node_factory.hpp"
#include "ir/op_registry.hpp"

namespace kiln::cpu {

namespace {

class ReferenceNode : public Node {
 public:
  explicit ReferenceNode(const ir::Node& n) : Node(n), schema_(ir::validate_node(n)) {}
  const char* type() const override { return "Reference"; }
  NodeKind kind() const override { return NodeKind::Reference; }

  std::vector<InputLayout> prepare() override {
    impl = "ref:" + source->op_type();
    return std::vector<InputLayout>(inputs.size(), InputLayout::plain());
  }

  void execute(dnnl::stream& stream) override {
    stream.wait();  // oneDNN work before this node must be complete
    std::vector<Tensor> in(inputs.size());
    std::vector<const Tensor*> ptrs(inputs.size(), nullptr);
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i]) {
        in[i] = inputs[i]->tensor();
        ptrs[i] = &in[i];
      }
    std::vector<Tensor> out(outputs.size());
    for (size_t i = 0; i < outputs.size(); ++i) out[i] = outputs[i]->tensor();  // write into the arena
    ir::RunContext ctx(*source, std::move(ptrs), out);
    schema_.run(ctx);
    for (size_t i = 0; i < outputs.size(); ++i) {
      Edge* e = outputs[i];
      KILN_CHECK(out[i].defined(), cat(source->describe(), ": kernel did not produce output ", i));
      KILN_CHECK(out[i].shape() == e->shape && out[i].dtype() == e->dtype,
                 cat(source->describe(), ": output ", i, " is ", dtype_name(out[i].dtype()),
                     shape_to_string(out[i].shape()), " but shape inference planned ", dtype_name(e->dtype),
                     shape_to_string(e->shape)));
      if (e->bytes() && out[i].raw() != e->data) std::memcpy(e->data, out[i].raw(), e->bytes());
    }
  }

 private:
  const ir::OpSchema& schema_;
};

}  // namespace

std::unique_ptr<Node> make_reference_node(const ir::Node& n) { return std::make_unique<ReferenceNode>(n); }

}  // namespace kiln::cpu
