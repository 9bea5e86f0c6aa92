// LRN (f32, across channels) on oneDNN's lrn_forward, in the producer's layout.
// Both define y = x * (bias + alpha / size * sum of squares over the channel window)^-beta;
// the window is [c - (size-1)/2, c + (size-1)/2] in oneDNN but extends one channel further
// up for an even size in ONNX, so only odd sizes are taken.
#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

namespace {

class LrnNode : public SrcDstPrimitiveNode {
 public:
  explicit LrnNode(const ir::Node& n) : SrcDstPrimitiveNode(n) {}
  const char* type() const override { return "LRN"; }
  NodeKind kind() const override { return NodeKind::LRN; }

  std::vector<InputLayout> prepare() override {
    const ir::Node& n = *source;
    dnnl::lrn_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::lrn_across_channels,
                              inputs[0]->desc(), n.attr_i("size"), n.attr_f("alpha", 1e-4f), n.attr_f("beta", 0.75f),
                              n.attr_f("bias", 1.0f));
    pd_ = dnnl::lrn_forward::primitive_desc(d, cpu_engine());
    prim_ = dnnl::lrn_forward(pd_);
    impl = pd_.impl_info_str();
    outputs[0]->set_layout(pd_.dst_desc());
    return {InputLayout::any()};
  }


 private:
  dnnl::lrn_forward::primitive_desc pd_;
};

}  // namespace

bool lrn_supports(const ir::Node& n) {
  if (n.op_type() != "LRN" || !n.is_onnx_domain()) return false;
  if (n.num_inputs() != 1 || n.num_outputs() != 1 || !n.input(0) || !n.has_attr("size")) return false;
  const ir::Value* x = n.input(0);
  if (x->type.dtype != DType::f32 || !x->type.shape.is_static()) return false;
  const Shape xs = x->type.shape.to_shape();
  if (xs.size() < 3 || xs.size() > 5 || shape_size(xs) == 0) return false;
  const int64_t size = n.attr_i("size");
  if (size < 1 || size % 2 == 0) return false;
  // oneDNN raises (bias + ...) to -beta with powf; a zero base is where they could differ
  return n.attr_f("bias", 1.0f) > 0.f && n.attr_f("alpha", 1e-4f) >= 0.f;
}

std::unique_ptr<Node> make_lrn_node(const ir::Node& n) { return std::make_unique<LrnNode>(n); }

}  // namespace kiln::cpu
