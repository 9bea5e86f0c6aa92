// Transpose: no copy where the input's bytes, read in the permuted dim order, are already in
// a layout the readers take: the output is then a view of the input (its descriptor the
// input's with the dims permuted). That holds where the result is plain (a convolution's
// channels-last NCHW output transposed to NHWC, as ConvNeXt does before its LayerNorm) or
// channels-last (the NHWC result transposed back to NCHW: the next convolution reads it as
// it is). A reader that needs another layout gets a Reorder, which is the copy the Transpose
// saved. Elsewhere a oneDNN reorder from the plain input (the graph reorders a blocked one
// first) into a view of the plain output whose strides are permuted: the data moves once in
// a JIT-compiled copy.
#include <optional>

#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

namespace {

class TransposeNode : public Node {
 public:
  explicit TransposeNode(const ir::Node& n) : Node(n) {}
  const char* type() const override { return "Transpose"; }
  NodeKind kind() const override { return NodeKind::Transpose; }

  int output_aliases_input() const override { return view_ ? 0 : -1; }

  std::vector<InputLayout> prepare() override {
    const Shape& x = inputs[0]->shape;
    const size_t r = x.size();
    std::vector<int64_t> perm = source->attr_ints("perm", {});
    if (perm.empty())
      for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
    view_ = false;
    if (auto out = view_layout(perm)) {
      outputs[0]->set_layout(*out);
      view_ = true;
      impl = "view";
      return {InputLayout::any()};
    }
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
    if (view_) return;
    auto src = inputs[0]->memory();
    dnnl::memory dst(dst_view_, cpu_engine(), outputs[0]->data);
    prim_.execute(stream, src, dst);
  }

 private:
  // The output's layout as a view of the input as it comes (perm: ONNX's, output dim i is
  // input dim perm[i]), where that layout is plain or channels-last; else nothing.
  std::optional<dnnl::memory::desc> view_layout(const std::vector<int64_t>& perm) const {
    const Edge& in = *inputs[0];
    const Edge& out = *outputs[0];
    const auto dt = dnnl_type(out.dtype);
    if (!dt || in.dtype != out.dtype) return std::nullopt;
    const dnnl::memory::desc d = in.desc();
    // a layout of another element type (bf16 kept between convolutions) is not a view of this one
    if (d.data.format_kind != dnnl_blocked || d.data.data_type != static_cast<dnnl_data_type_t>(*dt))
      return std::nullopt;
    std::vector<int> to(perm.size());  // oneDNN's permutation: input dim i goes to output dim to[i]
    for (size_t i = 0; i < perm.size(); ++i) to[static_cast<size_t>(perm[i])] = static_cast<int>(i);
    const dnnl::memory::desc v = d.permute_axes(to, /*allow_empty=*/true);
    if (v.data.ndims == 0) return std::nullopt;
    if (const auto p = plain_desc(out.shape, out.dtype); p && same_element_offsets(v, *p)) return p;
    if (const auto cl = channels_last_desc(out.shape, out.dtype); cl && same_element_offsets(v, *cl)) return cl;
    return std::nullopt;
  }

  bool view_ = false;
  dnnl::memory::desc dst_view_;
  dnnl::reorder prim_;
};

}  // namespace

bool transpose_supports(const ir::Node& n) {
  if (n.op_type() != "Transpose" || !n.is_onnx_domain() || !n.input(0)) return false;
  const ir::Value* x = n.input(0);
  if (!dnnl_type(x->type.dtype) || !x->type.shape.is_static()) return false;
  size_t r = x->type.shape.rank();
  if (r < 1 || r > 6 || x->type.shape.elements() == 0) return false;
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
