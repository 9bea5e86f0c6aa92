// QuantizedConvolution: QLinearConv on oneDNN's int8 convolution, the requantization done by
// the primitive (quantized_convolution.hpp). u8 / s8 activations channels-last, s8 weights with
// zero point 0 (what quantizers write: symmetric, per tensor or per channel), u8 / s8 output:
//   y = saturate(round_half_even(x_scale w_scale[m] / y_scale (acc + B[m])) + y_zp)
// with acc = sum (x - x_zp) w in int32: oneDNN's output scales, source and destination zero
// points. Where oneDNN's int8 kernels are exact (VNNI / AMX: exact_int8_kernels()); elsewhere,
// with AVX2, a 2-D convolution without groups runs on kiln's exact 16-bit GEMM (gemm_s16.hpp):
// 1x1 stride-1 convolutions straight on the channels-last rows, the others through an 8-bit
// im2col (padding holds x_zp, so x - x_zp is 0 there), the requantization, a fused sum and
// clamp as the GEMM stores each block (gemm_s16::Requant: oneDNN's post-op arithmetic); a
// depthwise one (MobileNet's) on depthwise_s8 with the same requantization.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "core/strings.hpp"
#include "cpu/arena.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/depthwise_s8.hpp"
#include "cpu/gemm_s16.hpp"
#include "cpu/weights_cache.hpp"
#include "cpu/nodes/conv_geometry.hpp"
#include "cpu/nodes/im2col_s16.hpp"
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
  explicit QuantizedConvolutionNode(const ir::Node& n) : Node(n) {
    s16_ = !exact_int8_kernels();  // quantized_convolution_supports: then gemm_s16 runs it
  }
  size_t scratch_bytes() const override { return scratch_bytes_; }
  const char* type() const override { return "QLinearConv"; }
  NodeKind kind() const override { return NodeKind::QuantizedConvolution; }
  int inplace_input() const override { return sum_input_; }

  bool take_sum(const QuantizedSum& sum, std::string* why) override {
    if (sum_input_ >= 0) {
      if (why) *why = "it already accumulates into a sum";
      return false;
    }
    if (!s16_ && !keeps_int8_jit(&sum, "a sum", why)) return false;
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
    if (s16_ || keeps_int8_jit(sum_input_ >= 0 ? &sum_ : nullptr, "the clamp", why)) return true;
    clamp_.reset();
    return false;
  }

  std::vector<InputLayout> prepare() override {
    if (s16_) return prepare_s16();
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
    // the bias oneDNN reads: the one with the input's zero point folded in, or B
    const auto& folded = folded_bias();
    void* bias = folded ? const_cast<int32_t*>(folded->data()) : has_bias() ? inputs[8]->data : nullptr;
    if (bias) fixed_args_[DNNL_ARG_BIAS] = memory(memory::desc({w[0]}, memory::data_type::s32, tag::a), cpu_engine(), bias);
    zx_ = folded ? 0 : input_zero_point();
    const memory::desc one({1}, memory::data_type::s32, tag::a);
    if (zx_) fixed_args_[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] = memory(one, cpu_engine(), &zx_);
    outputs[0]->set_layout(pd_.dst_desc());
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    req[0] = InputLayout::exact(pd_.src_desc());
    if (sum_input_ >= 0) req[static_cast<size_t>(sum_input_)] = InputLayout::exact(pd_.dst_desc());
    return req;
  }

  void execute(dnnl::stream& stream) override {
    if (s16_) return execute_s16(stream);
    std::unordered_map<int, memory> args = fixed_args_;
    args[DNNL_ARG_SRC] = inputs[0]->memory();
    args[DNNL_ARG_DST] = outputs[0]->memory();
    if (sum_input_ >= 0) start_from_summand(stream, *inputs[static_cast<size_t>(sum_input_)], *outputs[0]);
    prim_.execute(stream, args);
  }

 private:
  // kiln's 16-bit GEMM (no VNNI): weights as B [(kh, kw, c), m], packed once per model; the
  // requantization and fused steps as the GEMM's 8-bit output.
  std::vector<InputLayout> prepare_s16() {
    const Shape& x = inputs[0]->shape;
    const Shape& w = inputs[3]->shape;
    const Shape& y = outputs[0]->shape;
    geo_ = conv_geometry(*source, x, w, y);
    C_ = x[1], H_ = x[2], W_ = x[3], M_ = w[0], KH_ = w[2], KW_ = w[3], OH_ = y[2], OW_ = y[3];
    K_ = KH_ * KW_ * C_;
    depthwise_ = source->attr_i("group", 1) > 1;  // s16_convolution_unsupported: one channel per group
    pointwise_ = !depthwise_ && KH_ == 1 && KW_ == 1 && geo_.strides[0] == 1 && geo_.strides[1] == 1 && geo_.pad_l[0] == 0 &&
                 geo_.pad_l[1] == 0 && OH_ == H_ && OW_ == W_;
    impl = depthwise_ ? "kiln_depthwise:avx2_s8" : cat(gemm_s16::impl_name(), pointwise_ ? " (1x1)" : " (im2col)");
    const Tensor& wt = inputs[3]->constant;
    const int64_t K = K_, M = M_, C = C_, KH = KH_, KW = KW_;
    if (depthwise_) {  // w [C, 1, KH, KW] as floats [KH][KW][C]
      weights_ = pack_weights(wt, "qlinearconv/dw_f32", memory::desc({KH * KW * C}, memory::data_type::f32, tag::a),
                              [&](memory& dst) {
                                auto* out = static_cast<float*>(dst.get_data_handle());
                                for (int64_t c = 0; c < C; ++c)
                                  for (int64_t k = 0; k < KH * KW; ++k)
                                    out[k * C + c] = static_cast<float>(wt.data<int8_t>()[c * KH * KW + k]);
                              });
    } else {
      // u8 x s8 on vpmaddubsw where no pair of weights can overflow its 16-bit sums (7-bit
      // weights: quantize --reduce-range), zx times the column sums off every sum (through the
      // bias); else both operands as 16-bit values
      PackedU8S8 u8s8;
      if (inputs[0]->dtype == DType::u8)
        u8s8 = pack_u8s8_if_safe(wt, "qlinearconv/u8s8", K, M, [&](std::vector<int8_t>* b) {
          const std::vector<uint8_t> bytes = im2col_weights(wt.raw(), M, C, KH, KW);  // s8 weights, zero point 0
          b->assign(bytes.begin(), bytes.end());
          return true;
        });
      u8s8_ = static_cast<bool>(u8s8.packed);
      if (u8s8_) {
        weights_ = u8s8.packed;
        column_sums_ = u8s8.column_sums;
        pointwise_ = pointwise_ && gemm_s16::quad_row(K) == K;  // rows read whole quads
        impl = cat(gemm_s16::impl_name_u8s8(), pointwise_ ? " (1x1)" : " (im2col)");
      } else {
        const memory::desc packed({gemm_s16::packed_size(K, M) * 2}, memory::data_type::u8, tag::a);
        weights_ = pack_weights(wt, "qlinearconv/s16", packed, [&](memory& dst) {
          const std::vector<uint8_t> b = im2col_weights(wt.raw(), M, C, KH, KW);
          gemm_s16::pack_b(b.data(), true, K, M, nullptr, static_cast<int16_t*>(dst.get_data_handle()));
        });
      }
    }
    mult_ = output_multipliers();
    const QuantizedSum* sum = sum_input_ >= 0 ? &sum_ : nullptr;
    rq_ = {};
    rq_.bias = has_bias() ? inputs[8]->constant.data<int32_t>() : nullptr;
    rq_.mult = mult_.data();
    rq_.mult_count = static_cast<int64_t>(mult_.size());
    rq_.s8 = outputs[0]->dtype == DType::i8;
    rq_.zp = static_cast<float>(output_zero_point(sum));
    const float qmin = rq_.s8 ? -128.0f : 0.0f, qmax = rq_.s8 ? 127.0f : 255.0f;
    if (sum) {
      const auto za = static_cast<float>(sum->own_zero_point);
      rq_.sum = true;
      rq_.own_lo = qmin - za, rq_.own_hi = qmax - za;
      rq_.own_mult = sum->own_scale / sum->out_scale;
      rq_.other_mult = sum->other_scale / sum->out_scale;
      rq_.other_zp = static_cast<float>(sum->other_zero_point);
    }
    if (clamp_) rq_.lo = static_cast<float>(clamp_->first) - rq_.zp, rq_.hi = static_cast<float>(clamp_->second) - rq_.zp;
    zx_ = input_zero_point();
    if (u8s8_) {  // bias - zx * column sums, in wrapping int32 as the sums
      u8s8_bias_.assign(static_cast<size_t>(M_), 0);
      for (int64_t m = 0; m < M_; ++m)
        u8s8_bias_[static_cast<size_t>(m)] = static_cast<int32_t>(
            static_cast<uint32_t>(rq_.bias ? rq_.bias[m] : 0) -
            static_cast<uint32_t>(zx_) * static_cast<uint32_t>(column_sums_[m]));
      rq_.bias = u8s8_bias_.data();
    }
    // A widened to 16 bits (the channels-last rows (1x1), or im2col's rows), im2col's u8 rows, or
    // the depthwise kernel's rings
    threads_ = omp_get_max_threads();
    scratch_bytes_ = depthwise_ ? Arena::aligned(depthwise_s8::scratch_bytes(dw_geometry(), threads_))
                     : u8s8_    ? (pointwise_ ? 0 : Arena::aligned(static_cast<size_t>(OH_ * OW_ * gemm_s16::quad_row(K_))))
                                : Arena::aligned(gemm_s16::scratch_bytes(OH_ * OW_, K_));
    const memory::desc src(to_dims(x), dt_of(inputs[0]->dtype), tag::nhwc), dst(to_dims(y), dt_of(outputs[0]->dtype), tag::nhwc);
    outputs[0]->set_layout(dst);
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    req[0] = InputLayout::exact(src);
    if (sum_input_ >= 0) req[static_cast<size_t>(sum_input_)] = InputLayout::exact(dst);
    return req;
  }

  void execute_s16(dnnl::stream& stream) {
    if (sum_input_ >= 0) start_from_summand(stream, *inputs[static_cast<size_t>(sum_input_)], *outputs[0]);
    stream.wait();  // the input may come from a oneDNN primitive
    const auto* x = static_cast<const uint8_t*>(inputs[0]->data);
    auto* y = static_cast<uint8_t*>(outputs[0]->data);
    auto* wide = static_cast<int16_t*>(scratch);
    const bool x_signed = inputs[0]->dtype == DType::i8;
    const int64_t rows = OH_ * OW_, images = inputs[0]->shape[0];
    const auto* packed = static_cast<const int16_t*>(weights_.get_data_handle());
    gemm_s16::Output out;
    out.requant = &rq_;
    for (int64_t n = 0; n < images; ++n) {
      const uint8_t* xn = x + n * H_ * W_ * C_;
      uint8_t* yn = y + n * rows * M_;
      if (depthwise_) {
        depthwise_s8::run(xn, x_signed, zx_, static_cast<const float*>(weights_.get_data_handle()), dw_geometry(), yn,
                          out, scratch, threads_);
      } else if (u8s8_) {
        const auto* b = static_cast<const int8_t*>(weights_.get_data_handle());
        if (pointwise_) {
          gemm_s16::run_u8s8(xn, rows, K_, C_, b, M_, yn, M_, out);
        } else {
          auto* a = static_cast<uint8_t*>(scratch);
          im2col_u8(xn, im2col_shape(), geo_, static_cast<uint8_t>(zx_), a);
          gemm_s16::run_u8s8(a, rows, K_, gemm_s16::quad_row(K_), b, M_, yn, M_, out);
        }
      } else if (pointwise_) {
        gemm_s16::run(xn, x_signed, zx_, rows, K_, C_, packed, M_, yn, M_, wide, out);
      } else if (x_signed) {
        im2col_s16(reinterpret_cast<const int8_t*>(xn), im2col_shape(), geo_, zx_, wide);
        gemm_s16::run_widened(wide, rows, K_, packed, M_, yn, M_, out);
      } else {
        im2col_s16(xn, im2col_shape(), geo_, zx_, wide);
        gemm_s16::run_widened(wide, rows, K_, packed, M_, yn, M_, out);
      }
    }
  }

  Im2colShape im2col_shape() const { return {H_, W_, C_, KH_, KW_, OH_, OW_}; }

  depthwise_s8::Geometry dw_geometry() const {
    depthwise_s8::Geometry dg;
    dg.H = H_, dg.W = W_, dg.C = C_, dg.KH = KH_, dg.KW = KW_, dg.OH = OH_, dg.OW = OW_;
    dg.stride_h = geo_.strides[0], dg.stride_w = geo_.strides[1], dg.pad_t = geo_.pad_l[0], dg.pad_l = geo_.pad_l[1];
    dg.dilation_h = geo_.dilations[0] + 1, dg.dilation_w = geo_.dilations[1] + 1;
    return dg;
  }

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

  // Without padding every tap reads a real input, so sum_k (x_k - zx) w_mk = sum_k x_k w_mk - zx
  // colsum_m, and the input's zero point folds into the s32 bias exactly: B - zx * (the sum of
  // output channel m's weights), computed in 64 bits. oneDNN 2.6's AMX brgemm convolutions take
  // no source zero point: a 1x1 layer with one ran on the VNNI kernels instead (MobileNet-v2's
  // projections). Null (oneDNN keeps the zero point) where there is none, where the convolution
  // pads (a padded tap would read 0 instead of zx), or where a folded value leaves int32.
  // (Computed once: make_pd asks for it more than once.)
  const std::optional<std::vector<int32_t>>& folded_bias() {
    if (!folded_) folded_ = compute_folded_bias();
    return *folded_;
  }
  std::optional<std::vector<int32_t>> compute_folded_bias() const {
    const int64_t zx = input_zero_point();
    if (zx == 0) return std::nullopt;
    const ConvGeometry geo = conv_geometry(*source, inputs[0]->shape, inputs[3]->shape, outputs[0]->shape);
    auto zero = [](int64_t p) { return p == 0; };
    if (!std::all_of(geo.pad_l.begin(), geo.pad_l.end(), zero) || !std::all_of(geo.pad_r.begin(), geo.pad_r.end(), zero))
      return std::nullopt;
    const Tensor& wt = inputs[3]->constant;
    const int64_t M = inputs[3]->shape[0], per_channel = wt.size() / M;
    const auto* w = static_cast<const int8_t*>(wt.raw());
    const auto* b = has_bias() ? static_cast<const int32_t*>(inputs[8]->constant.raw()) : nullptr;
    std::vector<int32_t> out(static_cast<size_t>(M));
    for (int64_t m = 0; m < M; ++m) {
      int64_t sum = 0;
      for (int64_t k = 0; k < per_channel; ++k) sum += w[m * per_channel + k];
      const int64_t v = (b ? b[m] : 0) - zx * sum;
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) return std::nullopt;
      out[static_cast<size_t>(m)] = static_cast<int32_t>(v);
    }
    return out;
  }
  int32_t output_zero_point(const QuantizedSum* sum) const { return sum ? sum->out_zero_point : scalar_zp(inputs[7]); }

  // x_scale * w_scale[m] / y_scale, one per channel or one (per-tensor weights), as
  // requantization() computes it.
  std::vector<float> output_multipliers() const {
    const float xs = scalar_f32(inputs[1]), ys = scalar_f32(inputs[6]);
    const float* ws = static_cast<const float*>(inputs[4]->constant.raw());
    std::vector<float> mult(static_cast<size_t>(inputs[4]->constant.size()));
    for (size_t m = 0; m < mult.size(); ++m) mult[m] = xs * ws[m] / ys;
    return mult;
  }

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
    const std::vector<float> mult = output_multipliers();
    const bool per_channel = mult.size() > 1;

    memory::desc src(to_dims(x), dt_of(inputs[0]->dtype), channels_last_tag(sp));
    memory::desc dst(to_dims(y), dt_of(outputs[0]->dtype), channels_last_tag(sp));
    memory::desc wei(weight_dims(), memory::data_type::s8, tag::any);
    const bool fold = folded_bias().has_value();
    memory::desc bias = has_bias() || fold ? memory::desc({M}, memory::data_type::s32, tag::a) : memory::desc();
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
                                      wei, bias, dst, geo.strides, geo.dilations, geo.pad_l, geo.pad_r);
    dnnl::primitive_attr attr;
    attr.set_output_scales(per_channel ? 1 << 1 : 0, mult);
    if (input_zero_point() && !fold) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    dnnl::post_ops po;
    // The output's zero point zy as a post-op's offset: round(v) + zy = round(v + zy) for an
    // integer zy, and the conversion to 8 bits saturates after it, as oneDNN's own destination
    // zero point does. oneDNN 2.6's AMX brgemm convolutions take no destination zero point: this
    // way they run the layers that have one (MobileNet-v2's projections, which ran on VNNI).
    // With a sum it rides on the linear step before the sum: oneDNN 2.6's brgemm post-ops gave a
    // second eltwise of one kind the first one's parameters (a second clip after the sum took the
    // first one's bounds, off by 40 steps in the residual block of
    // CpuInt8Static.ActivationUnderASymmetricRangeClampsTheIntegerResult)
    const auto zy = static_cast<float>(output_zero_point(sum));
    if (sum) {  // QLinearAdd: (a - a_zp) a_scale / c_scale + (b - b_zp) b_scale / c_scale
      const bool s8 = outputs[0]->dtype == DType::i8;
      const float qmin = s8 ? -128.0f : 0.0f, qmax = s8 ? 127.0f : 255.0f, za = static_cast<float>(sum->own_zero_point);
      po.append_eltwise(1.0f, dnnl::algorithm::eltwise_round, 0.0f, 0.0f);
      po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, qmin - za, qmax - za);
      po.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, sum->own_scale / sum->out_scale, zy);
      po.append_sum(sum->other_scale / sum->out_scale, sum->other_zero_point, dt_of(outputs[0]->dtype));
    } else if (zy != 0.0f) {
      po.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, 1.0f, zy);
    }
    // The Clip on the output, its zero point added: integer bounds, so exact. As eltwise_clip_v2
    // (the same forward function) for the reason above
    if (clamp_)
      po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip_v2, static_cast<float>(clamp_->first),
                        static_cast<float>(clamp_->second));
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
    // Without AMX, oneDNN 2.6 lists its VNNI brgemm kernels before its direct ones. For 1x1
    // stride 1 its direct jit_int8_1x1 measured as fast or faster on every such layer of
    // ResNet-50 and MobileNet-v2 (AMD Zen 4, 2 threads, best of 7 x 50 runs, kiln's post-ops):
    // 1.01-1.13x (64 -> 256 at 56x56 with the requantizing sum 189 -> 180 us, 16 -> 96 at
    // 112x112 142 -> 125 us); ResNet-50's 1x1 layers in the model 0.97x of their time. Its 3x3
    // layers ran 1.00-1.02x alone but 1.03x slower in the model on the direct kernel: they
    // keep brgemm.
    const std::string chosen = pd.impl_info_str();
    if (pointwise && chosen.rfind("brgconv", 0) == 0 && chosen.find("amx") == std::string::npos) {
      const dnnl::convolution_forward::primitive_desc brgemm = pd;
      while (std::string(pd.impl_info_str()).rfind("jit_int8_1x1", 0) != 0)
        if (!pd.next_impl()) return brgemm;
    }
    return pd;
  }

  dnnl::convolution_forward::primitive_desc pd_;
  dnnl::convolution_forward prim_;
  memory weights_;
  std::unordered_map<int, memory> fixed_args_;  // weights, bias, zero points
  int32_t zx_ = 0;                              // what the source zero point's memory holds
  std::optional<std::optional<std::vector<int32_t>>> folded_;  // folded_bias(), once asked
  int sum_input_ = -1;
  QuantizedSum sum_;
  std::optional<std::pair<int32_t, int32_t>> clamp_;  // a fused Clip's bounds, in the output's type
  // kiln's 16-bit GEMM (no VNNI); its u8 x s8 variant for pair-safe weights
  bool s16_ = false, pointwise_ = false, depthwise_ = false, u8s8_ = false;
  const int32_t* column_sums_ = nullptr;  // u8s8: in the packed weights' memory
  std::vector<int32_t> u8s8_bias_;        // u8s8: bias - zx * column sums
  ConvGeometry geo_;
  int64_t C_ = 0, H_ = 0, W_ = 0, M_ = 0, KH_ = 0, KW_ = 0, OH_ = 0, OW_ = 0, K_ = 0;
  std::vector<float> mult_;
  gemm_s16::Requant rq_;
  size_t scratch_bytes_ = 0;
  int threads_ = 1;  // the team depthwise_s8's scratch is planned for
};

}  // namespace

bool quantized_convolution_supports(const ir::Node& n) {
  if (!qlinear_conv_supports(n)) return false;
  // without VNNI: kiln's kernels
  if (!exact_int8_kernels() &&
      (!gemm_s16::available() || !s16_convolution_unsupported(n.attr_i("group", 1), n.input(3)->constant().shape()).empty()))
    return false;
  if (!n.input(2)->is_constant()) return false;  // the activation zero point is fixed in the primitive
  if (n.input(3)->constant().dtype() != DType::i8) return false;  // u8 weights: ConvInteger's node
  for (double v : n.input(5)->constant().to_f64())
    if (v != 0) return false;  // weight offsets: ConvInteger's node adds their correction
  return true;
}

std::string s16_convolution_unsupported(int64_t group, const Shape& w) {
  if (w.size() != 4) return cat("a ", w.size() < 2 ? 0 : w.size() - 2, "-D convolution (kiln's are 2-D)");
  if (group == 1) return "";
  if (w[1] != 1 || w[0] != group) return cat("a grouped convolution of ", w[1], " channels per group (kiln's take 1: depthwise)");
  if (!depthwise_s8::exact_taps(w[2] * w[3])) return cat("a depthwise window of ", w[2] * w[3], " taps (at most 514)");
  return "";
}

std::unique_ptr<Node> make_quantized_convolution_node(const ir::Node& n) {
  return std::make_unique<QuantizedConvolutionNode>(n);
}

}  // namespace kiln::cpu
