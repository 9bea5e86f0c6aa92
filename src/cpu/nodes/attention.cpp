// Attention: kiln MultiHeadAttention (what the attention pattern makes of a transformer's
// Reshape/Transpose/MatMul/scale/mask/Softmax/MatMul block) as three oneDNN primitives in
// one node, with no transposes: the heads are read and written in place through strided
// memory descriptors over the packed [B, S, H*D] tensors.
//   scores[b,h] = scale * Q[b,:,h,:] K[b,:,h,:]^T + mask   (matmul; scale and mask as post-ops)
//   scores      = softmax(scores) over the last axis       (in place)
//   Y[b,:,h,:]  = scores[b,h] V[b,:,h,:]                   (matmul writing [B, S, H*Dv] directly)
// The [B, H, S, T] scores live in a buffer the node owns.
#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

bool static_f32(const ir::Value* v, size_t min_rank, size_t max_rank) {
  if (!v || v->type.dtype != DType::f32 || !v->type.shape.is_static()) return false;
  const size_t r = v->type.shape.rank();
  return r >= min_rank && r <= max_rank && shape_size(v->type.shape.to_shape()) > 0;
}

class AttentionNode : public Node {
 public:
  explicit AttentionNode(const ir::Node& n) {
    source = &n;
    name = n.name();
  }
  const char* type() const override { return "Attention"; }

  std::vector<InputLayout> prepare() override {
    const auto f32 = memory::data_type::f32;
    const Shape& q = inputs[0]->shape;
    const Shape& k = inputs[1]->shape;
    const Shape& v = inputs[2]->shape;
    const int64_t H = source->attr_i("num_heads");
    const int64_t B = q[0], S = q[1], T = k[1], D = q[2] / H, Dv = v[2] / H;
    // heads as strided views: [B, H, S, D] over [B, S, H*D]
    const memory::desc q_md({B, H, S, D}, f32, memory::dims{S * H * D, D, H * D, 1});
    const memory::desc kt_md({B, H, D, T}, f32, memory::dims{T * H * D, D, 1, H * D});  // K^T
    const memory::desc v_md({B, H, T, Dv}, f32, memory::dims{T * H * Dv, Dv, H * Dv, 1});
    const memory::desc y_md({B, H, S, Dv}, f32, memory::dims{S * H * Dv, Dv, H * Dv, 1});
    scores_md_ = memory::desc({B, H, S, T}, f32, tag::abcd);

    dnnl::post_ops po;
    po.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, source->attr_f("scale"), 0.0f);
    has_mask_ = inputs.size() > 3 && inputs[3];
    if (has_mask_) {
      Shape m = inputs[3]->shape;
      while (m.size() < 4) m.insert(m.begin(), 1);
      mask_md_ = *plain_desc(m, DType::f32);
      po.append_binary(dnnl::algorithm::binary_add, mask_md_);
    }
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    qk_pd_ = dnnl::matmul::primitive_desc(dnnl::matmul::desc(q_md, kt_md, scores_md_), attr, cpu_engine());
    qk_ = dnnl::matmul(qk_pd_);
    softmax_pd_ = dnnl::softmax_forward::primitive_desc(
        dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, scores_md_, 3), cpu_engine());
    softmax_ = dnnl::softmax_forward(softmax_pd_);
    pv_pd_ = dnnl::matmul::primitive_desc(dnnl::matmul::desc(scores_md_, v_md, y_md), cpu_engine());
    pv_ = dnnl::matmul(pv_pd_);
    impl = cat(qk_pd_.impl_info_str(), "+", softmax_pd_.impl_info_str(), "+", pv_pd_.impl_info_str());
    scores_ = memory(scores_md_, cpu_engine());
    q_md_ = q_md;
    kt_md_ = kt_md;
    v_md_ = v_md;
    y_md_ = y_md;
    outputs[0]->blocked.reset();
    return std::vector<InputLayout>(inputs.size(), InputLayout::plain());
  }

  void execute(dnnl::stream& stream) override {
    const auto& e = cpu_engine();
    std::unordered_map<int, memory> a1 = {{DNNL_ARG_SRC, memory(q_md_, e, inputs[0]->data)},
                                          {DNNL_ARG_WEIGHTS, memory(kt_md_, e, inputs[1]->data)},
                                          {DNNL_ARG_DST, scores_}};
    if (has_mask_) a1[DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1] = memory(mask_md_, e, inputs[3]->data);
    qk_.execute(stream, a1);
    softmax_.execute(stream, {{DNNL_ARG_SRC, scores_}, {DNNL_ARG_DST, scores_}});
    pv_.execute(stream, {{DNNL_ARG_SRC, scores_},
                         {DNNL_ARG_WEIGHTS, memory(v_md_, e, inputs[2]->data)},
                         {DNNL_ARG_DST, memory(y_md_, e, outputs[0]->data)}});
  }

 private:
  memory::desc q_md_, kt_md_, v_md_, y_md_, scores_md_, mask_md_;
  bool has_mask_ = false;
  dnnl::matmul::primitive_desc qk_pd_, pv_pd_;
  dnnl::softmax_forward::primitive_desc softmax_pd_;
  dnnl::matmul qk_, pv_;
  dnnl::softmax_forward softmax_;
  memory scores_;
};

}  // namespace

bool attention_supports(const ir::Node& n) {
  if (n.domain() != "kiln" || n.op_type() != "MultiHeadAttention" || n.num_outputs() != 1) return false;
  if (n.num_inputs() < 3 || !static_f32(n.input(0), 3, 3) || !static_f32(n.input(1), 3, 3) ||
      !static_f32(n.input(2), 3, 3))
    return false;
  if (n.num_inputs() > 3 && n.has_input(3) && !static_f32(n.input(3), 1, 4)) return false;
  const int64_t H = n.attr_i("num_heads", 0);
  const Shape q = n.input(0)->type.shape.to_shape(), k = n.input(1)->type.shape.to_shape(),
              v = n.input(2)->type.shape.to_shape();
  return H >= 1 && q[2] % H == 0 && v[2] % H == 0 && k[2] == q[2] && k[0] == q[0] && v[0] == q[0] && v[1] == k[1];
}

std::unique_ptr<Node> make_attention_node(const ir::Node& n) { return std::make_unique<AttentionNode>(n); }

}  // namespace kiln::cpu
