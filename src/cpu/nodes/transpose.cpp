// Transpose: a oneDNN reorder from the input into a view of the output whose strides
// are permuted, so the data moves once in a JIT-compiled copy. Plain in, plain out.
#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

namespace {

class TransposeNode : public Node {
 public:
  explicit TransposeNode(const ir::Node& n) {
    source = &n;
    name = n.name();
  }
  const char* type() const override { return "Transpose"; }
  NodeKind kind() const override { return NodeKind::Transpose; }

  std::vector<InputLayout> prepare() override {
    const Shape& x = inputs[0]->shape;
    const size_t r = x.size();
    std::vector<int64_t> perm = source->attr_ints("perm", {});
    if (perm.empty())
      for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
    // output strides (row-major over the output shape), then input dim perm[i] -> stride of output dim i
    const Shape& y = outputs[0]->shape;
    std::vector<int64_t> ystrides(r, 1);
    for (size_t i = r; i-- > 1;) ystrides[i - 1] = ystrides[i] * y[i];
    dnnl::memory::dims strides(r, 0);
    for (size_t i = 0; i < r; ++i) strides[static_cast<size_t>(perm[i])] = ystrides[i];
    dst_view_ = dnnl::memory::desc(to_dims(x), *dnnl_type(outputs[0]->dtype), strides);
    outputs[0]->blocked.reset();
    // built for the plain layout requested below (the graph reorders a blocked input first)
    auto pd = dnnl::reorder::primitive_desc(cpu_engine(), *plain_desc(x, inputs[0]->dtype), cpu_engine(), dst_view_);
    prim_ = dnnl::reorder(pd);
    impl = pd.impl_info_str();
    return {InputLayout::plain()};
  }

  void execute(dnnl::stream& stream) override {
    auto src = inputs[0]->memory();
    dnnl::memory dst(dst_view_, cpu_engine(), outputs[0]->data);
    prim_.execute(stream, src, dst);
  }

 private:
  dnnl::memory::desc dst_view_;
  dnnl::reorder prim_;
};

}  // namespace

bool transpose_supports(const ir::Node& n) {
  if (n.op_type() != "Transpose" || !n.is_onnx_domain() || !n.input(0)) return false;
  const ir::Value* x = n.input(0);
  if (!dnnl_type(x->type.dtype) || !x->type.shape.is_static()) return false;
  size_t r = x->type.shape.rank();
  if (r < 1 || r > 6 || shape_size(x->type.shape.to_shape()) == 0) return false;
  auto perm = n.attr_ints("perm", {});
  if (!perm.empty()) {
    if (perm.size() != r) return false;
    std::vector<bool> seen(r, false);
    for (int64_t p : perm) {
      if (p < 0 || p >= static_cast<int64_t>(r) || seen[static_cast<size_t>(p)]) return false;
      seen[static_cast<size_t>(p)] = true;
    }
  }
  return true;
}

std::unique_ptr<Node> make_transpose_node(const ir::Node& n) { return std::make_unique<TransposeNode>(n); }

}  // namespace kiln::cpu
