// Attention: scaled dot-product attention as three oneDNN primitives in one node, with no
// transposes: the heads are read and written in place through strided memory descriptors.
// It runs kiln MultiHeadAttention (what the attention pattern makes of a transformer's
// Reshape/Transpose/MatMul/scale/mask/Softmax/MatMul block; packed [B, S, H*D] tensors) and
// ONNX Attention (opset 23: 4-D [B, H, S, D] or 3-D packed inputs; multi-head, grouped-query
// and multi-query).
//   scores[b,hk,g] = scale * Q[b,hk*G+g] K[b,hk]^T        (matmul, one K head per G query heads)
//   scores         = softcap * tanh(scores / softcap)      (post-ops, when softcap > 0)
//   scores        += mask bias                             (binary post-ops: the float mask, the
//                                                           bool mask as 0 / -inf, the causal mask)
//   scores         = softmax(scores) over the last axis    (in place; fully masked rows -> 0)
//   scores         = DQ(Q(scores))                         (MultiHeadAttention's probs_*: a QDQ model)
//   Y[b,hk*G+g]    = scores[b,hk,g] V[b,hk]               (matmul writing Y's layout directly)
// The [B, Hkv, G, S, T] scores live in a buffer the node owns. ONNX Attention with past /
// present key-values or the qk_matmul_output stays on its reference kernel.
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/strings.hpp"
#include "cpu/arena.hpp"
#include "cpu/attention_f32.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

bool static_f32(const ir::Value* v, size_t min_rank, size_t max_rank) {
  if (!v || v->type.dtype != DType::f32 || !v->type.shape.is_static()) return false;
  const size_t r = v->type.shape.rank();
  return r >= min_rank && r <= max_rank && v->type.shape.elements() > 0;
}

bool is_mha(const ir::Node& n) { return n.domain() == "kiln" && n.op_type() == "MultiHeadAttention"; }
bool is_onnx_attention(const ir::Node& n) {
  return n.is_onnx_domain() && n.op_type() == "Attention";
}

// The geometry of an attention node on static shapes; ok = false when the node is not one this
// kernel runs.
struct Geom {
  bool ok = false;
  bool packed = true;  // [B, seq, heads*size] (else [B, heads, seq, size])
  int64_t B = 0, Hq = 0, Hkv = 0, S = 0, T = 0, D = 0, Dv = 0;
  float scale = 1.0f, softcap = 0.0f;
  bool causal = false;
  attention_f32::ProbsQuant probs;  // MultiHeadAttention's probs_* attributes (a QDQ model)
  int64_t G() const { return Hq / Hkv; }
};

Geom geometry(const ir::Node& n) {
  Geom g;
  const bool mha = is_mha(n), onnx = is_onnx_attention(n);
  if (!mha && !onnx) return g;
  if (n.num_inputs() < 3 || !static_f32(n.input(0), 3, 4) || !static_f32(n.input(1), 3, 4) ||
      !static_f32(n.input(2), 3, 4))
    return g;
  const Shape q = n.input(0)->type.shape.to_shape(), k = n.input(1)->type.shape.to_shape(),
              v = n.input(2)->type.shape.to_shape();
  if (q.size() != k.size() || q.size() != v.size()) return g;
  g.packed = q.size() == 3;
  if (mha && !g.packed) return g;
  if (g.packed) {
    g.Hq = mha ? n.attr_i("num_heads", 0) : n.attr_i("q_num_heads", 0);
    g.Hkv = mha ? g.Hq : n.attr_i("kv_num_heads", 0);
    if (g.Hq < 1 || g.Hkv < 1 || q[2] % g.Hq || k[2] % g.Hkv || v[2] % g.Hkv) return g;
    g.B = q[0], g.S = q[1], g.T = k[1], g.D = q[2] / g.Hq, g.Dv = v[2] / g.Hkv;
    if (k[2] / g.Hkv != g.D || v[1] != g.T) return g;
  } else {
    g.B = q[0], g.Hq = q[1], g.S = q[2], g.D = q[3], g.Hkv = k[1], g.T = k[2], g.Dv = v[3];
    if (k[3] != g.D || v[1] != g.Hkv || v[2] != g.T) return g;
  }
  if (k[0] != g.B || v[0] != g.B || g.Hq % g.Hkv != 0) return g;
  if (mha) {
    g.scale = n.attr_f("scale");
    if (n.has_attr("probs_scale")) {
      const bool s8 = n.attr_i("probs_type", 2) == 3;  // TensorProto INT8 (3), else UINT8 (2)
      g.probs = {true, n.attr_f("probs_scale"), static_cast<float>(n.attr_i("probs_zero_point", 0)), s8 ? -128.0f : 0.0f,
                 s8 ? 127.0f : 255.0f};
      if (!(g.probs.scale > 0) || !std::isfinite(g.probs.scale)) return g;
    }
  } else {
    g.scale = n.has_attr("scale") ? n.attr_f("scale") : 1.0f / std::sqrt(static_cast<float>(g.D));
    g.softcap = n.attr_f("softcap", 0.0f);
    g.causal = n.attr_i("is_causal", 0) != 0;
    if (g.softcap < 0) return g;
  }
  g.ok = true;
  return g;
}

// The strides of a [B, Hkv, G, seq, size] view of a Q / K / V / Y tensor (G = 1 for K and V).
memory::dims view_strides(const Geom& g, int64_t heads, int64_t seq, int64_t size) {
  const int64_t per = heads / g.Hkv;  // heads of this tensor per kv head
  if (g.packed) return {seq * heads * size, per * size, size, heads * size, 1};
  return {heads * seq * size, per * seq * size, seq * size, size, 1};
}

class AttentionNode : public Node {
 public:
  explicit AttentionNode(const ir::Node& n) : Node(n), g_(geometry(n)) {}
  const char* type() const override { return "Attention"; }
  NodeKind kind() const override { return NodeKind::Attention; }

  std::vector<InputLayout> prepare() override {
    const auto f32 = memory::data_type::f32;
    const int64_t B = g_.B, Hkv = g_.Hkv, G = g_.G(), S = g_.S, T = g_.T, D = g_.D, Dv = g_.Dv;
    // working memory (scores, expanded K / V, the per-run mask) lives in the graph's arena:
    // memory objects here, pointed at their part of `scratch` by execute()
    scratch_bytes_ = 0;
    scratch_parts_.clear();
    auto in_scratch = [&](const memory::desc& md) {
      memory m(md, cpu_engine(), DNNL_MEMORY_NONE);
      scratch_parts_.push_back({m, scratch_bytes_});
      scratch_bytes_ += Arena::aligned(md.get_size());
      return m;
    };
    has_mask_ = inputs.size() > 3 && inputs[3];
    Shape m4;  // the mask with leading 1s to rank 4
    if (has_mask_) {
      m4 = inputs[3]->shape;
      while (m4.size() < 4) m4.insert(m4.begin(), 1);
    }
    // kiln's kernel where the CPU runs it: nothing made per sequence length, and about twice
    // as fast as oneDNN's two matmuls and softmax (attention_f32.hpp)
    kiln_kernel_ = g_.softcap == 0 && attention_f32::available();
    if (kiln_kernel_) {
      kg_ = {g_.B, g_.Hq, g_.Hkv, g_.S, g_.T, g_.D, g_.Dv, g_.packed, g_.scale, g_.causal, g_.probs};
      kmask_ = {};
      if (has_mask_) {
        kmask_.boolean = inputs[3]->dtype == DType::boolean;
        for (size_t d = 0; d < 4; ++d) kmask_.dims[d] = m4[d];
      }
      threads_ = std::max(1, omp_get_max_threads());
      scratch_bytes_ = attention_f32::scratch_bytes(kg_, threads_);
      impl = attention_f32::impl_name();
      outputs[0]->blocked.reset();
      return std::vector<InputLayout>(inputs.size(), InputLayout::plain());
    }
    // 4-D views [B, Hkv, R, size] where possible (oneDNN has its brgemm kernels for them): with
    // one query head per kv head (R = S), or in the 4-D layout, where the G query heads of a kv
    // head are contiguous (R = G * S) and the mask does not vary along them or the rows;
    // else 5-D views [B, Hkv, G, S, size]
    bool merge = G == 1 || (!g_.packed && (!has_mask_ || (m4[1] == 1 && m4[2] == 1)));
    int64_t R = G * S;
    memory::desc q_md, kt_md, v_md, y_md;
    memory::dims qs = view_strides(g_, g_.Hq, S, D), ks = view_strides(g_, Hkv, T, D),
                 vs = view_strides(g_, Hkv, T, Dv), ys = view_strides(g_, g_.Hq, S, Dv);
    expand_kv_ = !merge && g_.packed;
    if (expand_kv_) {
      // packed grouped-query: K / V copied per run into [B, Hq, T, size] (each kv head repeated
      // for its G query heads), so that the matmuls run as multi-head ones
      k_exp_ = in_scratch(memory::desc({B, g_.Hq, T, D}, f32, tag::abcd));
      v_exp_ = in_scratch(memory::desc({B, g_.Hq, T, Dv}, f32, tag::abcd));
      ks = {g_.Hq * T * D, T * D, 0, D, 1};
      vs = {g_.Hq * T * Dv, T * Dv, 0, Dv, 1};
      merge = true;
      R = S;
    }
    const int64_t Hv = expand_kv_ ? g_.Hq : Hkv;  // the heads of the matmuls' batch
    if (merge) {
      // per matmul head: Q's stride is its kv group's (G heads) unless K / V were expanded
      const int64_t qh = expand_kv_ ? qs[2] : qs[1], yh = expand_kv_ ? ys[2] : ys[1];
      q_md = memory::desc({B, Hv, R, D}, f32, memory::dims{qs[0], qh, qs[3], qs[4]});
      kt_md = memory::desc({B, Hv, D, T}, f32, memory::dims{ks[0], ks[1], ks[4], ks[3]});  // K^T
      v_md = memory::desc({B, Hv, T, Dv}, f32, memory::dims{vs[0], vs[1], vs[3], vs[4]});
      y_md = memory::desc({B, Hv, R, Dv}, f32, memory::dims{ys[0], yh, ys[3], ys[4]});
      scores_md_ = memory::desc({B, Hv, R, T}, f32, tag::abcd);
    } else {
      q_md = memory::desc({B, Hkv, G, S, D}, f32, qs);
      kt_md = memory::desc({B, Hkv, 1, D, T}, f32, memory::dims{ks[0], ks[1], 0, ks[4], ks[3]});
      v_md = memory::desc({B, Hkv, 1, T, Dv}, f32, memory::dims{vs[0], vs[1], 0, vs[3], vs[4]});
      y_md = memory::desc({B, Hkv, G, S, Dv}, f32, ys);
      scores_md_ = memory::desc({B, Hkv, G, S, T}, f32, tag::abcde);
    }

    // the scale as output scale; softcap * tanh(scale * qk / softcap) as a scaled tanh post-op
    // (oneDNN 2.6's matmul computes linear -> tanh -> linear post-op chains wrong)
    dnnl::primitive_attr attr;
    attr.set_output_scales(0, {g_.softcap > 0 ? g_.scale / g_.softcap : g_.scale});
    dnnl::post_ops po;
    if (g_.softcap > 0) po.append_eltwise(g_.softcap, dnnl::algorithm::eltwise_tanh, 0.0f, 0.0f);
    int arg = po.len();
    if (has_mask_) {
      // broadcast to [B, Hq, S, T], seen as the scores' view
      // oneDNN 2.6's brgemm matmul takes no binary post-op broadcast along the batch dim
      // alone: a mask with batch 1 is repeated per batch into a buffer of the node
      Shape mv = merge ? (G == 1 || expand_kv_ ? m4 : Shape{m4[0], 1, 1, m4[3]})
                       : Shape{m4[0], m4[1] == 1 ? 1 : Hkv, m4[1] == 1 ? 1 : G, m4[2], m4[3]};
      mask_md_ = *plain_desc(mv, DType::f32);
      mask_bool_ = inputs[3]->dtype == DType::boolean;
      mask_repeat_ = mv[0] == 1 && B > 1 && shape_size(mv) > mv.back() ? B : 1;
      mv[0] *= mask_repeat_;
      bias_md_ = *plain_desc(mv, DType::f32);
      if (mask_bool_ || mask_repeat_ > 1) bias_ = in_scratch(*bias_md_);  // filled per run
      mask_arg_ = arg++;
      po.append_binary(dnnl::algorithm::binary_add, *bias_md_);
    }
    if (g_.causal) {  // key j > query i disallowed (ONNX: j > i + past length; no past keys here)
      const Shape cs = merge ? Shape{B, 1, R, T} : Shape{B, 1, 1, S, T};  // per batch: see the mask
      causal_ = memory(*plain_desc(cs, DType::f32), cpu_engine());
      float* c = static_cast<float*>(causal_.get_data_handle());
      const int64_t rows = merge ? R : S;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < T; ++j)
            c[(b * rows + r) * T + j] = j > r % S ? -std::numeric_limits<float>::infinity() : 0.0f;
      causal_arg_ = arg++;
      po.append_binary(dnnl::algorithm::binary_add, causal_.get_desc());
    }
    attr.set_post_ops(po);
    // through the thread's memo: the layers of a model share them (cached_primitive)
    auto qk = cached_primitive<dnnl::matmul::primitive_desc, dnnl::matmul>(dnnl::matmul::desc(q_md, kt_md, *scores_md_), attr);
    qk_pd_ = qk.pd;
    qk_ = qk.prim;
    auto sm = cached_primitive<dnnl::softmax_forward::primitive_desc, dnnl::softmax_forward>(
        dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, *scores_md_, scores_md_->data.ndims - 1),
        dnnl::primitive_attr());
    softmax_pd_ = sm.pd;
    softmax_ = sm.prim;
    auto pv = cached_primitive<dnnl::matmul::primitive_desc, dnnl::matmul>(dnnl::matmul::desc(*scores_md_, v_md, y_md),
                                                                          dnnl::primitive_attr());
    pv_pd_ = pv.pd;
    pv_ = pv.prim;
    impl = cat(qk_pd_.impl_info_str(), "+", softmax_pd_.impl_info_str(), "+", pv_pd_.impl_info_str());
    scores_ = in_scratch(*scores_md_);
    q_md_ = q_md;
    kt_md_ = kt_md;
    v_md_ = v_md;
    y_md_ = y_md;
    outputs[0]->blocked.reset();
    return std::vector<InputLayout>(inputs.size(), InputLayout::plain());
  }

  size_t scratch_bytes() const override { return scratch_bytes_; }

  void execute(dnnl::stream& stream) override {
    if (kiln_kernel_) {
      attention_f32::Mask mask = kmask_;
      if (has_mask_) mask.data = inputs[3]->data;
      attention_f32::run(kg_, static_cast<const float*>(inputs[0]->data), static_cast<const float*>(inputs[1]->data),
                         static_cast<const float*>(inputs[2]->data), mask, static_cast<float*>(outputs[0]->data),
                         scratch, threads_);
      return;
    }
    const auto& e = cpu_engine();
    for (auto& [m, offset] : scratch_parts_) {
      void* at = static_cast<char*>(scratch) + offset;
      if (m.get_data_handle() != at) m.set_data_handle(at);
    }
    void* k = inputs[1]->data;
    void* v = inputs[2]->data;
    if (expand_kv_) {  // packed [B, T, Hkv * size] -> [B, Hq, T, size], head h from kv head h / G
      auto expand = [&](const float* src, memory& dst, int64_t size) {
        float* d = static_cast<float*>(dst.get_data_handle());
        const int64_t Hq = g_.Hq, Hkv = g_.Hkv, G = g_.G(), T = g_.T;
        for (int64_t b = 0; b < g_.B; ++b)
          for (int64_t h = 0; h < Hq; ++h)
            for (int64_t t = 0; t < T; ++t)
              std::memcpy(d + ((b * Hq + h) * T + t) * size, src + ((b * T + t) * Hkv + h / G) * size,
                          static_cast<size_t>(size) * sizeof(float));
      };
      expand(static_cast<const float*>(k), k_exp_, g_.D);
      expand(static_cast<const float*>(v), v_exp_, g_.Dv);
      k = k_exp_.get_data_handle();
      v = v_exp_.get_data_handle();
    }
    std::unordered_map<int, memory> a1 = {{DNNL_ARG_SRC, memory(*q_md_, e, inputs[0]->data)},
                                          {DNNL_ARG_WEIGHTS, memory(*kt_md_, e, k)},
                                          {DNNL_ARG_DST, scores_}};
    if (has_mask_) {
      if (bias_) {  // bool (true: attend, 0; false: -inf) and / or repeated per batch
        float* b = static_cast<float*>(bias_.get_data_handle());
        const size_t n = mask_md_->get_size() / sizeof(float);
        for (int64_t rep = 0; rep < mask_repeat_; ++rep, b += n) {
          if (mask_bool_) {
            const auto* m = static_cast<const uint8_t*>(inputs[3]->data);
            for (size_t i = 0; i < n; ++i) b[i] = m[i] ? 0.0f : -std::numeric_limits<float>::infinity();
          } else {
            std::memcpy(b, inputs[3]->data, n * sizeof(float));
          }
        }
      }
      a1[DNNL_ARG_ATTR_MULTIPLE_POST_OP(mask_arg_) | DNNL_ARG_SRC_1] =
          bias_ ? bias_ : memory(*mask_md_, e, inputs[3]->data);
    }
    if (g_.causal) a1[DNNL_ARG_ATTR_MULTIPLE_POST_OP(causal_arg_) | DNNL_ARG_SRC_1] = causal_;
    qk_.execute(stream, a1);
    softmax_.execute(stream, {{DNNL_ARG_SRC, scores_}, {DNNL_ARG_DST, scores_}});
    if (has_mask_) {
      // a row whose every key is masked (-inf): softmax gives NaN; ONNX wants zeros
      stream.wait();
      float* s = static_cast<float*>(scores_.get_data_handle());
      const int64_t rows = g_.B * g_.Hq * g_.S;
      for (int64_t r = 0; r < rows; ++r)
        if (std::isnan(s[r * g_.T]))
          for (int64_t j = 0; j < g_.T; ++j) s[r * g_.T + j] = 0.0f;
    }
    if (g_.probs.on) {  // QuantizeLinear -> DequantizeLinear on the probabilities
      stream.wait();
      float* p = static_cast<float*>(scores_.get_data_handle());
      const int64_t count = g_.B * g_.Hq * g_.S * g_.T;
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < count; ++i) p[i] = g_.probs.apply(p[i]);
    }
    pv_.execute(stream, {{DNNL_ARG_SRC, scores_},
                         {DNNL_ARG_WEIGHTS, memory(*v_md_, e, v)},
                         {DNNL_ARG_DST, memory(*y_md_, e, outputs[0]->data)}});
  }

 private:
  Geom g_;
  bool kiln_kernel_ = false;  // attention_f32 runs it, not oneDNN
  attention_f32::Geometry kg_;
  attention_f32::Mask kmask_;
  int threads_ = 1;
  // oneDNN's path only: held by pointer (LayoutDesc), a descriptor being some 700 bytes that
  // every Attention node of every plan would keep
  LayoutDesc q_md_, kt_md_, v_md_, y_md_, scores_md_, mask_md_, bias_md_;
  int64_t mask_repeat_ = 1;
  bool expand_kv_ = false;
  memory k_exp_, v_exp_;
  bool has_mask_ = false, mask_bool_ = false;  // a float mask may hold -inf too
  int mask_arg_ = -1, causal_arg_ = -1;
  memory bias_, causal_;
  dnnl::matmul::primitive_desc qk_pd_, pv_pd_;
  dnnl::softmax_forward::primitive_desc softmax_pd_;
  dnnl::matmul qk_, pv_;
  dnnl::softmax_forward softmax_;
  memory scores_;
  // the memory objects above that live in `scratch`, and their offsets in it
  std::vector<std::pair<memory, size_t>> scratch_parts_;
  size_t scratch_bytes_ = 0;
};

}  // namespace

bool attention_supports(const ir::Node& n) {
  const Geom g = geometry(n);
  if (!g.ok) return false;
  if (is_onnx_attention(n)) {
    // only Y: past / present key-values and the qk output stay on the reference kernel
    if (n.num_inputs() > 4 || n.num_outputs() != 1) return false;
  } else if (n.num_outputs() != 1) {
    return false;
  }
  if (n.num_inputs() > 3 && n.has_input(3)) {
    const ir::Value* m = n.input(3);
    const bool boolean = m->type.dtype == DType::boolean;
    if (boolean ? !is_onnx_attention(n) : !static_f32(m, 1, 4)) return false;
    if (!m->type.shape.is_static() || m->type.shape.rank() > 4 || m->type.shape.rank() < 1) return false;
    // broadcastable to [B, Hq, S, T]
    Shape ms = m->type.shape.to_shape();
    while (ms.size() < 4) ms.insert(ms.begin(), 1);
    const int64_t full[4] = {g.B, g.Hq, g.S, g.T};
    for (size_t d = 0; d < 4; ++d)
      if (ms[d] != 1 && ms[d] != full[d]) return false;
  }
  return true;
}

std::unique_ptr<Node> make_attention_node(const ir::Node& n) { return std::make_unique<AttentionNode>(n); }

}  // namespace kiln::cpu
