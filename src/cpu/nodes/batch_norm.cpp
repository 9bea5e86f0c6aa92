// BatchNormalization (inference: one output, training_mode 0, per-channel statistics).
// With constant statistics it is y = x * a + b per channel (a = scale / sqrt(var + eps),
// b = B - mean * a, folded once in double exactly as the reference kernel does), run as
// one oneDNN binary multiply with a fused binary-add post-op, both broadcasting a
// {1, C, 1, ...} operand. That is one streaming pass in any layout the producer made
// (channels-last or nChw16c after a convolution, plain after a reference node), where
// oneDNN's batch_normalization_forward(use_global_stats) was up to 4x slower than the
// reference loop on plain data ("ncsp_bnorm") in densenet121. Where oneDNN has no JIT
// binary for the layout (channel blocks such as nChw16c) batch_normalization_forward
// with global statistics is used instead (its JIT covers those).
// A ReLU after it is fused (FuseBatchNormAndRelu): an eltwise post-op of the binary, or the
// batch normalization's fuse_norm_relu flag (the only activation it fuses in oneDNN 2.6).
#include <algorithm>
#include <cmath>
#include <string>

#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

namespace {

using dnnl::memory;

class BatchNormNode : public Node {
 public:
  explicit BatchNormNode(const ir::Node& n) : Node(n) {}
  const char* type() const override { return "BatchNorm"; }
  NodeKind kind() const override { return NodeKind::BatchNorm; }
  PostOpList* post_ops() override { return &post_ops_; }
  bool accepts_post_ops(const std::vector<PostOp>& extra, std::string* why) override {
    // one ReLU: both primitives this node may take (by the layout it meets) compute it
    const bool relu = extra.size() == 1 && extra[0].kind == PostOp::Kind::eltwise &&
                      extra[0].alg == dnnl::algorithm::eltwise_relu && extra[0].alpha == 0.0f;
    if (relu && post_ops_.empty()) return true;
    if (why) *why = post_ops_.empty() ? "a batch normalization fuses a ReLU only" : "it has fused its ReLU already";
    return false;
  }

  std::vector<InputLayout> prepare() override {
    const Shape& xs = inputs[0]->shape;
    const int64_t C = xs[1];
    const double eps = source->attr_f("epsilon", 1e-5f);
    Shape cs(xs.size(), 1);
    cs[1] = C;
    const memory::desc md_c = *plain_desc(cs, DType::f32);
    scale_ = memory(md_c, cpu_engine());
    shift_ = memory(md_c, cpu_engine());
    const ChannelAffine folded = batch_norm_affine(*this);
    std::copy(folded.scale.begin(), folded.scale.end(), static_cast<float*>(scale_.get_data_handle()));
    std::copy(folded.shift.begin(), folded.shift.end(), static_cast<float*>(shift_.get_data_handle()));
    const memory::desc src = inputs[0]->desc();
    memory::desc dst_any(src.dims(), memory::data_type::f32, memory::format_tag::any);
    dnnl::post_ops po;
    po.append_binary(dnnl::algorithm::binary_add, md_c);
    if (!post_ops_.empty()) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);  // the fused ReLU
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    dnnl::binary::desc d(dnnl::algorithm::binary_mul, src, md_c, dst_any);
    auto bin = dnnl::binary::primitive_desc(d, attr, cpu_engine());
    memory::desc dst;
    if (std::string(bin.impl_info_str()).rfind("ref", 0) != 0) {
      prim_ = dnnl::binary(bin);
      impl = bin.impl_info_str();
      dst = bin.dst_desc();
    } else {
      // no JIT binary for this layout (channel blocks): batch normalization has one
      bnorm_ = true;
      auto flags = dnnl::normalization_flags::use_global_stats | dnnl::normalization_flags::use_scale |
                   dnnl::normalization_flags::use_shift;
      if (!post_ops_.empty()) flags |= dnnl::normalization_flags::fuse_norm_relu;  // the fused ReLU
      dnnl::batch_normalization_forward::desc bd(dnnl::prop_kind::forward_inference, src, static_cast<float>(eps),
                                                 flags);
      dnnl::batch_normalization_forward::primitive_desc bpd(bd, cpu_engine());
      prim_ = dnnl::batch_normalization_forward(bpd);
      impl = bpd.impl_info_str();
      dst = bpd.dst_desc();
      memory::desc md({C}, memory::data_type::f32, memory::format_tag::a);
      for (size_t k = 0; k < 4; ++k) {  // scale, B, mean, var: f32 constants (batch_norm_supports)
        stats_[k] = memory(md, cpu_engine());
        const float* from = inputs[1 + k]->constant.data<float>();
        std::copy(from, from + C, static_cast<float*>(stats_[k].get_data_handle()));
      }
    }
    outputs[0]->set_layout(dst);
    return std::vector<InputLayout>(inputs.size(), InputLayout::any());
  }

  void execute(dnnl::stream& stream) override {
    if (bnorm_) {
      prim_.execute(stream, {{DNNL_ARG_SRC, inputs[0]->memory()},
                             {DNNL_ARG_SCALE, stats_[0]},
                             {DNNL_ARG_SHIFT, stats_[1]},
                             {DNNL_ARG_MEAN, stats_[2]},
                             {DNNL_ARG_VARIANCE, stats_[3]},
                             {DNNL_ARG_DST, outputs[0]->memory()}});
      return;
    }
    prim_.execute(stream, {{DNNL_ARG_SRC_0, inputs[0]->memory()},
                           {DNNL_ARG_SRC_1, scale_},
                           {DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, shift_},
                           {DNNL_ARG_DST, outputs[0]->memory()}});
  }

 private:
  PostOpList post_ops_;  // a fused ReLU, or nothing
  dnnl::primitive prim_;
  bool bnorm_ = false;
  memory scale_, shift_;  // binary: a and b, {1, C, 1, ...}
  memory stats_[4];       // batch normalization: scale, B, mean, var
};

}  // namespace

Node::ChannelAffine batch_norm_affine(Node& bn) {
  KILN_CHECK(bn.kind() == NodeKind::BatchNorm && bn.source, cat("batch_norm_affine: '", bn.name, "' is no BatchNorm node"));
  const double eps = bn.source->attr_f("epsilon", 1e-5f);
  // f32 constants (batch_norm_supports), read in place: as doubles in vectors of their own it
  // took a DenseNet-121 plan (58 of them fused into Concats) 0.6 ms of its 6
  const float* prm[4];  // scale, B, mean, var
  for (size_t k = 0; k < 4; ++k) prm[k] = bn.inputs[1 + k]->constant.data<float>();
  const size_t channels = static_cast<size_t>(bn.inputs[1]->constant.size());
  Node::ChannelAffine f;
  f.scale.resize(channels);
  f.shift.resize(channels);
  for (size_t c = 0; c < channels; ++c) {
    const double a = prm[0][c] / std::sqrt(static_cast<double>(prm[3][c]) + eps);
    f.scale[c] = static_cast<float>(a);
    f.shift[c] = static_cast<float>(prm[1][c] - prm[2][c] * a);
  }
  f.relu = !bn.post_ops()->empty();  // its one post-op: the fused ReLU
  return f;
}

bool batch_norm_supports(const ir::Node& n) {
  if (n.op_type() != "BatchNormalization" || !n.is_onnx_domain()) return false;
  if (n.num_inputs() != 5 || n.num_outputs() != 1) return false;
  if (n.attr_i("training_mode", 0) != 0) return false;
  if (n.opset() < 9 && n.attr_i("spatial", 1) == 0) return false;  // per-element statistics
  const ir::Value* x = n.input(0);
  if (!x || x->type.dtype != DType::f32 || !x->type.shape.is_static()) return false;
  if (n.output(0)->type.dtype != DType::f32) return false;
  const Shape xs = x->type.shape.to_shape();
  if (xs.size() < 2 || xs.size() > 5 || shape_size(xs) == 0) return false;
  for (size_t k = 1; k < 5; ++k) {
    const ir::Value* p = n.input(k);
    if (!p || !p->is_constant() || p->constant().dtype() != DType::f32 || p->constant().size() != xs[1]) return false;
  }
  return n.attr_f("epsilon", 1e-5f) >= 0.f;
}

std::unique_ptr<Node> make_batch_norm_node(const ir::Node& n) { return std::make_unique<BatchNormNode>(n); }

}  // namespace kiln::cpu
