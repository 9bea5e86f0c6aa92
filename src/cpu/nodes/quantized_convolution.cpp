// QuantizedConvolution: QLinearConv on oneDNN's int8 convolution, the requantization done by
// the primitive (quantized_convolution.hpp). u8 / s8 activations channels-last, s8 weights with
// zero point 0 (what quantizers write: symmetric, per tensor or per channel), u8 / s8 output:
//   y = saturate(round_half_even(x_scale w_scale[m] / y_scale (acc + B[m])) + y_zp)
// with acc = sum (x - x_zp) w in int32: oneDNN's output scales, source and destination zero
// points. Only where its int8 kernels are exact (VNNI / AMX: exact_int8_kernels()).
#include <algorithm>
#include <cstring>
#include <optional>

#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/nodes/conv_geometry.hpp"
#include "cpu/nodes/int8_util.hpp"
#include "cpu/nodes/node_factory.hpp"
#include "cpu/nodes/quantized_convolution.hpp"

namespace kiln::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

memory::data_type dt_of(DType t) { return t == DType::u8 ? memory::data_type::u8 : memory::data_type::s8; }

float scalar_f32(const Edge* e) { return static_cast<const float*>(e->constant.raw())[0]; }
int32_t scalar_zp(const Edge* e) { return zero_point_value(e->constant.dtype(), e->constant.raw()); }

class QuantizedConvolutionNode : public Node, public QuantizedSumHost {
 public:
  explicit QuantizedConvolutionNode(const ir::Node& n) {
    source = &n;
    name = n.name();
  }
  const char* type() const override { return "QLinearConv"; }
  NodeKind kind() const override { return NodeKind::QuantizedConvolution; }
  int inplace_input() const override { return sum_input_; }

  bool take_sum(const QuantizedSum& sum, std::string* why) override {
    if (sum_input_ >= 0) {
      if (why) *why = "it already accumulates into a sum";
      return false;
    }
    if (!keeps_int8_jit(&sum, "a sum", why)) return false;
    sum_ = sum;
    sum_input_ = static_cast<int>(inputs.size());
    return true;
  }

  bool take_clamp(int32_t lo, int32_t hi, std::string* why) override {
    if (clamp_) {
      if (why) *why = "it already clamps its output";
      return false;
    }
    clamp_ = std::make_pair(lo, hi);
    if (keeps_int8_jit(sum_input_ >= 0 ? &sum_ : nullptr, "the clamp", why)) return true;
    clamp_.reset();
    return false;
  }

  std::vector<InputLayout> prepare() override {
    pd_ = make_pd(sum_input_ >= 0 ? &sum_ : nullptr);
    prim_ = dnnl::convolution_forward(pd_);
    impl = pd_.impl_info_str();
    const Shape& w = inputs[3]->shape;
    const size_t sp = w.size() - 2;
    const int64_t group = source->attr_i("group", 1);
    weights_ = pack_int8_weights(inputs[3]->constant, false,
                                 memory::desc(weight_dims(), memory::data_type::s8, plain_conv_weights_tag(sp, group > 1)),
                                 pd_.weights_desc(), cat("qlinearconv/g", group))
                   .main;
    // what every run passes besides its source and destination: made once
    fixed_args_ = {{DNNL_ARG_WEIGHTS, weights_}};
    if (has_bias())
      fixed_args_[DNNL_ARG_BIAS] = memory(memory::desc({w[0]}, memory::data_type::s32, tag::a), cpu_engine(), inputs[8]->data);
    zx_ = input_zero_point();
    zy_ = output_zero_point(sum_input_ >= 0 ? &sum_ : nullptr);
    const memory::desc one({1}, memory::data_type::s32, tag::a);
    if (zx_) fixed_args_[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] = memory(one, cpu_engine(), &zx_);
    if (zy_) fixed_args_[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST] = memory(one, cpu_engine(), &zy_);
    outputs[0]->set_layout(pd_.dst_desc());
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    req[0] = InputLayout::exact(pd_.src_desc());
    if (sum_input_ >= 0) req[static_cast<size_t>(sum_input_)] = InputLayout::exact(pd_.dst_desc());
    return req;
  }

  void execute(dnnl::stream& stream) override {
    std::unordered_map<int, memory> args = fixed_args_;
    args[DNNL_ARG_SRC] = inputs[0]->memory();
    args[DNNL_ARG_DST] = outputs[0]->memory();
    if (sum_input_ >= 0) start_from_summand(stream, *inputs[static_cast<size_t>(sum_input_)], *outputs[0]);
    prim_.execute(stream, args);
  }

 private:
  // Whether oneDNN keeps an int8 JIT kernel for the convolution with `sum` and the node's other
  // fused steps (`what`: the one being added, for `why`).
  bool keeps_int8_jit(const QuantizedSum* sum, const char* what, std::string* why) {
    try {
      const std::string impl_name = make_pd(sum).impl_info_str();
      if (impl_name.rfind("ref", 0) != 0) return true;
      if (why) *why = cat("oneDNN has only its reference int8 convolution with ", what, " (", impl_name, ")");
    } catch (const dnnl::error& e) {
      if (why) *why = cat("oneDNN rejects the int8 convolution with ", what, ": ", e.what());
    }
    return false;
  }

  // B is input 8 of the QLinearConv (a fused sum's operand comes after the node's own inputs)
  bool has_bias() const { return source->num_inputs() > 8 && source->input(8) && inputs[8]; }

  memory::dims weight_dims() const { return conv_weight_dims(inputs[3]->shape, source->attr_i("group", 1)); }

  // x_zero_point; the output's: y_zero_point, or the fused sum's
  int32_t input_zero_point() const { return scalar_zp(inputs[2]); }
  int32_t output_zero_point(const QuantizedSum* sum) const { return sum ? sum->out_zero_point : scalar_zp(inputs[7]); }

  // The primitive descriptor, with `sum` fused (or none). The output's scale and zero point
  // are the sum's when there is one, else y_scale / y_zero_point.
  dnnl::convolution_forward::primitive_desc make_pd(const QuantizedSum* sum) {
    const Shape& x = inputs[0]->shape;
    const Shape& w = inputs[3]->shape;
    const Shape& y = outputs[0]->shape;
    const size_t sp = x.size() - 2;
    const int64_t M = w[0];
    const ConvGeometry geo = conv_geometry(*source, x, w, y);
    // the convolution's requantization to its own output (y_scale, y_zero_point); with a sum,
    // the post-ops take it on to the sum's scale and zero point
    const float xs = scalar_f32(inputs[1]), ys = scalar_f32(inputs[6]);
    const float* ws = static_cast<const float*>(inputs[4]->constant.raw());
    const bool per_channel = inputs[4]->constant.size() > 1;
    std::vector<float> mult(per_channel ? static_cast<size_t>(M) : 1);
    for (size_t m = 0; m < mult.size(); ++m) mult[m] = xs * ws[m] / ys;  // as requantization() computes it

    memory::desc src(to_dims(x), dt_of(inputs[0]->dtype), channels_last_tag(sp));
    memory::desc dst(to_dims(y), dt_of(outputs[0]->dtype), channels_last_tag(sp));
    memory::desc wei(weight_dims(), memory::data_type::s8, tag::any);
    memory::desc bias = has_bias() ? memory::desc({M}, memory::data_type::s32, tag::a) : memory::desc();
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
                                      wei, bias, dst, geo.strides, geo.dilations, geo.pad_l, geo.pad_r);
    dnnl::primitive_attr attr;
    attr.set_output_scales(per_channel ? 1 << 1 : 0, mult);
    if (input_zero_point()) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    if (output_zero_point(sum)) attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
    dnnl::post_ops po;
    if (sum) {  // QLinearAdd: (a - a_zp) a_scale / c_scale + (b - b_zp) b_scale / c_scale
      const bool s8 = outputs[0]->dtype == DType::i8;
      const float qmin = s8 ? -128.0f : 0.0f, qmax = s8 ? 127.0f : 255.0f, za = static_cast<float>(sum->own_zero_point);
      po.append_eltwise(1.0f, dnnl::algorithm::eltwise_round, 0.0f, 0.0f);
      po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, qmin - za, qmax - za);
      po.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, sum->own_scale / sum->out_scale, 0.0f);
      po.append_sum(sum->other_scale / sum->out_scale, sum->other_zero_point, dt_of(outputs[0]->dtype));
    }
    // The Clip on the output, before its zero point is added: integer bounds, so exact. As
    // eltwise_clip_v2 (the same forward function): oneDNN 2.6's brgemm convolutions computed
    // a second eltwise_clip after the sum's with the first one's bounds (the residual block of
    // CpuInt8Static.ActivationUnderASymmetricRangeClampsTheIntegerResult, off by 40 steps)
    if (clamp_) {
      const float z = static_cast<float>(output_zero_point(sum));
      po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip_v2, static_cast<float>(clamp_->first) - z,
                        static_cast<float>(clamp_->second) - z);
    }
    if (po.len() > 0) attr.set_post_ops(po);
    dnnl::convolution_forward::primitive_desc pd(d, attr, cpu_engine());
    // oneDNN 2.6 lists its AMX JIT kernels before the VNNI brgemm ones. Where AMX's brgemm
    // kernel does not take the shape, a 1x1 stride-1 convolution ran 1.5-2x slower on them than
    // on VNNI brgemm (MobileNet-v2: 2.46 ms for the network vs 1.66); ResNet-50's were equal
    // (0.142 vs 0.148 ms) and its strided ones faster on AMX (0.135 vs 0.210): for 1x1 stride 1
    // take the next implementation that is not an AMX JIT one
    const bool pointwise = std::all_of(w.begin() + 2, w.end(), [](int64_t k) { return k == 1; }) &&
                           std::all_of(geo.strides.begin(), geo.strides.end(), [](int64_t s) { return s == 1; });
    if (pointwise) {
      const dnnl::convolution_forward::primitive_desc first = pd;
      auto amx_jit = [](const std::string& impl) { return impl.rfind("jit", 0) == 0 && impl.find("amx") != std::string::npos; };
      while (amx_jit(pd.impl_info_str()))
        if (!pd.next_impl()) return first;
    }
    return pd;
  }

  dnnl::convolution_forward::primitive_desc pd_;
  dnnl::convolution_forward prim_;
  memory weights_;
  std::unordered_map<int, memory> fixed_args_;  // weights, bias, zero points
  int32_t zx_ = 0, zy_ = 0;                     // what the zero-point memories hold
  int sum_input_ = -1;
  QuantizedSum sum_;
  std::optional<std::pair<int32_t, int32_t>> clamp_;  // a fused Clip's bounds, in the output's type
};

}  // namespace

bool quantized_convolution_supports(const ir::Node& n) {
  if (!qlinear_conv_supports(n) || !exact_int8_kernels()) return false;
  if (!n.input(2)->is_constant()) return false;  // the activation zero point is fixed in the primitive
  if (n.input(3)->constant().dtype() != DType::i8) return false;  // u8 weights: ConvInteger's node
  for (double v : n.input(5)->constant().to_f64())
    if (v != 0) return false;  // weight offsets: ConvInteger's node adds their correction
  return true;
}

std::unique_ptr<Node> make_quantized_convolution_node(const ir::Node& n) {
  return std::make_unique<QuantizedConvolutionNode>(n);
}

}  // namespace kiln::cpu
