// MatMulInteger: ONNX MatMulInteger with A [..., M, K] (u8 / s8, per-tensor zero point, often
// DynamicQuantizeLinear's output) and a constant B [K, N] (u8 / s8, zero point per tensor or
// per column), int32 result, on oneDNN's int8 matmul, exact in int32 as the operator defines.
//
// B becomes s8 plus a per-column offset c (int8_util.hpp), so that
//   Y[r, n] = ((A - za) B')[r, n] + c[n] * sum_k (A[r, k] - za).
// oneDNN computes the product (rows of A's batch dims flattened; s8 A moved to u8 by + 128 with
// its zero point; za a run-time value), this node the row sums and the sum in int32, in place
// in the plain output. Without VNNI B is split in two and the product runs twice.
// com.microsoft MatMulIntegerToFloat (a static QDQ model's projections) takes the same path with
// a float result: float(Y) * (a_scale * b_scale[n]) + bias[n], done by the primitive (output
// scales and a binary-add post-op) when B needs no correction and no split, else by the node.
// Where oneDNN's int8 kernels are not exact (no VNNI) and the CPU has AVX2, kiln's 16-bit GEMM
// (gemm_s16.hpp) computes the product instead, both zero points subtracted before it
// multiplies: one pass, no correction, about twice the split pair's speed.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/strings.hpp"
#include "cpu/arena.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/gemm_s16.hpp"
#include "cpu/weights_cache.hpp"
#include "cpu/nodes/int8_util.hpp"
#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

// Where each operand sits: MatMulInteger (a, b, a_zp, b_zp), QLinearMatMul (a, a_scale, a_zp,
// b, b_scale, b_zp, y_scale, y_zp) or MatMulIntegerToFloat (a, b, a_scale, b_scale, a_zp, b_zp,
// bias).
struct Operands {
  size_t b = 1, za = 2, zb = 3;
  bool qlinear = false;   // QLinearMatMul: the output requantized
  bool to_float = false;  // MatMulIntegerToFloat: the output scaled to float, + bias
};

class MatMulIntegerNode : public Node {
 public:
  explicit MatMulIntegerNode(const ir::Node& n) : Node(n) {
    if (n.op_type() == "QLinearMatMul") op_ = {3, 2, 5, true, false};
    if (n.op_type() == "MatMulIntegerToFloat") op_ = {1, 4, 5, false, true};
  }
  const char* type() const override {
    return op_.qlinear ? "QLinearMatMul" : op_.to_float ? "MatMulIntegerToFloat" : "MatMulInteger";
  }
  NodeKind kind() const override { return NodeKind::MatMulInteger; }
  size_t scratch_bytes() const override { return scratch_bytes_; }

  std::vector<InputLayout> prepare() override {
    const Shape& a = inputs[0]->shape;
    const Tensor& b = inputs[op_.b]->constant;
    K_ = a.back();
    N_ = b.shape()[1];
    R_ = shape_size(a) / std::max<int64_t>(K_, 1);
    signed_a_ = inputs[0]->dtype == DType::i8;
    has_za_ = inputs.size() > op_.za && inputs[op_.za];
    s16_ = !exact_int8_kernels() && gemm_s16::available();
    if (s16_) return prepare_s16();
    split_ = !exact_int8_kernels();

    c_ = weight_offsets(b, inputs.size() > op_.zb && inputs[op_.zb] ? &inputs[op_.zb]->constant : nullptr, N_);
    correct_ = std::any_of(c_.begin(), c_.end(), [](int32_t c) { return c != 0; });
    if (op_.to_float) prepare_to_float();
    // the primitive scales to float itself when the int32 product is the whole result (and the
    // scale is known now)
    direct_float_ = op_.to_float && !split_ && !correct_ && !runtime_a_scale_;
    src_md_ = memory::desc({R_, K_}, memory::data_type::u8, tag::ab);
    dst_md_ = memory::desc({R_, N_}, memory::data_type::s32, tag::ab);
    const memory::desc out_md({R_, N_}, direct_float_ ? memory::data_type::f32 : memory::data_type::s32, tag::ab);
    dnnl::matmul::desc d(src_md_, memory::desc({K_, N_}, memory::data_type::s8, tag::any), out_md);
    dnnl::primitive_attr attr;
    if (has_za_ || signed_a_) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    if (direct_float_) {
      attr.set_output_scales(scale_.size() > 1 ? 1 << 1 : 0, scale_);
      if (!bias_.empty()) {
        dnnl::post_ops po;
        po.append_binary(dnnl::algorithm::binary_add, memory::desc({1, N_}, memory::data_type::f32, tag::ab));
        attr.set_post_ops(po);
      }
    }
    pd_ = dnnl::matmul::primitive_desc(d, attr, cpu_engine());
    out_md_ = out_md;
    bias_mem_ = direct_float_ && !bias_.empty()
                   ? memory(memory::desc({1, N_}, memory::data_type::f32, tag::ab), cpu_engine(), bias_.data())
                   : memory();
    prim_ = dnnl::matmul(pd_);
    impl = int8_impl_name(pd_.impl_info_str(), split_);

    const PackedInt8 packed = pack_int8_weights(b, split_, memory::desc({K_, N_}, memory::data_type::s8, tag::ab),
                                                pd_.weights_desc(), "matmulinteger");
    weights_ = packed.main;
    weights_hi_ = packed.hi;
    if (op_.qlinear)  // y = saturate(round_half_even(float(acc) * mult[n]) + y_zp), as the reference
      requant_ = requantization(inputs[1]->constant, inputs[4]->constant, inputs[6]->constant, inputs[7]->constant, N_);

    // working memory: A moved to u8, the int32 product (QLinearMatMul; else the output holds it),
    // the second product (split weights)
    a_bytes_ = signed_a_ ? Arena::aligned(static_cast<size_t>(R_ * K_)) : 0;
    acc_bytes_ = op_.qlinear || (op_.to_float && !direct_float_) ? Arena::aligned(dst_md_.get_size()) : 0;  // else the output
    hi_bytes_ = split_ ? Arena::aligned(dst_md_.get_size()) : 0;
    scratch_bytes_ = a_bytes_ + acc_bytes_ + hi_bytes_;

    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    req[0] = InputLayout::plain();
    if (has_za_) req[op_.za] = InputLayout::plain();
    if (runtime_a_scale_) req[2] = InputLayout::plain();
    return req;  // the output stays plain
  }

  void execute(dnnl::stream& stream) override {
    const int32_t za = has_za_ ? zero_point_value(inputs[op_.za]->dtype, inputs[op_.za]->data) : 0;
    auto* base = static_cast<char*>(scratch);
    if (op_.to_float && runtime_a_scale_) {  // a DynamicQuantizeLinear's scale: a_scale * b_scale[n] now
      stream.wait();
      const float sa = *static_cast<const float*>(inputs[2]->data);
      for (size_t n = 0; n < scale_.size(); ++n) scale_[n] = sa * b_scale_[n];
    }
    if (s16_) {
      stream.wait();  // A may come from a oneDNN primitive
      void* y = acc_bytes_ ? base + a_bytes_ : outputs[0]->data;
      gemm_s16::Output out;
      if (op_.to_float) out = {scale_.data(), static_cast<int64_t>(scale_.size()), bias_.empty() ? nullptr : bias_.data()};
      if (u8s8_) {
        out.column_sums = column_sums_;
        out.za = za;
        gemm_s16::run_u8s8(static_cast<const uint8_t*>(inputs[0]->data), R_, K_, K_,
                           static_cast<const int8_t*>(weights_.get_data_handle()), N_, y, N_, out);
      } else {
        gemm_s16::run(inputs[0]->data, signed_a_, za, R_, K_, K_, static_cast<const int16_t*>(weights_.get_data_handle()),
                      N_, y, N_, base, out);
      }
      if (op_.qlinear) finish(static_cast<const uint8_t*>(inputs[0]->data), za, static_cast<int32_t*>(y), nullptr);
      return;
    }
    const auto* a = static_cast<const uint8_t*>(inputs[0]->data);
    memory src(src_md_, cpu_engine(), const_cast<uint8_t*>(a));
    za_ = za;
    if (signed_a_) {
      stream.wait();  // A may come from a oneDNN primitive
      auto* moved = reinterpret_cast<uint8_t*>(base);
      s8_to_u8(a, moved, R_ * K_);
      src = memory(src_md_, cpu_engine(), moved);
      za_ = za + 128;
    }
    auto* y = acc_bytes_ ? reinterpret_cast<int32_t*>(base + a_bytes_) : static_cast<int32_t*>(outputs[0]->data);
    memory zp(memory::desc({1}, memory::data_type::s32, tag::a), cpu_engine(), &za_);
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights_}, {DNNL_ARG_DST, memory(out_md_, cpu_engine(), y)}};
    if (has_za_ || signed_a_) args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] = zp;
    if (bias_mem_) args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] = bias_mem_;
    prim_.execute(stream, args);
    auto* hi = reinterpret_cast<int32_t*>(base + a_bytes_ + acc_bytes_);
    if (split_) {
      args[DNNL_ARG_WEIGHTS] = weights_hi_;
      args[DNNL_ARG_DST] = memory(dst_md_, cpu_engine(), hi);
      prim_.execute(stream, args);
    }
    stream.wait();
    if (!split_ && !correct_ && !op_.qlinear && !op_.to_float) return;
    if (direct_float_) return;
    finish(a, za, y, hi);
  }

 private:
  // The int32 product `y` completed in place (the second product `hi` of split weights, B's
  // correction) and turned into the output: int32, requantized (QLinearMatMul) or float
  // (MatMulIntegerToFloat).
  void finish(const uint8_t* a, int32_t za, int32_t* y, const int32_t* hi) {
    void* out = outputs[0]->data;
    const int64_t K = K_, N = N_;
    const bool sgn = signed_a_;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < R_; ++r) {
      uint32_t sum = 0;  // of (A - za) over the row, wrapping like the int32 result
      if (correct_) {
        const uint8_t* ar = a + r * K;
        if (sgn) {
          for (int64_t k = 0; k < K; ++k) sum += static_cast<uint32_t>(static_cast<int32_t>(static_cast<int8_t>(ar[k])));
        } else {
          for (int64_t k = 0; k < K; ++k) sum += ar[k];
        }
        sum -= static_cast<uint32_t>(K) * static_cast<uint32_t>(za);
      }
      int32_t* yr = y + r * N;
      for (int64_t n = 0; n < N; ++n) {
        uint32_t v = static_cast<uint32_t>(yr[n]);
        if (split_) v += 128u * static_cast<uint32_t>(hi[r * N + n]);
        if (correct_) v += static_cast<uint32_t>(c_[static_cast<size_t>(n)]) * sum;
        if (op_.to_float) {
          static_cast<float*>(out)[r * N + n] = static_cast<float>(static_cast<int32_t>(v)) *
                                                    scale_[scale_.size() > 1 ? static_cast<size_t>(n) : 0] +
                                                (bias_.empty() ? 0.0f : bias_[static_cast<size_t>(n)]);
        } else if (!op_.qlinear) {
          yr[n] = static_cast<int32_t>(v);
        } else if (requant_.signed_out) {
          static_cast<int8_t*>(out)[r * N + n] =
              requantize_matmul<int8_t>(static_cast<int32_t>(v), requant_.mult[static_cast<size_t>(n)], requant_.zp);
        } else {
          static_cast<uint8_t*>(out)[r * N + n] =
              requantize_matmul<uint8_t>(static_cast<int32_t>(v), requant_.mult[static_cast<size_t>(n)], requant_.zp);
        }
      }
    }
  }

  // kiln's 16-bit GEMM (no VNNI): B - zb packed once per model, the product in one pass into
  // the output (int32) or the scratch (then finish()).
  std::vector<InputLayout> prepare_s16() {
    const Tensor& b = inputs[op_.b]->constant;
    const Tensor* zb = inputs.size() > op_.zb && inputs[op_.zb] ? &inputs[op_.zb]->constant : nullptr;
    std::vector<int32_t> zbv(static_cast<size_t>(N_), 0);
    uint64_t hash = 1469598103934665603ull;  // FNV-1a of the zero points: the packed values depend on them
    for (int64_t n = 0; zb && n < N_; ++n) {
      zbv[static_cast<size_t>(n)] = zero_point_value(zb->dtype(), static_cast<const char*>(zb->raw()) +
                                                                       (zb->size() == 1 ? 0 : n));
      hash = (hash ^ static_cast<uint32_t>(zbv[static_cast<size_t>(n)])) * 1099511628211ull;
    }
    split_ = correct_ = direct_float_ = false;
    if (op_.to_float) prepare_to_float();
    // u8 A times B - zb that no pair can overflow (7-bit weights): u8 x s8 on vpmaddubsw, A as
    // it is, za * the column sums off as each sum is stored; else both as 16-bit values
    PackedU8S8 u8s8;
    if (!signed_a_ && K_ % 4 == 0)
      u8s8 = pack_u8s8_if_safe(b, cat("matmulinteger/u8s8/zb", hash), K_, N_, [&](std::vector<int8_t>* d) {
        return s8_weights_less_zero_points(b.raw(), b.dtype() == DType::i8, K_, zbv, d);
      });
    u8s8_ = static_cast<bool>(u8s8.packed);
    if (u8s8_) {
      impl = gemm_s16::impl_name_u8s8();
      weights_ = u8s8.packed;
      column_sums_ = u8s8.column_sums;
    } else {
      impl = gemm_s16::impl_name();
      const memory::desc packed({gemm_s16::packed_size(K_, N_) * 2}, memory::data_type::u8, tag::a);
      weights_ = pack_weights(b, cat("matmulinteger/s16/zb", hash), packed, [&](memory& dst) {
        gemm_s16::pack_b(b.raw(), b.dtype() == DType::i8, K_, N_, zbv.data(),
                         static_cast<int16_t*>(dst.get_data_handle()));
      }, WeightsCache::Pages::streamed);
    }
    if (op_.qlinear)
      requant_ = requantization(inputs[1]->constant, inputs[4]->constant, inputs[6]->constant, inputs[7]->constant, N_);
    // working memory: A widened to 16 bits, then the int32 product unless the output holds it
    // (MatMulInteger's int32, MatMulIntegerToFloat's float: scaled as it is stored)
    a_bytes_ = u8s8_ ? 0 : Arena::aligned(gemm_s16::scratch_bytes(R_, K_));
    acc_bytes_ = op_.qlinear ? Arena::aligned(static_cast<size_t>(R_ * N_) * 4) : 0;
    hi_bytes_ = 0;
    scratch_bytes_ = a_bytes_ + acc_bytes_;
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    req[0] = InputLayout::plain();
    if (has_za_) req[op_.za] = InputLayout::plain();
    if (runtime_a_scale_) req[2] = InputLayout::plain();
    return req;
  }

  // MatMulIntegerToFloat: a_scale * b_scale[n] (as the reference computes it; per run when
  // a_scale is computed at run time) and the bias
  void prepare_to_float() {
    const Tensor& sb = inputs[3]->constant;
    b_scale_.assign(sb.data<float>(), sb.data<float>() + sb.size());
    runtime_a_scale_ = inputs[2]->kind != Edge::Kind::constant;
    const float sa = runtime_a_scale_ ? 1.0f : inputs[2]->constant.data<float>()[0];
    scale_.resize(b_scale_.size());
    for (size_t i = 0; i < b_scale_.size(); ++i) scale_[i] = sa * b_scale_[i];
    bias_.clear();
    if (inputs.size() > 6 && inputs[6]) bias_.assign(inputs[6]->constant.data<float>(), inputs[6]->constant.data<float>() + N_);
  }

  Operands op_;
  std::vector<float> scale_, bias_;  // MatMulIntegerToFloat
  std::vector<float> b_scale_;       // ... its b_scale
  bool runtime_a_scale_ = false;     // ... a_scale an input computed at run time
  bool direct_float_ = false;        // ... scaled by the primitive
  memory bias_mem_;                   // ... over bias_, the primitive's post-op operand
  memory::desc out_md_;              // what the primitive writes
  Requantization requant_;  // QLinearMatMul
  size_t acc_bytes_ = 0;
  int64_t R_ = 0, K_ = 0, N_ = 0;
  memory::desc src_md_, dst_md_;
  dnnl::matmul::primitive_desc pd_;
  dnnl::matmul prim_;
  memory weights_, weights_hi_;
  std::vector<int32_t> c_;
  bool has_za_ = false, signed_a_ = false, split_ = false, correct_ = false;
  bool s16_ = false;  // kiln's 16-bit GEMM instead of oneDNN's (no VNNI)
  bool u8s8_ = false;  // its u8 x s8 variant (pair-safe weights)
  const int32_t* column_sums_ = nullptr;  // u8s8: in the packed weights' memory
  int32_t za_ = 0;  // the run's zero point of A, for the primitive
  size_t a_bytes_ = 0, hi_bytes_ = 0, scratch_bytes_ = 0;
};

}  // namespace

namespace {

// The operands MatMulInteger and QLinearMatMul share: A (static, rank >= 2), a constant 2-D B
// whose rows match A's last dim, and the two zero points.
bool matmul_operands_ok(const ir::Value* a, const ir::Value* b, const ir::Value* za, const ir::Value* zb) {
  if (!a || !b || !b->is_constant() || !a->type.shape.is_static() || a->type.shape.rank() < 2) return false;
  const Tensor& bt = b->constant();
  if (!is_int8(a->type.dtype) || !is_int8(bt.dtype()) || bt.rank() != 2) return false;
  if (a->type.shape.dims.back().value != bt.shape()[0]) return false;
  return activation_zero_point_ok(za, a->type.dtype) && weight_zero_point_ok(zb, bt.dtype(), bt.shape()[1]);
}

}  // namespace

bool matmul_integer_supports(const ir::Node& n) {
  if (n.op_type() != "MatMulInteger" || !n.is_onnx_domain() || n.num_inputs() < 2) return false;
  return matmul_operands_ok(n.input(0), n.input(1), n.input(2), n.input(3));
}

bool qlinear_matmul_supports(const ir::Node& n) {
  if (n.op_type() != "QLinearMatMul" || !n.is_onnx_domain() || n.num_inputs() != 8) return false;
  const ir::Value *b = n.input(3), *zy = n.input(7);
  if (!n.input(2) || !n.input(5) || !zy || !matmul_operands_ok(n.input(0), b, n.input(2), n.input(5))) return false;
  const int64_t N = b->constant().shape()[1];
  if (!constant_scale(n.input(1)) || !constant_scale(n.input(4), N) || !constant_scale(n.input(6))) return false;
  return zy->is_constant() && is_int8(zy->constant().dtype()) && zy->constant().size() == 1;
}

bool matmul_integer_to_float_supports(const ir::Node& n) {
  if (n.op_type() != "MatMulIntegerToFloat" || n.domain() != "com.microsoft" || n.num_inputs() < 4) return false;
  const ir::Value *b = n.input(1), *bias = n.input(6);
  if (!matmul_operands_ok(n.input(0), b, n.input(4), n.input(5))) return false;
  const int64_t N = b->constant().shape()[1];
  // a_scale one float, a constant or computed at run time (FuseMatMulIntegerToFloat: a
  // DynamicQuantizeLinear's); b_scale constant
  const ir::Value* sa = n.input(2);
  const bool sa_ok = constant_scale(sa) || (sa && sa->type.dtype == DType::f32 && sa->type.shape.is_static() &&
                                            shape_size(sa->type.shape.to_shape()) == 1);
  if (!sa_ok || !constant_scale(n.input(3), N)) return false;
  return !bias || (bias->is_constant() && bias->constant().dtype() == DType::f32 && bias->constant().size() == N);
}

std::unique_ptr<Node> make_matmul_integer_node(const ir::Node& n) { return std::make_unique<MatMulIntegerNode>(n); }

}  // namespace kiln::cpu
