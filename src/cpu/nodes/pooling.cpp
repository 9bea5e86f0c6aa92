// Pooling: ONNX MaxPool (without the Indices output), AveragePool, GlobalAveragePool and
// GlobalMaxPool (1D/2D/3D, f32; the max pools on u8 / s8 too, e.g. inside an int8 network) on oneDNN's pooling_v2_forward (dilation support). The
// primitive runs on whatever layout the producer made (nChw16c after a convolution) and
// writes the same layout, so conv -> pool -> conv chains stay blocked. Post-ops from
// FusePoolingAndFakeQuantize (a FakeQuantize as binary + round post-ops) are applied by
// the primitive.
//
// ONNX semantics that oneDNN has to reproduce exactly, checked in pooling_supports():
//  - ceil_mode / auto_pad: the output size comes from the (static) output shape; the
//    right padding given to oneDNN is derived from it, as Convolution does.
//  - every window must contain at least one input element (the reference then yields 0,
//    oneDNN the lowest float / a division by zero).
//  - AveragePool count_include_pad=1 divides by the taps inside the *explicitly* padded
//    input; oneDNN's include_padding divides by the full kernel. They agree unless a
//    window reaches past the explicit end padding (ceil_mode), which stays on Reference.
//    Without explicit pads include == exclude, so exclude_padding is used.
// Without post-ops, a 2-D f32 pooling whose input comes in channel blocks or channels-last runs
// kiln's kernel (pool_f32.hpp) where the CPU has AVX2: the same geometry, nothing made per shape.
#include <algorithm>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/nodes/node_factory.hpp"
#include "cpu/pool_f32.hpp"

namespace kiln::cpu {

namespace {

using dnnl::memory;

struct PoolGeometry {
  dnnl::algorithm alg = dnnl::algorithm::pooling_max;
  memory::dims kernel, strides, dilation, pad_l, pad_r;  // dilation: oneDNN's (0 = dense)
};

// Resolves the pooling geometry of an ir node with static input/output shapes, or
// returns false when oneDNN cannot reproduce the ONNX result.
bool pool_geometry(const ir::Node& n, const Shape& x, const Shape& y, PoolGeometry& g) {
  const std::string_view op = n.op_type();  // a view: each test below compares the length first
  const size_t sp = x.size() - 2;
  if (y.size() != x.size() || y[0] != x[0] || y[1] != x[1]) return false;
  const bool global = op == "GlobalAveragePool" || op == "GlobalMaxPool";
  std::vector<int64_t> kernel, strides, dil, pads;
  std::string auto_pad = "NOTSET";
  if (global) {
    kernel.assign(x.begin() + 2, x.end());
    strides.assign(sp, 1);
    dil.assign(sp, 1);
    pads.assign(2 * sp, 0);
  } else {
    if (!n.has_attr("kernel_shape")) return false;
    kernel = n.attr_ints("kernel_shape");
    strides = n.attr_ints("strides", std::vector<int64_t>(sp, 1));
    dil = n.attr_ints("dilations", std::vector<int64_t>(sp, 1));
    pads = n.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
    auto_pad = n.attr_s("auto_pad", "NOTSET");
    if (kernel.size() != sp || strides.size() != sp || dil.size() != sp || pads.size() != 2 * sp) return false;
  }
  for (size_t i = 0; i < sp; ++i) {
    if (kernel[i] < 1 || strides[i] < 1 || dil[i] < 1 || pads[i] < 0 || pads[sp + i] < 0) return false;
  }
  std::vector<int64_t> pb(sp), pe(sp);  // ONNX begin / end pads after auto_pad resolution
  g.kernel = to_dims(kernel);
  g.strides = to_dims(strides);
  g.dilation.assign(sp, 0);
  g.pad_l.assign(sp, 0);
  g.pad_r.assign(sp, 0);
  bool any_pad = false, reaches_past_pads = false;
  for (size_t i = 0; i < sp; ++i) {
    const int64_t ek = (kernel[i] - 1) * dil[i] + 1;
    if (auto_pad == "NOTSET") {
      pb[i] = pads[i];
      pe[i] = pads[sp + i];
    } else if (auto_pad == "VALID") {
      pb[i] = pe[i] = 0;
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      // as the reference's window_output_size resolves it
      const int64_t out = (x[2 + i] + strides[i] - 1) / strides[i];
      const int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + ek - x[2 + i]);
      pb[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pe[i] = total - pb[i];
    } else {
      return false;
    }
    const int64_t in = x[2 + i], out = y[2 + i];
    if (in < 1 || out < 1) return false;
    // right padding that reproduces the output size; windows never depend on it
    const int64_t eff_r = (out - 1) * strides[i] + ek - in - pb[i];
    if (pb[i] >= ek) return false;  // oneDNN: padding must be smaller than the kernel extent
    if (eff_r >= ek) return false;
    g.pad_l[i] = pb[i];
    g.pad_r[i] = std::max<int64_t>(0, eff_r);
    if ((in + g.pad_l[i] + g.pad_r[i] - ek) / strides[i] + 1 != out) return false;
    g.dilation[i] = dil[i] - 1;
    any_pad = any_pad || pb[i] > 0 || pe[i] > 0;
    reaches_past_pads = reaches_past_pads || eff_r > pe[i];
    // every window must see at least one input element
    for (int64_t o = 0; o < out; ++o) {
      const int64_t start = o * strides[i] - pb[i];
      int64_t t0 = start >= 0 ? 0 : (-start + dil[i] - 1) / dil[i];
      if (t0 >= kernel[i] || start + t0 * dil[i] >= in) return false;
    }
  }
  if (op == "MaxPool" || op == "GlobalMaxPool") {
    g.alg = dnnl::algorithm::pooling_max;
  } else if (op == "GlobalAveragePool") {
    g.alg = dnnl::algorithm::pooling_avg_exclude_padding;
  } else {
    const bool include = n.attr_i("count_include_pad", 0) != 0;
    if (include && any_pad) {
      if (reaches_past_pads) return false;
      g.alg = dnnl::algorithm::pooling_avg_include_padding;
    } else {
      g.alg = dnnl::algorithm::pooling_avg_exclude_padding;
    }
  }
  return true;
}

// The operation (oneDNN checks its arguments here: throws dnnl::error where they do not fit).
dnnl::pooling_v2_forward::desc pool_desc(const PoolGeometry& g, const memory::desc& src, const Shape& y) {
  memory::desc dst_any(to_dims(y), src.data_type(), memory::format_tag::any);
  return dnnl::pooling_v2_forward::desc(dnnl::prop_kind::forward_inference, g.alg, src, dst_any, g.strides, g.kernel,
                                        g.dilation, g.pad_l, g.pad_r);
}

dnnl::pooling_v2_forward::primitive_desc make_pool_pd(const PoolGeometry& g, const memory::desc& src,
                                                      const Shape& y, PostOpList* post_ops = nullptr) {
  const dnnl::pooling_v2_forward::desc d = pool_desc(g, src, y);
  dnnl::primitive_attr attr;
  if (post_ops && !post_ops->empty()) {
    dnnl::post_ops po;
    post_ops->append_to(po);
    attr.set_post_ops(po);
  }
  return dnnl::pooling_v2_forward::primitive_desc(d, attr, cpu_engine());
}

// kiln's kernel for `g` on the input layout `src`, 2-D f32 in channel blocks (nChw8c, nChw16c) or
// channels-last: the kernel's geometry and the output's layout (the input's), or nothing.
std::optional<std::pair<pool_f32::Geometry, memory::desc>> kiln_pooling(const PoolGeometry& g, const memory::desc& src,
                                                                        const Shape& x, const Shape& y) {
  using tag = memory::format_tag;
  if (!pool_f32::available() || x.size() != 4 || src.data_type() != memory::data_type::f32) return std::nullopt;
  for (const tag t : {tag::nChw8c, tag::nChw16c, tag::nhwc}) {
    if (src != memory::desc(to_dims(x), memory::data_type::f32, t)) continue;
    const memory::desc dst(to_dims(y), memory::data_type::f32, t);
    const bool blocked = t != tag::nhwc;
    const int64_t lanes = t == tag::nChw8c ? 8 : t == tag::nChw16c ? 16 : x[1];
    auto layout = [](const memory::desc& d) {
      const auto& s = d.data.format_desc.blocking.strides;
      return pool_f32::Layout{s[0], s[1], s[2], s[3]};
    };
    pool_f32::Geometry k;
    k.alg = g.alg == dnnl::algorithm::pooling_max                   ? pool_f32::Alg::max
            : g.alg == dnnl::algorithm::pooling_avg_include_padding ? pool_f32::Alg::avg_include_padding
                                                                    : pool_f32::Alg::avg_exclude_padding;
    k.batch = x[0];
    k.runs = blocked ? (x[1] + lanes - 1) / lanes : 1;  // padded lanes are zero in and out
    k.lanes = lanes;
    k.ih = x[2], k.iw = x[3], k.oh = y[2], k.ow = y[3];
    k.kh = g.kernel[0], k.kw = g.kernel[1], k.sh = g.strides[0], k.sw = g.strides[1];
    k.dh = g.dilation[0] + 1, k.dw = g.dilation[1] + 1, k.ph = g.pad_l[0], k.pw = g.pad_l[1];
    k.src = layout(src);
    k.dst = layout(dst);
    return std::make_pair(k, dst);
  }
  return std::nullopt;
}

class PoolingNode : public SrcDstPrimitiveNode {
 public:
  explicit PoolingNode(const ir::Node& n) : SrcDstPrimitiveNode(n) {}
  const char* type() const override { return "Pooling"; }
  NodeKind kind() const override { return NodeKind::Pooling; }
  PostOpList* post_ops() override { return &post_ops_; }

  // The input's layout is not known before prepare() (the producer picks it), so the
  // trial is made on the layouts a producer gives: plain and channel blocks of 16 and 8.
  // On each, a fused primitive must exist and be no reference kernel unless the unfused
  // one is too. (On plain nchw oneDNN 2.6 runs pooling with post-ops on its C++
  // simple_nchw kernel instead of JIT; still faster than a separate reference node.)
  bool accepts_post_ops(const std::vector<PostOp>& extra, std::string* why) override {
    auto with = post_ops_.with(extra, /*allow_sum=*/false, "Pooling", why);
    if (!with) return false;
    PostOpList& trial = *with;
    const Shape& x = inputs[0]->shape;
    PoolGeometry g;
    if (!pool_geometry(*source, x, outputs[0]->shape, g)) {
      if (why) *why = "pooling geometry not supported by oneDNN";
      return false;
    }
    using tag = memory::format_tag;
    const size_t sp = x.size() - 2;
    const tag b16[] = {tag::nCw16c, tag::nChw16c, tag::nCdhw16c}, b8[] = {tag::nCw8c, tag::nChw8c, tag::nCdhw8c};
    std::vector<memory::desc> layouts = {*plain_desc(x, DType::f32)};
    layouts.emplace_back(to_dims(x), memory::data_type::f32, b16[sp - 1]);
    layouts.emplace_back(to_dims(x), memory::data_type::f32, b8[sp - 1]);
    for (const memory::desc& src : layouts) {
      try {
        const std::string fused = make_pool_pd(g, src, outputs[0]->shape, &trial).impl_info_str();
        if (is_ref_impl(fused) && !is_ref_impl(make_pool_pd(g, src, outputs[0]->shape, &post_ops_).impl_info_str())) {
          if (why) *why = cat("oneDNN has only its reference pooling with post-ops ", trial.describe());
          return false;
        }
      } catch (const dnnl::error& e) {
        if (why) *why = cat("oneDNN rejects the post-ops ", trial.describe(), " (", e.what(), ")");
        return false;
      }
    }
    return true;
  }

  std::vector<InputLayout> prepare() override {
    PoolGeometry g;
    KILN_CHECK(pool_geometry(*source, inputs[0]->shape, outputs[0]->shape, g),
               cat(source->describe(), ": pooling geometry not supported by oneDNN"));
    kiln_.reset();
    if (post_ops_.empty()) {
      const Shape& x = inputs[0]->shape;
      const Shape& y = outputs[0]->shape;
      InputLayout want = InputLayout::any();
      auto k = kiln_pooling(g, inputs[0]->desc(), x, y);
      // A plain (nchw) input of a window that is not the whole image: in channel blocks of 8
      // through a Reorder. oneDNN 2.6 pools plain f32 on its C++ simple_nchw kernel: the
      // stem's MaxPool of a ResNet whose convolutions write plain (a dynamically quantized
      // one) took 8.7 ms there. A global pool reads each channel's plane contiguously in plain
      // and keeps it.
      if (!k && inputs[0]->is_plain() && inputs[0]->dtype == DType::f32 && x.size() == 4 && y.size() == 4 && y[2] * y[3] > 1) {
        const memory::desc blocked(to_dims(x), memory::data_type::f32, memory::format_tag::nChw8c);
        if ((k = kiln_pooling(g, blocked, x, y))) want = InputLayout::exact(blocked);
      }
      if (k) {
        kiln_ = k->first;
        kiln_columns_ = pool_f32::column_taps(*kiln_);
        impl = pool_f32::impl_name();
        outputs[0]->set_layout(k->second);
        return {want};
      }
    }
    pd_ = make_pool_pd(g, inputs[0]->desc(), outputs[0]->shape, &post_ops_);
    prim_ = dnnl::pooling_v2_forward(pd_);
    impl = pd_.impl_info_str();
    outputs[0]->set_layout(pd_.dst_desc());
    return {InputLayout::any()};
  }

  void execute(dnnl::stream& stream) override {
    if (kiln_)
      return pool_f32::run(*kiln_, kiln_columns_, static_cast<const float*>(inputs[0]->data),
                           static_cast<float*>(outputs[0]->data));
    if (post_ops_.empty()) return SrcDstPrimitiveNode::execute(stream);
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, inputs[0]->memory()}, {DNNL_ARG_DST, outputs[0]->memory()}};
    post_ops_.add_args(args);
    prim_.execute(stream, args);
  }

 private:
  PostOpList post_ops_;
  std::optional<pool_f32::Geometry> kiln_;  // kiln's kernel runs the node
  std::vector<int64_t> kiln_columns_;        // its column_taps
  dnnl::pooling_v2_forward::primitive_desc pd_;
};

}  // namespace

bool pooling_supports(const ir::Node& n) {
  const std::string_view op = n.op_type();  // a view: each test below compares the length first
  if (!n.is_onnx_domain()) return false;
  if (op != "MaxPool" && op != "AveragePool" && op != "GlobalAveragePool" && op != "GlobalMaxPool") return false;
  if (n.num_inputs() != 1 || n.num_outputs() != 1 || !n.input(0)) return false;  // MaxPool: no Indices
  const ir::Value *x = n.input(0), *y = n.output(0);
  const bool max = op == "MaxPool" || op == "GlobalMaxPool";
  const DType t = x->type.dtype;
  if ((t != DType::f32 && !(max && (t == DType::u8 || t == DType::i8))) || y->type.dtype != t) return false;
  if (!x->type.shape.is_static() || !y->type.shape.is_static()) return false;
  const Shape xs = x->type.shape.to_shape(), ys = y->type.shape.to_shape();
  if (xs.size() < 3 || xs.size() > 5 || shape_size(xs) == 0) return false;
  PoolGeometry g;
  if (!pool_geometry(n, xs, ys, g)) return false;
  try {  // oneDNN's own checks of the arguments, on the plain layout; every valid pooling has its
         // reference kernel, so the implementations (a primitive_desc: 50k instructions, ten
         // times for each new shape of MobileNet-v3's squeeze-excite blocks) are not asked here
    pool_desc(g, *plain_desc(xs, t), ys);
  } catch (const dnnl::error&) {
    return false;
  }
  return true;
}

std::unique_ptr<Node> make_pooling_node(const ir::Node& n) { return std::make_unique<PoolingNode>(n); }

}  // namespace kiln::cpu
