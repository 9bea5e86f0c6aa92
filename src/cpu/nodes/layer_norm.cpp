// LayerNormalization (opset 17) on oneDNN's layer_normalization_forward with
// use_scale | use_shift. oneDNN normalizes over the last dim; the plain input is viewed as
// [prod(d < axis), prod(d >= axis)], so any axis works. Scale and B must be constants
// (broadcastable to the normalized shape: expanded once at compile time). The default
// stash_type (f32) only. When Mean / InvStdDev are requested the primitive runs in
// training mode (it then writes mean and variance) and InvStdDev = 1/sqrt(var + eps) is
// finished in place.
// com.microsoft SkipLayerNormalization (residual Add + LayerNorm, from the SkipLayerNorm
// pattern) is the same node with a oneDNN binary add (input + skip, + bias as a post-op)
// into the output first; the normalisation then runs in place on it.
#include <algorithm>
#include <cmath>

#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/layer_norm_f32.hpp"
#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

int64_t norm_axis(const ir::Node& n, int64_t rank) {
  int64_t a = n.attr_i("axis", -1);
  return a < 0 ? a + rank : a;
}

// Whether f32 parameter `p` broadcasts (numpy, unidirectional) to `norm`. Asked by
// layer_norm_supports for every new input shape, so it reads shapes only.
bool param_broadcasts(const Tensor& p, const Shape& norm) {
  const Shape& ps = p.shape();
  if (p.dtype() != DType::f32 || ps.size() > norm.size()) return false;
  const size_t off = norm.size() - ps.size();
  for (size_t i = 0; i < ps.size(); ++i)
    if (ps[i] != norm[off + i] && ps[i] != 1) return false;
  return true;
}

// p broadcast to `norm`; nullopt when it does not broadcast (param_broadcasts).
std::optional<std::vector<float>> expand_param(const Tensor& p, const Shape& norm) {
  if (!param_broadcasts(p, norm)) return std::nullopt;
  const Shape& ps = p.shape();
  const size_t off = norm.size() - ps.size();
  std::vector<float> out(static_cast<size_t>(shape_size(norm)));
  const float* src = p.data<float>();
  std::vector<int64_t> idx(norm.size(), 0);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t o = 0, stride = 1;
    for (size_t k = ps.size(); k-- > 0;) {
      if (ps[k] != 1) o += idx[off + k] * stride;
      stride *= ps[k];
    }
    out[i] = src[o];
    for (size_t k = norm.size(); k-- > 0;) {
      if (++idx[k] < norm[k]) break;
      idx[k] = 0;
    }
  }
  return out;
}

bool is_skip_layer_norm(const ir::Node& n) {
  return n.domain() == "com.microsoft" && n.op_type() == "SkipLayerNormalization";
}

class LayerNormNode : public Node {
 public:
  explicit LayerNormNode(const ir::Node& n) : Node(n), skip_(is_skip_layer_norm(n)) {}
  const char* type() const override { return skip_ ? "SkipLayerNorm" : "LayerNorm"; }
  NodeKind kind() const override { return NodeKind::LayerNorm; }

  std::vector<InputLayout> prepare() override {
    const Shape& s = inputs[0]->shape;
    const int64_t axis = skip_ ? static_cast<int64_t>(s.size()) - 1 : norm_axis(*source, static_cast<int64_t>(s.size()));
    const Shape norm(s.begin() + axis, s.end());
    const int64_t m = shape_size(norm), outer = shape_size(s) / m;
    const auto f32 = memory::data_type::f32;
    const float eps = source->attr_f("epsilon", skip_ ? 1e-12f : 1e-5f);
    auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
    eps_ = eps;
    const bool stats = outputs.size() > 1;
    rows_ = outer;
    m_ = m;
    // kiln's kernel where the CPU runs it: nothing made per row count, and one pass where
    // oneDNN runs two primitives for SkipLayerNorm (layer_norm_f32.hpp)
    kiln_kernel_ = !stats && layer_norm_f32::available();
    if (!kiln_kernel_) {
      md_ = memory::desc({outer, m}, f32, tag::ab);
      auto prop = stats ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
      auto ln = cached_primitive<dnnl::layer_normalization_forward::primitive_desc, dnnl::layer_normalization_forward>(
          dnnl::layer_normalization_forward::desc(prop, *md_, eps, flags), dnnl::primitive_attr());
      pd_ = ln.pd;
      prim_ = ln.prim;
      impl = pd_.impl_info_str();
    } else {
      impl = layer_norm_f32::impl_name();
    }
    if (stats) {
      stat_md_ = memory::desc({outer}, f32, tag::a);
      KILN_CHECK(pd_.mean_desc() == *stat_md_ && pd_.variance_desc() == *stat_md_,
                 cat(source->describe(), ": unexpected statistics layout"));
      if (outputs.size() < 3) var_scratch_ = memory(*stat_md_, cpu_engine());
      for (size_t k = 1; k < outputs.size(); ++k) outputs[k]->blocked.reset();
    }

    const size_t scale_at = skip_ ? 2 : 1, shift_at = skip_ ? 3 : 2;
    scale_p_ = param(inputs[scale_at]->constant, norm, scale_vals_, "Scale");
    if (inputs.size() > shift_at && inputs[shift_at]) {
      shift_p_ = param(inputs[shift_at]->constant, norm, shift_vals_, "B");
    } else {
      shift_vals_.assign(static_cast<size_t>(m), 0.0f);
      shift_p_ = shift_vals_.data();
    }
    // input + skip (+ bias) -> the output, where the normalisation then runs in place
    bias_p_ = skip_ && inputs.size() > 4 && inputs[4] ? param(inputs[4]->constant, norm, bias_vals_, "Bias") : nullptr;
    if (!kiln_kernel_) {  // oneDNN's primitives take the parameters as memory objects
      const memory::desc pmd({m}, f32, tag::a);
      scale_ = memory(pmd, cpu_engine(), const_cast<float*>(scale_p_));
      shift_ = memory(pmd, cpu_engine(), const_cast<float*>(shift_p_));
      if (skip_) {  // the sum (and its bias) by a binary primitive first (kiln's kernel adds them itself)
        dnnl::primitive_attr attr;
        if (bias_p_) {
          bias_md_ = memory::desc({1, m}, f32, tag::ab);
          bias_ = memory(*bias_md_, cpu_engine(), const_cast<float*>(bias_p_));
          dnnl::post_ops po;
          po.append_binary(dnnl::algorithm::binary_add, *bias_md_);
          attr.set_post_ops(po);
        }
        auto add = cached_primitive<dnnl::binary::primitive_desc, dnnl::binary>(
            dnnl::binary::desc(dnnl::algorithm::binary_add, *md_, *md_, *md_), attr);
        add_pd_ = add.pd;
        add_ = add.prim;
        impl = cat(add_pd_.impl_info_str(), "+", impl);
      }
    }
    outputs[0]->blocked.reset();
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    req[0] = InputLayout::plain();
    if (skip_) req[1] = InputLayout::plain();
    return req;
  }

  void execute(dnnl::stream& stream) override {
    if (kiln_kernel_) {
      layer_norm_f32::run(static_cast<const float*>(inputs[0]->data),
                          skip_ ? static_cast<const float*>(inputs[1]->data) : nullptr,
                          bias_p_, scale_p_, shift_p_, rows_, m_, eps_,
                          static_cast<float*>(outputs[0]->data));
      return;
    }
    memory src(*md_, cpu_engine(), inputs[0]->data);
    memory dst(*md_, cpu_engine(), outputs[0]->data);
    if (skip_) {
      std::unordered_map<int, memory> args = {
          {DNNL_ARG_SRC_0, src}, {DNNL_ARG_SRC_1, memory(*md_, cpu_engine(), inputs[1]->data)}, {DNNL_ARG_DST, dst}};
      if (bias_p_) args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] = bias_;
      add_.execute(stream, args);
      src = dst;
    }
    if (outputs.size() == 1) {
      prim_.execute(stream,
                    {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCALE, scale_}, {DNNL_ARG_SHIFT, shift_}});
      return;
    }
    memory mean(*stat_md_, cpu_engine(), outputs[1]->data);
    memory var = outputs.size() > 2 ? memory(*stat_md_, cpu_engine(), outputs[2]->data) : var_scratch_;
    prim_.execute(stream, {{DNNL_ARG_SRC, src},
                           {DNNL_ARG_DST, dst},
                           {DNNL_ARG_SCALE, scale_},
                           {DNNL_ARG_SHIFT, shift_},
                           {DNNL_ARG_MEAN, mean},
                           {DNNL_ARG_VARIANCE, var}});
    if (outputs.size() > 2) {
      stream.wait();
      float* p = static_cast<float*>(outputs[2]->data);
      const int64_t n = stat_md_->dims()[0];
      for (int64_t i = 0; i < n; ++i) p[i] = 1.0f / std::sqrt(p[i] + eps_);
    }
  }

 private:
  bool skip_ = false;  // SkipLayerNormalization: binary add first
  bool kiln_kernel_ = false;  // layer_norm_f32 runs it, not oneDNN
  int64_t rows_ = 0, m_ = 0;
  // held by pointer (LayoutDesc): a descriptor is some 700 bytes, which every node of every plan
  // would keep; md_ and stat_md_ only on oneDNN's path
  LayoutDesc md_, stat_md_, bias_md_;
  dnnl::binary::primitive_desc add_pd_;
  dnnl::binary add_;
  memory bias_;
  float eps_ = 1e-5f;
  memory var_scratch_;  // variance when InvStdDev is not requested
  dnnl::layer_normalization_forward::primitive_desc pd_;
  dnnl::layer_normalization_forward prim_;
  // the parameters: the constants themselves, or the *_vals_ below (bias: SkipLayerNorm's, or null)
  const float *scale_p_ = nullptr, *shift_p_ = nullptr, *bias_p_ = nullptr;
  memory scale_, shift_;  // over them, for oneDNN's primitive only
  std::vector<float> scale_vals_, shift_vals_, bias_vals_;  // a parameter expanded to the normalized shape

  // A parameter as [m] floats: the constant's own storage when it holds exactly those (the
  // constant outlives the node: the graph's ir::Graph keeps it), else expanded into `vals`.
  // kiln::Error when it does not broadcast to the normalized shape.
  const float* param(const Tensor& p, const Shape& norm, std::vector<float>& vals, const char* what) {
    if (p.dtype() == DType::f32 && p.size() == shape_size(norm) && p.shape().size() <= norm.size() &&
        std::equal(p.shape().rbegin(), p.shape().rend(), norm.rbegin()))
      return static_cast<const float*>(p.raw());
    auto e = expand_param(p, norm);
    KILN_CHECK(e.has_value(), cat(source->describe(), ": ", what, " does not broadcast to the normalized shape"));
    vals = std::move(*e);
    return vals.data();
  }
};

}  // namespace

bool layer_norm_supports(const ir::Node& n) {
  if (is_skip_layer_norm(n)) {
    if (n.num_outputs() != 1 || n.num_inputs() < 3) return false;
    const ir::Value *x = n.input(0), *sk = n.input(1);
    if (!x || !sk || x->type.dtype != DType::f32 || sk->type.dtype != DType::f32 || !x->type.shape.is_static() ||
        !sk->type.shape.is_static() || x->type.shape.to_shape() != sk->type.shape.to_shape())
      return false;
    const Shape s = x->type.shape.to_shape();
    if (s.empty() || shape_size(s) == 0) return false;
    for (size_t i = 2; i < n.num_inputs(); ++i) {
      const ir::Value* p = n.input(i);
      if (!p) continue;
      if (!p->is_constant() || p->constant().dtype() != DType::f32 || p->constant().rank() != 1 ||
          p->constant().shape()[0] != s.back())
        return false;
    }
    return true;
  }
  if (n.op_type() != "LayerNormalization" || !n.is_onnx_domain()) return false;
  if (n.num_outputs() < 1 || n.num_outputs() > 3 || n.num_inputs() < 2 || n.num_inputs() > 3) return false;
  if (n.attr_i("stash_type", 1) != 1) return false;
  const ir::Value *x = n.input(0), *scale = n.input(1), *b = n.input(2);
  if (!x || x->type.dtype != DType::f32 || !x->type.shape.is_static()) return false;
  const Shape s = x->type.shape.to_shape();
  if (s.empty() || shape_size(s) == 0) return false;
  const int64_t axis = norm_axis(n, static_cast<int64_t>(s.size()));
  if (axis < 0 || axis >= static_cast<int64_t>(s.size())) return false;
  const Shape norm(s.begin() + axis, s.end());
  if (!scale || !scale->is_constant() || !param_broadcasts(scale->constant(), norm)) return false;
  if (b && (!b->is_constant() || !param_broadcasts(b->constant(), norm))) return false;
  return true;
}

std::unique_ptr<Node> make_layer_norm_node(const ir::Node& n) { return std::make_unique<LayerNormNode>(n); }

}  // namespace kiln::cpu
