// FullyConnected: an activation times a constant 2-D weight on oneDNN's matmul — ONNX
// Gemm with constant B (transA 0/1, transB 0/1; alpha folded into the weights, beta*C
// into the bias, C constant and broadcastable to [M, N]) and MatMul with a constant
// [K, N] weight and an activation [..., M, K] (leading dims flattened into M). The
// weights are reordered once per compiled model (weights cache, shared by every stream)
// into the layout the primitive picks
// (format any: blocked for the brgemm kernels), which is what makes it fast; the
// activation and the output are plain.
//
// matmul vs inner_product_forward, single thread on AVX-512 (brgemm kernels for both),
// [128,768]x[768,3072], [128,768]x[768,768], [128,3072]x[3072,768], [1,2048]x[2048,1000]:
// equal within 2% once the weights are in the primitive's layout (a plain [768,3072]
// weight is up to 6x slower). matmul is used: it also takes a 2-D bias through a
// binary post-op and strided (transposed) activations.
#include <cstdio>
#include <cstring>

#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/gemm_f32.hpp"
#include "cpu/isa.hpp"
#include "cpu/nodes/node_factory.hpp"
#include "cpu/weights_cache.hpp"

namespace kiln::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

bool static_f32(const ir::Value* v) {
  return v && v->type.dtype == DType::f32 && v->type.shape.is_static() && v->type.shape.elements() > 0;
}


// A post-op operand (scalar or one value per output column, in the output's rank)
// as the [1, N] / [1, 1] operand of the 2-D matmul.
PostOpList as_2d(PostOpList list) {
  for (PostOp& op : list.ops)
    if (op.constant.defined()) op.constant = op.constant.reshaped({1, op.constant.size()});
  return list;
}

class FullyConnectedNode : public Node {
 public:
  explicit FullyConnectedNode(const ir::Node& n) : Node(n) {}
  const char* type() const override { return "FullyConnected"; }
  NodeKind kind() const override { return NodeKind::FullyConnected; }
  PostOpList* post_ops() override { return &post_ops_; }

  bool accepts_post_ops(const std::vector<PostOp>& extra, std::string* why) override {
    auto trial = post_ops_.with(extra, /*allow_sum=*/false, "FullyConnected", why);
    if (!trial) return false;
    setup();
    // kiln's GEMM runs the node (shapes that vary) and its epilogue computes these post-ops:
    // what oneDNN would do with them does not matter, and asking it costs a new shape 0.1 ms
    if (gemm_f32::Epilogue e; kiln_gemm_ && epilogue_of(*trial, e)) return true;
    return keeps_jit(*trial, post_ops_, [&](PostOpList& l) { return impl_for(l); }, "matmul", why, fusion_decisions,
                     cat(name, " -> ", outputs.at(0)->name));
  }

  std::vector<InputLayout> prepare() override {
    setup();
    if (kiln_gemm_ && make_epilogue()) return prepare_kiln_gemm();
    kiln_gemm_ = false;
    if (runtime_m_) {  // one primitive for every M (cached_primitive: made once per thread)
      try {
        auto made = cached_primitive<dnnl::matmul::primitive_desc, dnnl::matmul>(
            matmul_desc(memory::desc({DNNL_RUNTIME_DIM_VAL, K_}, in_dt_, tag::ab),
                        memory::desc({DNNL_RUNTIME_DIM_VAL, N_}, memory::data_type::f32, tag::ab)),
            attr_for(post_ops_));
        pd_ = made.pd;
        prim_ = made.prim;
        quick_impl = true;
      } catch (const dnnl::error&) {  // a post-op the runtime-dims kernel does not take
        runtime_m_ = false;
      }
    }
    if (!runtime_m_) {
      auto made = cached_primitive<dnnl::matmul::primitive_desc, dnnl::matmul>(matmul_desc(src_md(), dst_md()),
                                                                               attr_for(post_ops_));
      pd_ = made.pd;
      prim_ = made.prim;
    }
    impl = pd_.impl_info_str();

    // weights: alpha * B as [K, N] (strided view of B^T when transB), reordered once
    // (through the compiled model's weights cache: packed once, shared by every stream)
    const auto f32 = memory::data_type::f32;
    const Tensor& w = inputs[1]->constant;
    weights_ = pack_weights(w, weights_key(), pd_.weights_desc(),
                            [&](memory& dst) {
                              const float* pw = w.data<float>();
                              std::vector<float> scaled;
                              if (alpha_ != 1.0f) {
                                scaled.assign(pw, pw + K_ * N_);
                                for (float& v : scaled) v *= alpha_;
                                pw = scaled.data();
                              }
                              memory::desc wplain = tb_ ? memory::desc({K_, N_}, f32, memory::dims{1, K_})
                                                        : memory::desc({K_, N_}, f32, tag::ab);
                              memory wsrc(wplain, cpu_engine(), const_cast<float*>(pw));
                              reorder_into(wsrc, dst);
                            },
                            WeightsCache::Pages::streamed);
    if (!bias_vals_.empty()) {
      bias_ = memory(bias_md(), cpu_engine());
      std::memcpy(bias_.get_data_handle(), bias_vals_.data(), bias_vals_.size() * sizeof(float));
    }
    outputs[0]->blocked.reset();
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    req[0] = InputLayout::plain();
    if (in_dt_ == memory::data_type::bf16)  // the activation as row-major bf16: the graph converts it
      req[0] = InputLayout::exact(*plain_desc(inputs[0]->shape, DType::bf16));
    return req;
  }

  void execute(dnnl::stream& stream) override {
    if (kiln_gemm_) {
      gemm_f32::run(static_cast<const float*>(inputs[0]->data), M_, K_, K_,
                    static_cast<const float*>(weights_.get_data_handle()), N_, static_cast<float*>(outputs[0]->data), N_,
                    epilogue_);
      return;
    }
    memory src(src_md(), cpu_engine(), inputs[0]->data);
    memory dst(dst_md(), cpu_engine(), outputs[0]->data);
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights_}, {DNNL_ARG_DST, dst}};
    if (bias_) {
      if (bias_post_op_) args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] = bias_;
      else args[DNNL_ARG_BIAS] = bias_;
    }
    fused_2d_.add_args(args);
    prim_.execute(stream, args);
  }

 private:
  // Sizes, transposes, scales and the bias of the Gemm / MatMul.
  void setup() {
    const ir::Node& n = *source;
    const bool gemm = n.op_type() == "Gemm";
    const Shape& x = inputs[0]->shape;
    const Shape& w = inputs[1]->shape;
    const bool ta = gemm && n.attr_i("transA", 0) != 0;
    tb_ = gemm && n.attr_i("transB", 0) != 0;
    alpha_ = gemm ? n.attr_f("alpha", 1.0f) : 1.0f;
    const float beta = gemm ? n.attr_f("beta", 1.0f) : 1.0f;
    K_ = tb_ ? w[1] : w[0];
    N_ = tb_ ? w[0] : w[1];
    int64_t M = 1;
    if (gemm) {
      M = ta ? x[1] : x[0];
    } else {
      for (size_t i = 0; i + 1 < x.size(); ++i) M *= x[i];
    }
    const auto f32 = memory::data_type::f32;
    // A: [M, K] row-major, or stored [K, M] when transposed
    in_dt_ = bf16 && !ta ? memory::data_type::bf16 : f32;  // bf16 activations and weights, f32 output
    ta_ = ta;
    // bias: beta * C, broadcast to [1, N] (matmul bias) or, when it varies along M,
    // expanded to [M, N] and added by a binary post-op
    bias_vals_.clear();
    bias_post_op_ = false;
    const bool has_c = gemm && inputs.size() > 2 && inputs[2];
    if (has_c) {
      const Tensor& c = inputs[2]->constant;
      Shape cs = c.shape();
      while (cs.size() < 2) cs.insert(cs.begin(), 1);
      bias_post_op_ = cs[0] != 1;
      const int64_t rows = bias_post_op_ ? M : 1;
      const int64_t sm = cs[0] == 1 ? 0 : cs[1], sn = cs[1] == 1 ? 0 : 1;
      const float* pc = c.data<float>();
      bias_vals_.resize(static_cast<size_t>(rows * N_));
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < N_; ++j) bias_vals_[static_cast<size_t>(i * N_ + j)] = beta * pc[i * sm + j * sn];
    }
    // The model's shapes vary: rows as a runtime dim, so one primitive serves every M (oneDNN's
    // gemm kernel, generated once per process, as fast as the brgemm one it would make per M:
    // [M,384]x[384,1536] for M = 8..384, 2 threads). Not for bf16 (no such kernel), a transposed
    // A (its strides depend on M), a bias that varies along M, or fused post-ops (GELU ran 1.7x
    // slower there: that kernel applies them in a pass of its own).
    runtime_m_ = shapes_vary && in_dt_ == f32 && !ta && !bias_post_op_ && post_ops_.empty();
    // Better still, kiln's GEMM: nothing made per M, post-ops in its epilogue (gemm_f32.hpp);
    // prepare() falls back to oneDNN when the epilogue cannot take the fused post-ops.
    // For static shapes too where the CPU has no AVX-512: there oneDNN 2.6 runs its older gemm
    // kernel (gemm:jit), and on an AVX2 Zen 3 kiln's ran BERT-base 16% faster (median of 5
    // interleaved runs, 180 against 215 ms) and BERT-small's FFN nodes in 0.88 ms against 1.32.
    // With AVX-512, oneDNN's brgemm kernels keep static shapes.
    const bool kiln_gemm_static = !isa_at_least(Isa::avx512_core);
    kiln_gemm_ = (shape_agnostic || kiln_gemm_static) && in_dt_ == f32 && !ta && !bias_post_op_ && gemm_f32::available();
    M_ = M;
  }

  // What the packed weights are under in the weights cache, before the layout: sizes, transpose,
  // alpha (exactly, in hex).
  std::string weights_key() const {
    char alpha_bits[32];
    std::snprintf(alpha_bits, sizeof alpha_bits, "%a", static_cast<double>(alpha_));
    return cat("fc/", K_, "x", N_, tb_ ? "/tB" : "", "/alpha=", alpha_bits);
  }

  // `list` as kiln's GEMM epilogue `e`; false when one of its post-ops is not among its ops.
  bool epilogue_of(const PostOpList& list, gemm_f32::Epilogue& e) const {
    const size_t rank = outputs[0]->shape.size();
    return rank > 0 && to_gemm_epilogue(list, rank, N_, e);
  }

  // The fused post-ops as kiln's GEMM epilogue; false when one is not among its ops.
  bool make_epilogue() {
    epilogue_ = {};
    epilogue_.bias = bias_vals_.empty() ? nullptr : bias_vals_.data();
    if (!epilogue_of(post_ops_, epilogue_)) return false;
    hoist_bias();
    return true;
  }

  // A MatMul's bias comes as a fused Add of one value per column: the epilogue's bias, not its first
  // op, so that the AVX2 GEMM takes its asm passes (bias, store and any clamp or lone GELU / Swish in
  // one go) instead of applying the Add over each stored block. BERT-6's [560, 384] x [384, 384]
  // with its bias Add, 2 threads, Zen 2: 885 -> 848 us; [560, 384] x [384, 1536] with GELU 3725 ->
  // 3597 us.
  void hoist_bias() {
    if (epilogue_.bias || epilogue_.ops.empty()) return;
    gemm_f32::EpilogueOp& first = epilogue_.ops.front();
    if (first.kind != gemm_f32::EpilogueOp::Kind::binary || first.alg != dnnl::algorithm::binary_add ||
        first.operand_count != N_)
      return;
    hoisted_bias_ = first.operand_storage;  // shares the constant's storage
    epilogue_.bias = static_cast<const float*>(hoisted_bias_.raw());
    epilogue_.ops.erase(epilogue_.ops.begin());
  }

  // Weights packed in the GEMM's panels (once per model, through the weights cache).
  std::vector<InputLayout> prepare_kiln_gemm() {
    impl = gemm_f32::impl_name();
    const Tensor& w = inputs[1]->constant;
    const memory::desc packed({gemm_f32::packed_size(K_, N_)}, memory::data_type::f32, tag::a);
    weights_ = pack_weights(w, weights_key() + "/kiln_gemm", packed,
                            [&](memory& dst) {
                              // B(k, n): w[k][n], or w[n][k] when transposed
                              gemm_f32::pack_b(w.data<float>(), K_, N_, tb_ ? 1 : N_, tb_ ? K_ : 1, alpha_,
                                               static_cast<float*>(dst.get_data_handle()));
                            },
                            WeightsCache::Pages::streamed);
    outputs[0]->blocked.reset();
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    req[0] = InputLayout::plain();
    return req;
  }

  // oneDNN's implementation of the primitive with these fused post-ops (after the bias
  // post-op, when there is one), for the fusion passes (remembered per process).
  std::string impl_for(const PostOpList& fused) {
    return impl_name<dnnl::matmul::primitive_desc>(matmul_desc(src_md(), dst_md()), attr_for(fused));
  }

  // The bias post-op (when there is one), then `fused`; sets fused_2d_.
  dnnl::primitive_attr attr_for(const PostOpList& fused) {
    dnnl::primitive_attr attr;
    dnnl::post_ops po;
    if (bias_post_op_) po.append_binary(dnnl::algorithm::binary_add, bias_md());
    fused_2d_ = as_2d(fused);
    fused_2d_.append_to(po);
    if (po.len() > 0) attr.set_post_ops(po);
    return attr;
  }

  dnnl::matmul::desc matmul_desc(const memory::desc& src, const memory::desc& dst) const {
    memory::desc wei_any({K_, N_}, in_dt_, tag::any);
    const bool bias_arg = !bias_vals_.empty() && !bias_post_op_;
    return bias_arg ? dnnl::matmul::desc(src, wei_any, bias_md(), dst) : dnnl::matmul::desc(src, wei_any, dst);
  }

  // A [M, K] row-major, or stored [K, M] when transposed; C [M, N]; the bias [1, N] or, added by
  // a post-op, [M, N]. Made when oneDNN's path asks: a descriptor is some 700 bytes, which every
  // node of every plan would keep (a new input shape of a BERT-6 makes 36 of these nodes).
  memory::desc src_md() const {
    const auto f32 = memory::data_type::f32;
    return ta_ ? memory::desc({M_, K_}, f32, memory::dims{1, M_}) : memory::desc({M_, K_}, in_dt_, tag::ab);
  }
  memory::desc dst_md() const { return memory::desc({M_, N_}, memory::data_type::f32, tag::ab); }
  memory::desc bias_md() const { return memory::desc({bias_post_op_ ? M_ : 1, N_}, memory::data_type::f32, tag::ab); }

  PostOpList post_ops_;
  PostOpList fused_2d_;  // post_ops_ with [1, N] operands, as the primitive was made
  bool ta_ = false;      // A stored transposed (Gemm transA)
  int64_t K_ = 0, N_ = 0;
  bool tb_ = false;
  float alpha_ = 1.0f;
  std::vector<float> bias_vals_;
  dnnl::matmul::primitive_desc pd_;
  dnnl::matmul prim_;
  memory weights_, bias_;
  bool bias_post_op_ = false;  // bias varies along M: added by a binary post-op
  bool runtime_m_ = false;     // the primitive takes M at execution (see setup())
  bool kiln_gemm_ = false;     // kiln's GEMM runs it, not a oneDNN primitive (see setup())
  int64_t M_ = 0;
  gemm_f32::Epilogue epilogue_;
  Tensor hoisted_bias_;  // the fused bias Add's operand epilogue_.bias points into (hoist_bias)
  memory::data_type in_dt_ = memory::data_type::f32;  // activations and weights (bf16 with inference_precision)
};

}  // namespace

bool fully_connected_supports(const ir::Node& n) {
  if (!n.is_onnx_domain() || n.num_inputs() < 2 || (n.op_type() != "MatMul" && n.op_type() != "Gemm")) return false;
  const ir::Value *a = n.input(0), *b = n.input(1);
  if (!static_f32(a) || !static_f32(b) || !b->is_constant() || a->is_constant()) return false;
  if (b->constant().dtype() != DType::f32 || b->constant().rank() != 2) return false;
  if (n.num_outputs() != 1) return false;
  const Shape as = a->type.shape.to_shape();
  const Shape& bs = b->constant().shape();
  if (n.op_type() == "MatMul") {
    return n.num_inputs() == 2 && !as.empty() && as.back() == bs[0];
  }
  if (n.num_inputs() > 3 || as.size() != 2) return false;  // Gemm
  const bool ta = n.attr_i("transA", 0) != 0, tb = n.attr_i("transB", 0) != 0;
  const int64_t M = ta ? as[1] : as[0], K = ta ? as[0] : as[1];
  const int64_t Kb = tb ? bs[1] : bs[0], N = tb ? bs[0] : bs[1];
  if (K != Kb) return false;
  const ir::Value* c = n.input(2);
  if (c) {
    if (!c->is_constant() || c->constant().dtype() != DType::f32 || c->constant().rank() > 2) return false;
    const Shape& cs = c->constant().shape();
    const Shape out = {M, N};
    for (size_t i = 0; i < cs.size(); ++i) {
      int64_t d = cs[cs.size() - 1 - i], o = out[1 - i];
      if (d != o && d != 1) return false;
    }
  }
  return true;
}

std::unique_ptr<Node> make_fully_connected_node(const ir::Node& n) {
  return std::make_unique<FullyConnectedNode>(n);
}

}  // namespace kiln::cpu
