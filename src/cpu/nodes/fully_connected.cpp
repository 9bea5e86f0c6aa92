// FullyConnected: an activation times a constant 2-D weight on oneDNN's matmul — ONNX
// Gemm with constant B (transA 0/1, transB 0/1; alpha folded into the weights, beta*C
// into the bias, C constant and broadcastable to [M, N]) and MatMul with a constant
// [K, N] weight and an activation [..., M, K] (leading dims flattened into M). The
// weights are reordered once, at compile time, into the layout the primitive picks
// (format any: blocked for the brgemm kernels), which is what makes it fast; the
// activation and the output are plain.
//
// matmul vs inner_product_forward, single thread on AVX-512 (brgemm kernels for both),
// [128,768]x[768,3072], [128,768]x[768,768], [128,3072]x[3072,768], [1,2048]x[2048,1000]:
// equal within 2% once the weights are in the primitive's layout (a plain [768,3072]
// weight is up to 6x slower). matmul is used: it also takes a 2-D bias through a
// binary post-op and strided (transposed) activations.
#include <cstring>

#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

bool static_f32(const ir::Value* v) {
  return v && v->type.dtype == DType::f32 && v->type.shape.is_static() && shape_size(v->type.shape.to_shape()) > 0;
}

class FullyConnectedNode : public Node {
 public:
  explicit FullyConnectedNode(const ir::Node& n) {
    source = &n;
    name = n.name();
  }
  const char* type() const override { return "FullyConnected"; }

  std::vector<InputLayout> prepare() override {
    const ir::Node& n = *source;
    const bool gemm = n.op_type() == "Gemm";
    const Shape& x = inputs[0]->shape;
    const Shape& w = inputs[1]->shape;
    const bool ta = gemm && n.attr_i("transA", 0) != 0;
    const bool tb = gemm && n.attr_i("transB", 0) != 0;
    const float alpha = gemm ? n.attr_f("alpha", 1.0f) : 1.0f;
    const float beta = gemm ? n.attr_f("beta", 1.0f) : 1.0f;
    const int64_t K = tb ? w[1] : w[0];
    const int64_t N = tb ? w[0] : w[1];
    int64_t M = 1;
    if (gemm) {
      M = ta ? x[1] : x[0];
    } else {
      for (size_t i = 0; i + 1 < x.size(); ++i) M *= x[i];
    }
    const auto f32 = memory::data_type::f32;
    // A: [M, K] row-major, or stored [K, M] when transposed
    src_md_ = ta ? memory::desc({M, K}, f32, memory::dims{1, M}) : memory::desc({M, K}, f32, tag::ab);
    dst_md_ = memory::desc({M, N}, f32, tag::ab);
    memory::desc wei_any({K, N}, f32, tag::any);

    // bias: beta * C, broadcast to [1, N] (matmul bias) or, when it varies along M,
    // expanded to [M, N] and added by a binary post-op
    const bool has_c = gemm && inputs.size() > 2 && inputs[2];
    dnnl::primitive_attr attr;
    memory::desc bias_md;
    std::vector<float> bias_vals;
    if (has_c) {
      const Tensor& c = inputs[2]->constant;
      Shape cs = c.shape();
      while (cs.size() < 2) cs.insert(cs.begin(), 1);
      bias_post_op_ = cs[0] != 1;
      const int64_t rows = bias_post_op_ ? M : 1;
      const int64_t sm = cs[0] == 1 ? 0 : cs[1], sn = cs[1] == 1 ? 0 : 1;
      const float* pc = c.data<float>();
      bias_vals.resize(static_cast<size_t>(rows * N));
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < N; ++j) bias_vals[static_cast<size_t>(i * N + j)] = beta * pc[i * sm + j * sn];
      bias_md = memory::desc({rows, N}, f32, tag::ab);
      if (bias_post_op_) {
        dnnl::post_ops po;
        po.append_binary(dnnl::algorithm::binary_add, bias_md);
        attr.set_post_ops(po);
      }
    }
    auto d = has_c && !bias_post_op_ ? dnnl::matmul::desc(src_md_, wei_any, bias_md, dst_md_)
                               : dnnl::matmul::desc(src_md_, wei_any, dst_md_);
    pd_ = dnnl::matmul::primitive_desc(d, attr, cpu_engine());
    prim_ = dnnl::matmul(pd_);
    impl = pd_.impl_info_str();

    // weights: alpha * B as [K, N] (strided view of B^T when transB), reordered once
    const float* pw = inputs[1]->constant.data<float>();
    std::vector<float> scaled;
    if (alpha != 1.0f) {
      scaled.assign(pw, pw + K * N);
      for (float& v : scaled) v *= alpha;
      pw = scaled.data();
    }
    memory::desc wplain = tb ? memory::desc({K, N}, f32, memory::dims{1, K}) : memory::desc({K, N}, f32, tag::ab);
    memory wsrc(wplain, cpu_engine(), const_cast<float*>(pw));
    weights_ = memory(pd_.weights_desc(), cpu_engine());
    dnnl::stream s(cpu_engine());
    dnnl::reorder(wsrc, weights_).execute(s, wsrc, weights_);
    s.wait();
    if (has_c) {
      bias_ = memory(bias_md, cpu_engine());
      std::memcpy(bias_.get_data_handle(), bias_vals.data(), bias_vals.size() * sizeof(float));
    }
    outputs[0]->blocked.reset();
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    req[0] = InputLayout::plain();
    return req;
  }

  void execute(dnnl::stream& stream) override {
    memory src(src_md_, cpu_engine(), inputs[0]->data);
    memory dst(dst_md_, cpu_engine(), outputs[0]->data);
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights_}, {DNNL_ARG_DST, dst}};
    if (bias_) {
      if (bias_post_op_) args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] = bias_;
      else args[DNNL_ARG_BIAS] = bias_;
    }
    prim_.execute(stream, args);
  }

 private:
  memory::desc src_md_, dst_md_;
  dnnl::matmul::primitive_desc pd_;
  dnnl::matmul prim_;
  memory weights_, bias_;
  bool bias_post_op_ = false;  // bias varies along M: added by a binary post-op
};

}  // namespace

bool fully_connected_supports(const ir::Node& n) {
  if (!n.domain().empty() || n.num_inputs() < 2) return false;
  const ir::Value *a = n.input(0), *b = n.input(1);
  if (!static_f32(a) || !static_f32(b) || !b->is_constant() || a->is_constant()) return false;
  if (b->constant().dtype() != DType::f32 || b->constant().rank() != 2) return false;
  if (n.num_outputs() != 1) return false;
  const Shape as = a->type.shape.to_shape();
  const Shape& bs = b->constant().shape();
  if (n.op_type() == "MatMul") {
    return n.num_inputs() == 2 && !as.empty() && as.back() == bs[0];
  }
  if (n.op_type() != "Gemm" || n.num_inputs() > 3 || as.size() != 2) return false;
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
