// ConvInteger: ONNX ConvInteger (u8 / s8 activations and weights with zero points, int32
// result, 1D/2D/3D, grouped, strided, dilated, padded) on oneDNN's int8 convolution, exact in
// int32 as the operator defines.
//
// The weights become s8 plus a per-channel offset c (int8_util.hpp), so that, with S the sum
// of (x - zx) over the window and the group's channels,
//   y[n, m, p] = conv(x - zx, w')[n, m, p] + c[m] * S[n, group(m), p].
// oneDNN computes the first term (s8 activations moved to u8 by + 128, their zero point with
// them; the activation zero point is a run-time value: DynamicQuantizeLinear makes a new one
// every inference), this node the window sums and the sum, in int32 (wrapping as the
// reference's int64 sum cast to int32 does), writing the plain output. Without VNNI a 2-D
// convolution without groups runs on kiln's exact 16-bit GEMM instead (gemm_s16.hpp): the
// weights less their zero points packed once, the activations less theirs widened per run
// (im2col_s16.hpp, or the channels-last rows themselves for a 1x1 stride-1 window), so the
// GEMM's int32 sums are the result and no correction is needed; a 2-D depthwise one (one
// channel per group) runs on kiln's exact depthwise kernel (depthwise_s8.hpp), its weights less
// their zero points as floats; the others split the weights in two (int8_util.hpp) and run
// oneDNN's convolution twice.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/strings.hpp"
#include "cpu/arena.hpp"
#include "cpu/depthwise_s8.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/gemm_s16.hpp"
#include "cpu/weights_cache.hpp"
#include "cpu/nodes/conv_geometry.hpp"
#include "cpu/nodes/im2col_s16.hpp"
#include "cpu/nodes/int8_util.hpp"
#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

// Where each operand sits: ConvInteger (x, w, x_zp, w_zp) or QLinearConv (x, x_scale, x_zp, w,
// w_scale, w_zp, y_scale, y_zp, B).
struct Operands {
  size_t w = 1, zx = 2, zw = 3;
  bool qlinear = false;  // QLinearConv: + scales, y_zp, bias; the output requantized
  // kiln ConvIntegerToFloat (x, w, x_scale, w_scale, x_zp, w_zp, bias): the output scaled to float
  bool to_float = false;
};

class ConvIntegerNode : public Node {
 public:
  explicit ConvIntegerNode(const ir::Node& n) : Node(n) {
    if (n.op_type() == "QLinearConv") op_ = {3, 2, 5, true};
    if (n.op_type() == "ConvIntegerToFloat") op_ = {1, 4, 5, false, true};
  }
  const char* type() const override {
    return op_.qlinear ? "QLinearConv" : op_.to_float ? "ConvIntegerToFloat" : "ConvInteger";
  }
  NodeKind kind() const override { return NodeKind::ConvInteger; }
  size_t scratch_bytes() const override { return scratch_bytes_; }

  std::vector<InputLayout> prepare() override {
    const Shape& x = inputs[0]->shape;
    const Shape& w = inputs[op_.w]->shape;
    const Shape& y = outputs[0]->shape;
    sp_ = x.size() - 2;
    group_ = source->attr_i("group", 1);
    M_ = w[0];
    geo_ = conv_geometry(*source, x, w, y);
    const ConvGeometry& geo = geo_;

    // s8 activations run as u8 (x + 128, zero point + 128: x - zx unchanged): oneDNN 2.6's s8
    // activation kernels without VNNI scale the weights by 1/2 and lost the result here
    signed_x_ = inputs[0]->dtype == DType::i8;
    x_md_ = memory::desc(to_dims(x), signed_x_ ? memory::data_type::s8 : memory::data_type::u8, channels_last_tag(sp_));
    src_md_ = memory::desc(to_dims(x), memory::data_type::u8, channels_last_tag(sp_));
    acc_md_ = memory::desc(to_dims(y), memory::data_type::s32, channels_last_tag(sp_));
    has_zx_ = inputs.size() > op_.zx && inputs[op_.zx];
    out_positions_ = 1;
    for (size_t i = 2; i < y.size(); ++i) out_positions_ *= y[i];
    s16_ = !exact_int8_kernels() && gemm_s16::available() && sp_ == 2 && group_ == 1;
    if (s16_) return prepare_s16();
    dw_ = !exact_int8_kernels() && depthwise_s8::available() && sp_ == 2 && group_ > 1 && group_ == x[1] &&
          M_ == group_ && depthwise_s8::exact_taps(w[2] * w[3], max_abs_weight());
    if (dw_) return prepare_dw();
    const memory::dims wdims = conv_weight_dims(w, group_);
    memory::desc wei_any(wdims, memory::data_type::s8, tag::any);
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                      src_md_, wei_any, acc_md_, geo.strides, geo.dilations, geo.pad_l, geo.pad_r);
    dnnl::primitive_attr attr;
    if (has_zx_ || signed_x_) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    pd_ = dnnl::convolution_forward::primitive_desc(d, attr, cpu_engine());
    prim_ = dnnl::convolution_forward(pd_);
    split_ = !exact_int8_kernels();
    impl = int8_impl_name(pd_.impl_info_str(), split_);

    const Tensor& wt = inputs[op_.w]->constant;
    const PackedInt8 packed = pack_int8_weights(
        wt, split_, memory::desc(wdims, memory::data_type::s8, plain_conv_weights_tag(sp_, group_ > 1)), pd_.weights_desc(),
        cat("convinteger/g", group_));
    weights_ = packed.main;
    weights_hi_ = packed.hi;
    c_ = weight_offsets(wt, inputs.size() > op_.zw && inputs[op_.zw] ? &inputs[op_.zw]->constant : nullptr, M_);
    if (op_.qlinear) prepare_requantization();
    if (op_.to_float) prepare_scaling();
    correct_ = std::any_of(c_.begin(), c_.end(), [](int32_t c) { return c != 0; });

    // working memory: the primitive's output(s), and the window sums
    in_positions_ = 1;
    for (size_t i = 2; i < x.size(); ++i) in_positions_ *= x[i];
    const size_t acc_bytes = Arena::aligned(acc_md_.get_size());
    const int64_t n = x[0];
    hi_offset_ = acc_bytes;
    sums_offset_ = acc_bytes * (split_ ? 2 : 1);
    const size_t t_bytes = correct_ ? Arena::aligned(static_cast<size_t>(n * in_positions_ * group_) * 4) : 0;
    const size_t s_bytes = correct_ ? Arena::aligned(static_cast<size_t>(n * out_positions_ * group_) * 4) : 0;
    window_offset_ = sums_offset_ + t_bytes;
    x_offset_ = window_offset_ + s_bytes;
    scratch_bytes_ = x_offset_ + (signed_x_ ? Arena::aligned(x_md_.get_size()) : 0);

    return input_layouts();  // output 0 stays plain
  }

  void execute(dnnl::stream& stream) override {
    if (op_.to_float) scale_for_run();
    if (s16_) return execute_s16(stream);
    if (dw_) return execute_dw(stream);
    const int32_t zx = has_zx_ ? zero_point_value(inputs[op_.zx]->dtype, inputs[op_.zx]->data) : 0;
    auto* base = static_cast<char*>(scratch);
    memory src = inputs[0]->memory();
    zx_ = zx;
    if (signed_x_) {
      stream.wait();  // x may come from a oneDNN primitive
      const auto* in = static_cast<const uint8_t*>(inputs[0]->data);
      auto* out = reinterpret_cast<uint8_t*>(base + x_offset_);
      s8_to_u8(in, out, static_cast<int64_t>(x_md_.get_size()));
      src = memory(src_md_, cpu_engine(), out);
      zx_ = zx + 128;
    }
    memory acc(acc_md_, cpu_engine(), base);
    memory zp(memory::desc({1}, memory::data_type::s32, tag::a), cpu_engine(), &zx_);
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights_}, {DNNL_ARG_DST, acc}};
    if (has_zx_ || signed_x_) args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] = zp;
    prim_.execute(stream, args);
    if (split_) {
      args[DNNL_ARG_WEIGHTS] = weights_hi_;
      args[DNNL_ARG_DST] = memory(acc_md_, cpu_engine(), base + hi_offset_);
      prim_.execute(stream, args);
    }
    stream.wait();
    if (correct_) window_sums(zx, reinterpret_cast<int32_t*>(base + sums_offset_),
                              reinterpret_cast<int32_t*>(base + window_offset_));
    write_output(reinterpret_cast<const int32_t*>(base),
                 split_ ? reinterpret_cast<const int32_t*>(base + hi_offset_) : nullptr,
                 reinterpret_cast<const int32_t*>(base + window_offset_));
  }

 private:
  // kiln's 16-bit GEMM (no VNNI): B [(kh, kw, c), m] = w - w_zp, packed once per model; the
  // window's x - x_zp as A; C, channels-last int32 sums, in the working memory, then written
  // plain (and requantized, for a QLinearConv) by write_output.
  std::vector<InputLayout> prepare_s16() {
    const Shape& x = inputs[0]->shape;
    const Shape& w = inputs[op_.w]->shape;
    const Shape& y = outputs[0]->shape;
    shape_ = {x[2], x[3], x[1], w[2], w[3], y[2], y[3]};
    K_ = shape_.KH * shape_.KW * shape_.C;
    pointwise_ = shape_.KH == 1 && shape_.KW == 1 && geo_.strides[0] == 1 && geo_.strides[1] == 1 &&
                 geo_.pad_l[0] == 0 && geo_.pad_l[1] == 0 && shape_.OH == shape_.H && shape_.OW == shape_.W;
    impl = cat(gemm_s16::impl_name(), pointwise_ ? " (1x1)" : " (im2col)");
    const std::vector<int32_t> zb = weight_zero_points();  // the columns' zero points
    std::string key = "convinteger/s16/zw";
    for (int32_t z : zb) key += cat(",", z);  // the packed values depend on them
    const Tensor& wt = inputs[op_.w]->constant;
    const bool w_signed = wt.dtype() == DType::i8;
    auto gemm_weights = [&] { return im2col_weights(wt.raw(), M_, shape_.C, shape_.KH, shape_.KW); };
    // u8 x times w - w_zp that no pair can overflow (7-bit weights): u8 x s8 on vpmaddubsw, x as
    // it is (im2col pads with x_zp), x_zp * the column sums off as each sum is stored
    PackedU8S8 u8s8;
    if (!signed_x_)
      u8s8 = pack_u8s8_if_safe(wt, "convinteger/u8s8/" + key, K_, M_, [&](std::vector<int8_t>* d) {
        return s8_weights_less_zero_points(gemm_weights().data(), w_signed, K_, zb, d);
      });
    u8s8_ = static_cast<bool>(u8s8.packed);
    if (u8s8_) {
      pointwise_ = pointwise_ && gemm_s16::quad_row(K_) == K_;  // rows read whole quads
      impl = cat(gemm_s16::impl_name_u8s8(), pointwise_ ? " (1x1)" : " (im2col)");
      weights_ = u8s8.packed;
      column_sums_ = u8s8.column_sums;
    } else {
      const memory::desc packed({gemm_s16::packed_size(K_, M_) * 2}, memory::data_type::u8, tag::a);
      weights_ = pack_weights(wt, key, packed, [&](memory& dst) {
        gemm_s16::pack_b(gemm_weights().data(), w_signed, K_, M_, zb.data(), static_cast<int16_t*>(dst.get_data_handle()));
      });
    }
    prepare_kiln_output();
    const int64_t rows = shape_.OH * shape_.OW;
    scratch_bytes_ = acc_bytes_ + (!u8s8_    ? Arena::aligned(gemm_s16::scratch_bytes(rows, K_))
                                   : pointwise_ ? 0
                                                : Arena::aligned(static_cast<size_t>(rows * gemm_s16::quad_row(K_))));
    return input_layouts();
  }

  // The output of kiln's kernels (16-bit / u8 x s8 GEMM, depthwise): sums with no correction.
  // ConvIntegerToFloat's are scaled to float as they are stored, channels-last straight into the
  // output (the next DynamicQuantizeLinear and ConvInteger keep that layout: no transposition
  // here, no Reorder before the next convolution); else int32 sums in the working memory
  // (acc_bytes_), written plain (and requantized, for a QLinearConv) by write_output.
  void prepare_kiln_output() {
    if (op_.qlinear) prepare_requantization();
    if (op_.to_float) prepare_scaling();
    c_.assign(static_cast<size_t>(M_), 0);
    correct_ = false;
    acc_bytes_ = op_.to_float ? 0 : Arena::aligned(acc_md_.get_size());
    if (op_.to_float)
      outputs[0]->set_layout(memory::desc(to_dims(outputs[0]->shape), memory::data_type::f32, tag::nhwc));
  }

  // What kiln's kernels store: int32 sums, or (ConvIntegerToFloat) sum * scale[m] + bias[m].
  gemm_s16::Output kiln_output() const {
    gemm_s16::Output out;
    if (op_.to_float) {
      out.scale = scale_.data();
      out.scale_count = M_;
      out.bias = bias_f_.empty() ? nullptr : bias_f_.data();
    }
    return out;
  }

  // Both paths: x channels-last in its own type; the zero point and x_scale, read at run time, plain.
  std::vector<InputLayout> input_layouts() const {
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    req[0] = InputLayout::exact(x_md_);
    if (has_zx_) req[op_.zx] = InputLayout::plain();
    if (op_.to_float) req[2] = InputLayout::plain();
    return req;
  }

  void execute_s16(dnnl::stream& stream) {
    stream.wait();  // x may come from a oneDNN primitive
    const int32_t zx = has_zx_ ? zero_point_value(inputs[op_.zx]->dtype, inputs[op_.zx]->data) : 0;
    auto* acc = static_cast<int32_t*>(scratch);
    auto* wide = reinterpret_cast<int16_t*>(static_cast<char*>(scratch) + acc_bytes_);
    const auto* x = static_cast<const uint8_t*>(inputs[0]->data);
    const auto* packed = static_cast<const int16_t*>(weights_.get_data_handle());
    const int64_t rows = shape_.OH * shape_.OW, images = inputs[0]->shape[0];
    gemm_s16::Output out = kiln_output();
    if (u8s8_) {
      out.column_sums = column_sums_;
      out.za = zx;
    }
    for (int64_t n = 0; n < images; ++n) {
      const uint8_t* xn = x + n * shape_.H * shape_.W * shape_.C;
      void* cn = op_.to_float ? static_cast<void*>(static_cast<float*>(outputs[0]->data) + n * rows * M_)
                              : static_cast<void*>(acc + n * rows * M_);
      if (u8s8_) {
        const auto* b = static_cast<const int8_t*>(weights_.get_data_handle());
        if (pointwise_) {
          gemm_s16::run_u8s8(xn, rows, K_, shape_.C, b, M_, cn, M_, out);
        } else {
          auto* a = reinterpret_cast<uint8_t*>(wide);
          im2col_u8(xn, shape_, geo_, static_cast<uint8_t>(zx), a);
          gemm_s16::run_u8s8(a, rows, K_, gemm_s16::quad_row(K_), b, M_, cn, M_, out);
        }
        continue;
      }
      if (pointwise_) {
        gemm_s16::run(xn, signed_x_, zx, rows, K_, shape_.C, packed, M_, cn, M_, wide, out);
        continue;
      }
      if (signed_x_) {
        im2col_s16(reinterpret_cast<const int8_t*>(xn), shape_, geo_, zx, wide);
      } else {
        im2col_s16(xn, shape_, geo_, zx, wide);
      }
      gemm_s16::run_widened(wide, rows, K_, packed, M_, cn, M_, out);
    }
    if (!op_.to_float) write_output(acc, nullptr, nullptr);
  }

  // The output channels' weight zero points: w_zp per channel, one for all, or none (0).
  std::vector<int32_t> weight_zero_points() const {
    const Tensor* zw = inputs.size() > op_.zw && inputs[op_.zw] ? &inputs[op_.zw]->constant : nullptr;
    std::vector<int32_t> zb(static_cast<size_t>(M_), 0);
    for (int64_t m = 0; zw && m < M_; ++m)
      zb[static_cast<size_t>(m)] =
          zero_point_value(zw->dtype(), static_cast<const uint8_t*>(zw->raw()) + (zw->size() == 1 ? 0 : m));
    return zb;
  }
  int32_t weight_value(const Tensor& wt, int64_t i) const {
    return wt.dtype() == DType::i8 ? wt.data<int8_t>()[i] : static_cast<int32_t>(wt.data<uint8_t>()[i]);
  }
  // max |w - w_zp| over the weights: what keeps the depthwise kernel's f32 sums exact
  int64_t max_abs_weight() const {
    const Tensor& wt = inputs[op_.w]->constant;
    const std::vector<int32_t> zb = weight_zero_points();
    const int64_t per = wt.size() / std::max<int64_t>(M_, 1);
    int64_t most = 0;
    for (int64_t i = 0; i < wt.size(); ++i)
      most = std::max<int64_t>(most, std::abs(weight_value(wt, i) - zb[static_cast<size_t>(i / per)]));
    return most;
  }

  // kiln's depthwise kernel (no VNNI): w [C, 1, KH, KW] less w_zp as floats [KH][KW][C], once
  // per model; x less the run's x_zp converted per row inside the kernel. ConvIntegerToFloat
  // scales its sums as it stores them, channels-last into the output (as the 16-bit GEMM's);
  // ConvInteger and QLinearConv store int32 sums in the working memory, written plain by
  // write_output.
  std::vector<InputLayout> prepare_dw() {
    const Shape& x = inputs[0]->shape;
    const Shape& w = inputs[op_.w]->shape;
    const Shape& y = outputs[0]->shape;
    shape_ = {x[2], x[3], x[1], w[2], w[3], y[2], y[3]};
    impl = "kiln_depthwise:avx2_s8";
    const std::vector<int32_t> zb = weight_zero_points();
    std::string key = "convinteger/dw_f32/zw";
    for (int32_t z : zb) key += cat(",", z);  // the packed values depend on them
    const Tensor& wt = inputs[op_.w]->constant;
    const int64_t C = shape_.C, taps = shape_.KH * shape_.KW;
    weights_ = pack_weights(wt, key, memory::desc({taps * C}, memory::data_type::f32, tag::a), [&](memory& dst) {
      auto* out = static_cast<float*>(dst.get_data_handle());
      for (int64_t c = 0; c < C; ++c)
        for (int64_t k = 0; k < taps; ++k)
          out[k * C + c] = static_cast<float>(weight_value(wt, c * taps + k) - zb[static_cast<size_t>(c)]);
    });
    prepare_kiln_output();
    threads_ = omp_get_max_threads();
    scratch_bytes_ = acc_bytes_ + Arena::aligned(depthwise_s8::scratch_bytes(dw_geometry(), threads_));
    return input_layouts();
  }

  depthwise_s8::Geometry dw_geometry() const {
    depthwise_s8::Geometry g;
    g.H = shape_.H, g.W = shape_.W, g.C = shape_.C, g.KH = shape_.KH, g.KW = shape_.KW, g.OH = shape_.OH, g.OW = shape_.OW;
    g.stride_h = geo_.strides[0], g.stride_w = geo_.strides[1], g.pad_t = geo_.pad_l[0], g.pad_l = geo_.pad_l[1];
    g.dilation_h = geo_.dilations[0] + 1, g.dilation_w = geo_.dilations[1] + 1;
    return g;
  }

  void execute_dw(dnnl::stream& stream) {
    stream.wait();  // x may come from a oneDNN primitive
    const int32_t zx = has_zx_ ? zero_point_value(inputs[op_.zx]->dtype, inputs[op_.zx]->data) : 0;
    auto* acc = static_cast<int32_t*>(scratch);
    void* ring = static_cast<char*>(scratch) + acc_bytes_;
    const auto* x = static_cast<const uint8_t*>(inputs[0]->data);
    const auto* w = static_cast<const float*>(weights_.get_data_handle());
    const depthwise_s8::Geometry g = dw_geometry();
    const int64_t rows = g.OH * g.OW, images = inputs[0]->shape[0];
    gemm_s16::Output out = kiln_output();
    for (int64_t n = 0; n < images; ++n) {
      void* yn = op_.to_float ? static_cast<void*>(static_cast<float*>(outputs[0]->data) + n * rows * M_)
                              : static_cast<void*>(acc + n * rows * M_);
      depthwise_s8::run(x + n * g.H * g.W * g.C, signed_x_, zx, w, g, yn, out, ring, threads_);
    }
    if (!op_.to_float) write_output(acc, nullptr, nullptr);
  }

  // ConvIntegerToFloat: w_scale per channel and the bias, as constants; x_scale at run time.
  void prepare_scaling() {
    const Tensor& ws = inputs[3]->constant;
    w_scale_.assign(static_cast<size_t>(M_), 0.0f);
    for (int64_t m = 0; m < M_; ++m) w_scale_[static_cast<size_t>(m)] = ws.data<float>()[ws.size() == 1 ? 0 : m];
    bias_f_.clear();
    if (inputs.size() > 6 && inputs[6]) {
      const Tensor& b = inputs[6]->constant;
      bias_f_.assign(b.data<float>(), b.data<float>() + b.size());
    }
    scale_.assign(static_cast<size_t>(M_), 0.0f);
  }
  // x_scale * w_scale[m], rounded once as the Mul of the two scales computes it
  void scale_for_run() {
    const float xs = *static_cast<const float*>(inputs[2]->data);
    for (size_t m = 0; m < scale_.size(); ++m) scale_[m] = xs * w_scale_[m];
  }

  // QLinearConv: y = saturate(round_half_even(float(acc + B) * mult[m]) + y_zp), as the
  // reference kernel computes it.
  void prepare_requantization() {
    requant_ = requantization(inputs[1]->constant, inputs[4]->constant, inputs[6]->constant, inputs[7]->constant, M_);
    bias_.assign(static_cast<size_t>(M_), 0);
    if (inputs.size() > 8 && inputs[8])
      for (int64_t m = 0; m < M_; ++m) bias_[static_cast<size_t>(m)] = inputs[8]->constant.data<int32_t>()[m];
  }

  // S[n, p, g] = sum over the window at output position p of T[n, q, g], T[n, q, g] the sum of
  // (x - zx) over group g's channels at input position q. Padding adds nothing (x - zx is 0
  // there, as the operator pads x with its zero point).
  void window_sums(int32_t zx, int32_t* t, int32_t* s) const {
    const Shape& xs = inputs[0]->shape;
    const Shape& ys = outputs[0]->shape;
    const int64_t N = xs[0], C = xs[1], G = group_, Cg = C / G;
    const auto* x = static_cast<const uint8_t*>(inputs[0]->data);
    const bool u8 = inputs[0]->dtype == DType::u8;
    const int64_t rows = N * in_positions_;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* px = x + r * C;
      for (int64_t g = 0; g < G; ++g) {
        int32_t sum = 0;
        if (u8) {
          for (int64_t c = 0; c < Cg; ++c) sum += px[g * Cg + c];
        } else {
          for (int64_t c = 0; c < Cg; ++c) sum += static_cast<int8_t>(px[g * Cg + c]);
        }
        t[r * G + g] = sum - static_cast<int32_t>(Cg) * zx;
      }
    }
    // spatial dims as (D, H, W), missing ones 1
    int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1}, st[3] = {1, 1, 1}, dl[3] = {1, 1, 1},
            pl[3] = {0, 0, 0};
    for (size_t i = 0; i < sp_; ++i) {
      const size_t j = 3 - sp_ + i;
      in[j] = xs[2 + i];
      out[j] = ys[2 + i];
      k[j] = geo_.kernel[i];
      st[j] = geo_.strides[i];
      dl[j] = geo_.dilations[i] + 1;
      pl[j] = geo_.pad_l[i];
    }
    const int64_t out_rows = N * out[0] * out[1];
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < out_rows; ++r) {
      const int64_t n = r / (out[0] * out[1]), od = (r / out[1]) % out[0], oh = r % out[1];
      int32_t* srow = s + r * out[2] * G;
      std::fill(srow, srow + out[2] * G, 0);
      for (int64_t kd = 0; kd < k[0]; ++kd) {
        const int64_t id = od * st[0] - pl[0] + kd * dl[0];
        if (id < 0 || id >= in[0]) continue;
        for (int64_t kh = 0; kh < k[1]; ++kh) {
          const int64_t ih = oh * st[1] - pl[1] + kh * dl[1];
          if (ih < 0 || ih >= in[1]) continue;
          const int32_t* trow = t + ((n * in[0] + id) * in[1] + ih) * in[2] * G;
          for (int64_t ow = 0; ow < out[2]; ++ow)
            for (int64_t kw = 0; kw < k[2]; ++kw) {
              const int64_t iw = ow * st[2] - pl[2] + kw * dl[2];
              if (iw < 0 || iw >= in[2]) continue;
              for (int64_t g = 0; g < G; ++g) srow[ow * G + g] += trow[iw * G + g];
            }
        }
      }
    }
  }

  // y[n, m, p] (plain) = acc[n, p, m] + 128 acc_hi[n, p, m] + c[m] S[n, p, group(m)], in
  // wrapping 32-bit arithmetic (QLinearConv: + B[m], then requantized). Blocks of positions keep
  // the channels-last reads in cache.
  void write_output(const int32_t* acc, const int32_t* acc_hi, const int32_t* s) const {
    if (op_.to_float) return write_output_as(static_cast<float*>(outputs[0]->data), acc, acc_hi, s);
    if (!op_.qlinear) return write_output_as(static_cast<int32_t*>(outputs[0]->data), acc, acc_hi, s);
    if (requant_.signed_out) return write_output_as(static_cast<int8_t*>(outputs[0]->data), acc, acc_hi, s);
    write_output_as(static_cast<uint8_t*>(outputs[0]->data), acc, acc_hi, s);
  }

  template <typename Y>
  void write_output_as(Y* y, const int32_t* acc, const int32_t* acc_hi, const int32_t* s) const {
    const int64_t N = outputs[0]->shape[0], M = M_, P = out_positions_, G = group_, Mg = M / G;
    constexpr int64_t kBlock = 64;
    const int64_t blocks = (P + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < N * blocks; ++b) {
      const int64_t n = b / blocks, p0 = (b % blocks) * kBlock, p1 = std::min(P, p0 + kBlock);
      for (int64_t m = 0; m < M; ++m) {
        const uint32_t c = static_cast<uint32_t>(c_[static_cast<size_t>(m)]);
        const int64_t g = m / Mg;
        Y* out = y + (n * M + m) * P;
        for (int64_t p = p0; p < p1; ++p) {
          const int64_t i = (n * P + p) * M + m;
          uint32_t v = static_cast<uint32_t>(acc[i]);
          if (acc_hi) v += 128u * static_cast<uint32_t>(acc_hi[i]);
          if (correct_) v += c * static_cast<uint32_t>(s[(n * P + p) * G + g]);
          if constexpr (std::is_same_v<Y, int32_t>) {
            out[p] = static_cast<int32_t>(v);
          } else if constexpr (std::is_same_v<Y, float>) {
            // the Cast, the scale Mul and the bias Add, each rounded to f32 (no contraction)
            const float scaled = static_cast<float>(static_cast<int32_t>(v)) * scale_[static_cast<size_t>(m)];
            out[p] = bias_f_.empty() ? scaled : scaled + bias_f_[static_cast<size_t>(m)];
          } else {
            out[p] = requantize_conv<Y>(static_cast<int32_t>(v + static_cast<uint32_t>(bias_[static_cast<size_t>(m)])),
                                        requant_.mult[static_cast<size_t>(m)], requant_.zp);
          }
        }
      }
    }
  }

  Operands op_;
  Requantization requant_;      // QLinearConv
  std::vector<int32_t> bias_;   // QLinearConv: B
  std::vector<float> w_scale_, bias_f_, scale_;  // ConvIntegerToFloat: per channel; scale_ this run's
  size_t sp_ = 0;
  int64_t group_ = 1, M_ = 0, in_positions_ = 1, out_positions_ = 1;
  ConvGeometry geo_;
  memory::desc x_md_, src_md_, acc_md_;  // x as given (u8 / s8), as the primitive reads it (u8)
  dnnl::convolution_forward::primitive_desc pd_;
  dnnl::convolution_forward prim_;
  memory weights_, weights_hi_;
  std::vector<int32_t> c_;
  bool has_zx_ = false, signed_x_ = false, split_ = false, correct_ = false;
  // kiln's 16-bit GEMM or depthwise kernel (no VNNI)
  bool s16_ = false, pointwise_ = false, dw_ = false, u8s8_ = false;
  const int32_t* column_sums_ = nullptr;  // u8s8: in the packed weights' memory
  int threads_ = 1;  // the team the depthwise kernel's working memory is planned for
  Im2colShape shape_;
  int64_t K_ = 0;
  size_t acc_bytes_ = 0;
  int32_t zx_ = 0;  // the run's activation zero point, for the primitive
  size_t hi_offset_ = 0, sums_offset_ = 0, window_offset_ = 0, x_offset_ = 0, scratch_bytes_ = 0;
};

}  // namespace

namespace {

// The operands ConvInteger and QLinearConv share: x (static, 1-3 spatial dims), constant
// weights of x's rank whose channels divide into the groups, and the two zero points.
bool conv_operands_ok(const ir::Node& n, const ir::Value* x, const ir::Value* w, const ir::Value* zx,
                      const ir::Value* zw) {
  if (!x || !w || !w->is_constant() || !x->type.shape.is_static()) return false;
  if (!is_int8(x->type.dtype) || !is_int8(w->constant().dtype())) return false;
  const size_t rank = x->type.shape.rank();
  if (rank < 3 || rank > 5 || w->constant().rank() != rank) return false;
  const int64_t group = n.attr_i("group", 1), M = w->constant().shape()[0];
  if (group < 1 || M % group != 0 || x->type.shape.dims[1].value != w->constant().shape()[1] * group) return false;
  return activation_zero_point_ok(zx, x->type.dtype) && weight_zero_point_ok(zw, w->constant().dtype(), M);
}

// kiln ConvIntegerToFloat (x, w, x_scale, w_scale, x_zp?, w_zp?, bias?): ConvInteger's operands,
// x_scale one f32 value (DynamicQuantizeLinear's, read at run time, or a constant), w_scale a
// constant f32 of one value or one per output channel, the bias a constant f32 per channel.
bool conv_integer_to_float_supports(const ir::Node& n) {
  if (n.num_inputs() < 4 || !conv_operands_ok(n, n.input(0), n.input(1), n.input(4), n.input(5))) return false;
  const int64_t M = n.input(1)->constant().shape()[0];
  const ir::Value *xs = n.input(2), *ws = n.input(3), *b = n.input(6);
  if (!xs || xs->type.dtype != DType::f32 || !xs->type.shape.is_static() || shape_size(xs->type.shape.to_shape()) != 1)
    return false;
  if (!ws || !ws->is_constant() || ws->constant().dtype() != DType::f32) return false;
  if (ws->constant().size() != 1 && ws->constant().size() != M) return false;
  return !b || (b->is_constant() && b->constant().dtype() == DType::f32 && b->constant().size() == M);
}

}  // namespace

bool conv_integer_supports(const ir::Node& n) {
  if (n.op_type() == "ConvIntegerToFloat" && n.domain() == "kiln") return conv_integer_to_float_supports(n);
  if (n.op_type() != "ConvInteger" || !n.is_onnx_domain() || n.num_inputs() < 2) return false;
  return conv_operands_ok(n, n.input(0), n.input(1), n.input(2), n.input(3));
}

bool qlinear_conv_supports(const ir::Node& n) {
  if (n.op_type() != "QLinearConv" || !n.is_onnx_domain() || n.num_inputs() < 8) return false;
  const ir::Value *w = n.input(3), *zy = n.input(7), *b = n.input(8);
  if (!n.input(2) || !n.input(5) || !zy || !conv_operands_ok(n, n.input(0), w, n.input(2), n.input(5))) return false;
  const int64_t M = w->constant().shape()[0];
  if (!constant_scale(n.input(1)) || !constant_scale(n.input(4), M) || !constant_scale(n.input(6))) return false;
  if (!zy->is_constant() || !is_int8(zy->constant().dtype()) || zy->constant().size() != 1) return false;
  return !b || (b->is_constant() && b->constant().dtype() == DType::i32 && b->constant().size() == M);
}

std::unique_ptr<Node> make_conv_integer_node(const ir::Node& n) { return std::make_unique<ConvIntegerNode>(n); }

}  // namespace kiln::cpu
