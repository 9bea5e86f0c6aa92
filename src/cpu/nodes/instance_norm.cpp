// InstanceNorm: ONNX InstanceNormalization of f32 [N, C, spatial...] with constant scale and B
// on kiln's instance_norm_f32 (every CPU: plain C++), the input plain. PyTorch's GroupNorm
// exports as one over [N, groups, -1]. Other element types and computed scale / B keep the
// reference kernel.
#include "cpu/instance_norm_f32.hpp"
#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

namespace {

class InstanceNormNode : public Node {
 public:
  explicit InstanceNormNode(const ir::Node& n) : Node(n) {}
  const char* type() const override { return "InstanceNorm"; }
  NodeKind kind() const override { return NodeKind::InstanceNorm; }

  std::vector<InputLayout> prepare() override {
    impl = instance_norm_f32::impl_name();
    const Shape& x = inputs[0]->shape;
    N_ = x[0], C_ = x[1];
    m_ = 1;
    for (size_t k = 2; k < x.size(); ++k) m_ *= x[k];
    eps_ = source->attr_f("epsilon", 1e-5f);
    outputs[0]->blocked.reset();
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    req[0] = InputLayout::plain();
    return req;
  }

  // y may be x: written over an input nobody reads later
  int inplace_input() const override { return 0; }

  void execute(dnnl::stream&) override {
    instance_norm_f32::run(static_cast<const float*>(inputs[0]->data), N_, C_, m_,
                           static_cast<const float*>(inputs[1]->data), static_cast<const float*>(inputs[2]->data), eps_,
                           static_cast<float*>(outputs[0]->data));
  }

 private:
  int64_t N_ = 0, C_ = 0, m_ = 0;
  float eps_ = 1e-5f;
};

}  // namespace

bool instance_norm_supports(const ir::Node& n) {
  if (n.op_type() != "InstanceNormalization" || !n.is_onnx_domain() || n.num_inputs() != 3) return false;
  const ir::Value *x = n.input(0), *s = n.input(1), *b = n.input(2);
  if (!x || !s || !b || !s->is_constant() || !b->is_constant()) return false;
  if (x->type.dtype != DType::f32 || !x->type.shape.is_static() || x->type.shape.rank() < 3) return false;
  const Shape xs = x->type.shape.to_shape();
  const Tensor &sc = s->constant(), &bi = b->constant();
  return sc.dtype() == DType::f32 && bi.dtype() == DType::f32 && sc.size() == xs[1] && bi.size() == xs[1] &&
         n.output(0) && n.output(0)->type.dtype == DType::f32;
}

std::unique_ptr<Node> make_instance_norm_node(const ir::Node& n) { return std::make_unique<InstanceNormNode>(n); }

}  // namespace kiln::cpu
