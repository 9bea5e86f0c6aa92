// Softmax / LogSoftmax on oneDNN's softmax_v2_forward (softmax_accurate / softmax_log),
// plain in and out. Opset >= 13: along one axis (any). Opset < 13 coerces the input to
// 2-D [prod(d < axis), prod(d >= axis)]; that is a single-axis softmax over the last dim
// exactly when every dim in [axis, rank-1) is 1, and only that case is taken here.
#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

namespace {

using dnnl::memory;

// f32 row-major (the shapes here are non-empty, rank <= DNNL_MAX_NDIMS: see supports())

// The single axis the op runs along, or -1 when it is not a single-axis softmax.
int softmax_axis(const ir::Node& n, const Shape& s) {
  const int64_t rank = static_cast<int64_t>(s.size());
  const bool legacy = n.opset() != 0 && n.opset() < 13;
  int64_t a = n.attr_i("axis", legacy ? 1 : -1);
  if (a < 0) a += rank;
  if (a < 0 || a >= rank) return -1;
  if (!legacy) return static_cast<int>(a);
  for (int64_t d = a; d + 1 < rank; ++d)
    if (s[static_cast<size_t>(d)] != 1) return -1;
  return static_cast<int>(rank - 1);
}

class SoftmaxNode : public Node {
 public:
  explicit SoftmaxNode(const ir::Node& n) : Node(n) {}
  const char* type() const override { return "Softmax"; }
  NodeKind kind() const override { return NodeKind::Softmax; }

  std::vector<InputLayout> prepare() override {
    const Shape& s = inputs[0]->shape;
    md_ = *plain_desc(s, DType::f32);
    const int axis = softmax_axis(*source, s);
    KILN_CHECK(axis >= 0, cat(source->describe(), ": not a single-axis softmax"));
    auto alg = source->op_type() == "LogSoftmax" ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate;
    auto made = cached_primitive<dnnl::softmax_v2_forward::primitive_desc, dnnl::softmax_v2_forward>(
        dnnl::softmax_v2_forward::desc(dnnl::prop_kind::forward_inference, alg, md_, md_, axis), dnnl::primitive_attr());
    pd_ = made.pd;
    prim_ = made.prim;
    impl = pd_.impl_info_str();
    outputs[0]->blocked.reset();
    return {InputLayout::plain()};
  }

  void execute(dnnl::stream& stream) override {
    memory src(md_, cpu_engine(), inputs[0]->data);
    memory dst(md_, cpu_engine(), outputs[0]->data);
    prim_.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  }

 private:
  memory::desc md_;
  dnnl::softmax_v2_forward::primitive_desc pd_;
  dnnl::softmax_v2_forward prim_;
};

}  // namespace

bool softmax_supports(const ir::Node& n) {
  if ((n.op_type() != "Softmax" && n.op_type() != "LogSoftmax") || !n.is_onnx_domain()) return false;
  if (n.num_inputs() != 1 || n.num_outputs() != 1) return false;
  const ir::Value* x = n.input(0);
  if (!x || x->type.dtype != DType::f32 || !x->type.shape.is_static()) return false;
  const Shape s = x->type.shape.to_shape();
  if (s.empty() || s.size() > DNNL_MAX_NDIMS || shape_size(s) == 0) return false;
  return softmax_axis(n, s) >= 0;
}

std::unique_ptr<Node> make_softmax_node(const ir::Node& n) { return std::make_unique<SoftmaxNode>(n); }

}  // namespace kiln::cpu
