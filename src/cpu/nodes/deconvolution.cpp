// Deconvolution: ONNX ConvTranspose (2D / 3D, grouped, strided, dilated, padded, output_padding)
// on oneDNN's deconvolution_forward, f32, in the layouts oneDNN picks (blocked, as the
// convolutions around it); the weights packed once through the weights cache, the scratchpad
// the node's working memory (as Convolution's). Both compute
//   y[n, g*OCg + oc, i*s + k*d - pad_begin] += x[n, g*ICg + ic, i] * W[g*ICg + ic, oc, k]
// with ONNX's W [C_in, C_out / group, k...] read as oneDNN's (g)oi(d)hw dims in the
// (g)io(d)hw order it is stored in. ONNX's end padding and output_padding become oneDNN's
// right padding, pads_end - output_padding, which must not be negative; a ConvTranspose with
// output_shape or auto_pad (their padding is derived from the shape asked for) runs its
// reference kernel, as do 1D ones.
#include <algorithm>

#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/nodes/node_factory.hpp"
#include "cpu/weights_cache.hpp"

namespace kiln::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

// oneDNN's strides, dilations (minus one) and paddings of a ConvTranspose with input x,
// weights w and output y; empty `pad_r` when a right padding would be negative.
struct DeconvGeometry {
  memory::dims strides, dilations, pad_l, pad_r;
};

DeconvGeometry deconv_geometry(const ir::Node& n, const Shape& x, const Shape& w, const Shape& y) {
  const size_t sp = x.size() - 2;
  const auto ones = std::vector<int64_t>(sp, 1);
  const std::vector<int64_t> strides = n.attr_ints("strides", ones), dil = n.attr_ints("dilations", ones);
  const std::vector<int64_t> pads = n.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  DeconvGeometry g;
  for (size_t i = 0; i < sp; ++i) {
    g.strides.push_back(strides[i]);
    g.dilations.push_back(dil[i] - 1);
    g.pad_l.push_back(pads[i]);
    // y = (x - 1) * s + (k - 1) * d + 1 - pad_l - pad_r
    const int64_t r = (x[2 + i] - 1) * strides[i] + (w[2 + i] - 1) * dil[i] + 1 - pads[i] - y[2 + i];
    if (r < 0) return {g.strides, g.dilations, g.pad_l, {}};
    g.pad_r.push_back(r);
  }
  return g;
}

class DeconvolutionNode : public Node {
 public:
  explicit DeconvolutionNode(const ir::Node& n) : Node(n) {}
  const char* type() const override { return "Deconvolution"; }
  NodeKind kind() const override { return NodeKind::Deconvolution; }

  std::vector<InputLayout> prepare() override {
    const ir::Node& n = *source;
    const Shape &x = inputs[0]->shape, &w = inputs[1]->shape, &y = outputs[0]->shape;
    const int64_t group = n.attr_i("group", 1);
    const DeconvGeometry geo = deconv_geometry(n, x, w, y);
    KILN_CHECK(!geo.pad_r.empty(), cat(n.describe(), ": output_padding beyond the end padding (checked before)"));
    const auto f32 = memory::data_type::f32;
    // oneDNN's weight dims: (g) OC/g, IC/g, k...; ONNX stores them IC, OC/g, k...
    memory::dims wdims;
    if (group > 1) wdims.push_back(group);
    wdims.push_back(w[1]);
    wdims.push_back(w[0] / group);
    wdims.insert(wdims.end(), w.begin() + 2, w.end());
    const tag stored = x.size() == 4 ? (group > 1 ? tag::giohw : tag::iohw) : (group > 1 ? tag::giodhw : tag::iodhw);
    memory::desc src_any(to_dims(x), f32, tag::any), dst_any(to_dims(y), f32, tag::any), wei_any(wdims, f32, tag::any);
    const int64_t oc = w[1] * group;
    auto d = has_bias() ? dnnl::deconvolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                            dnnl::algorithm::deconvolution_direct, src_any, wei_any,
                                                            memory::desc({oc}, f32, tag::a), dst_any, geo.strides,
                                                            geo.dilations, geo.pad_l, geo.pad_r)
                        : dnnl::deconvolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                            dnnl::algorithm::deconvolution_direct, src_any, wei_any,
                                                            dst_any, geo.strides, geo.dilations, geo.pad_l, geo.pad_r);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // execute() passes the node's scratch
    pd_ = dnnl::deconvolution_forward::primitive_desc(d, attr, cpu_engine());
    prim_ = dnnl::deconvolution_forward(pd_);
    impl = pd_.impl_info_str();
    weights_ = pack_weights(inputs[1]->constant, cat("deconv/g", group), pd_.weights_desc(), [&](memory& dst) {
      memory wsrc(memory::desc(wdims, f32, stored), cpu_engine(), inputs[1]->data);
      reorder_into(wsrc, dst);
    });
    if (has_bias()) bias_ = memory(memory::desc({oc}, f32, tag::a), cpu_engine(), inputs[2]->data);
    outputs[0]->set_layout(pd_.dst_desc());
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    req[0] = InputLayout::exact(pd_.src_desc());
    return req;
  }

  size_t scratch_bytes() const override { return pd_.scratchpad_desc().get_size(); }

  void execute(dnnl::stream& stream) override {
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, inputs[0]->memory()},
                                            {DNNL_ARG_WEIGHTS, weights_},
                                            {DNNL_ARG_DST, outputs[0]->memory()}};
    if (bias_) args[DNNL_ARG_BIAS] = bias_;
    scratchpad_.add_to(args, pd_.scratchpad_desc(), scratch);
    prim_.execute(stream, args);
  }

 private:
  bool has_bias() const { return inputs.size() > 2 && inputs[2] && inputs[2]->kind == Edge::Kind::constant; }

  dnnl::deconvolution_forward::primitive_desc pd_;
  dnnl::deconvolution_forward prim_;
  memory weights_, bias_;
  UserScratchpad scratchpad_;
};

}  // namespace

bool deconvolution_supports(const ir::Node& n) {
  if (n.op_type() != "ConvTranspose" || !n.is_onnx_domain() || n.num_inputs() < 2 || n.num_outputs() != 1) return false;
  const ir::Value *x = n.input(0), *w = n.input(1), *b = n.input(2), *y = n.output(0);
  if (!x || !w || !w->is_constant() || (b && !b->is_constant())) return false;
  if (x->type.dtype != DType::f32 || w->constant().dtype() != DType::f32 || (b && b->constant().dtype() != DType::f32))
    return false;
  if (!x->type.shape.is_static() || !y->type.shape.is_static()) return false;
  const Shape xs = x->type.shape.to_shape(), ws = w->constant().shape(), ys = y->type.shape.to_shape();
  if ((xs.size() != 4 && xs.size() != 5) || ws.size() != xs.size() || ys.size() != xs.size()) return false;
  if (shape_size(xs) == 0 || shape_size(ys) == 0) return false;
  // padding derived from a shape asked for: the reference kernel's reading of the attributes
  if (n.has_attr("output_shape") || n.attr_s("auto_pad", "NOTSET") != "NOTSET") return false;
  const int64_t group = n.attr_i("group", 1);
  if (group < 1 || ws[0] != xs[1] || ws[0] % group != 0) return false;
  if (b && (b->constant().rank() != 1 || b->constant().shape()[0] != ws[1] * group)) return false;
  const size_t sp = xs.size() - 2;
  // a kernel_shape other than the weights' is the reference kernel's to refuse
  if (n.has_attr("kernel_shape") && n.attr_ints("kernel_shape") != std::vector<int64_t>(ws.begin() + 2, ws.end()))
    return false;
  const std::vector<int64_t> strides = n.attr_ints("strides", std::vector<int64_t>(sp, 1)),
                             dilations = n.attr_ints("dilations", std::vector<int64_t>(sp, 1)),
                             pads = n.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  auto all_at_least = [](const std::vector<int64_t>& v, int64_t lo) {
    return std::all_of(v.begin(), v.end(), [lo](int64_t x) { return x >= lo; });
  };
  if (strides.size() != sp || dilations.size() != sp || pads.size() != 2 * sp) return false;
  if (!all_at_least(strides, 1) || !all_at_least(dilations, 1) || !all_at_least(pads, 0)) return false;
  if (ys[0] != xs[0] || ys[1] != ws[1] * group) return false;
  const DeconvGeometry g = deconv_geometry(n, xs, ws, ys);
  return !g.pad_r.empty();
}

std::unique_ptr<Node> make_deconvolution_node(const ir::Node& n) { return std::make_unique<DeconvolutionNode>(n); }

}  // namespace kiln::cpu
