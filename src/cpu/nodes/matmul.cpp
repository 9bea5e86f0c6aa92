// MatMul: ONNX MatMul of two activations (numpy semantics: batched, batch dims
// broadcast, 1-D operands promoted and their unit dim dropped) on oneDNN's matmul,
// e.g. BERT's attention scores [1,12,128,64] x [1,12,64,128]. Operands are padded with
// leading 1s to the same rank, which is how oneDNN broadcasts batch dims. Plain
// layouts in and out. (MatMul with a constant 2-D weight is FullyConnected.)
#include <algorithm>

#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

namespace {

using dnnl::memory;

memory::desc dense_desc(const memory::dims& d) {
  memory::dims strides(d.size());
  memory::dim s = 1;
  for (size_t i = d.size(); i-- > 0;) {
    strides[i] = s;
    s *= d[i];
  }
  return memory::desc(d, memory::data_type::f32, strides);
}

// The operand shapes as oneDNN sees them: a [..., M, K], b [..., K, N], dst [..., M, N],
// all of the same rank (>= 2); nullopt when they do not multiply.
struct MatMulDims {
  memory::dims a, b, dst;
};

std::optional<MatMulDims> matmul_dims(Shape a, Shape b) {
  if (a.empty() || b.empty()) return std::nullopt;
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  const size_t rank = std::max(a.size(), b.size());
  while (a.size() < rank) a.insert(a.begin(), 1);
  while (b.size() < rank) b.insert(b.begin(), 1);
  if (a[rank - 1] != b[rank - 2]) return std::nullopt;
  MatMulDims d{to_dims(a), to_dims(b), memory::dims(rank)};
  for (size_t i = 0; i + 2 < rank; ++i) {
    if (a[i] != b[i] && a[i] != 1 && b[i] != 1) return std::nullopt;
    d.dst[i] = std::max(a[i], b[i]);
  }
  d.dst[rank - 2] = a[rank - 2];
  d.dst[rank - 1] = b[rank - 1];
  return d;
}

class MatMulNode : public Node {
 public:
  explicit MatMulNode(const ir::Node& n) : Node(n) {}
  const char* type() const override { return "MatMul"; }
  NodeKind kind() const override { return NodeKind::MatMul; }

  std::vector<InputLayout> prepare() override {
    auto d = matmul_dims(inputs[0]->shape, inputs[1]->shape);
    KILN_CHECK(d.has_value(), cat(source->describe(), ": operands do not multiply"));
    a_md_ = dense_desc(d->a);
    b_md_ = dense_desc(d->b);
    dst_md_ = dense_desc(d->dst);
    auto made = cached_primitive<dnnl::matmul::primitive_desc, dnnl::matmul>(dnnl::matmul::desc(a_md_, b_md_, dst_md_),
                                                                            dnnl::primitive_attr());
    pd_ = made.pd;
    prim_ = made.prim;
    impl = pd_.impl_info_str();
    outputs[0]->blocked.reset();
    return {InputLayout::plain(), InputLayout::plain()};
  }

  void execute(dnnl::stream& stream) override {
    memory a(a_md_, cpu_engine(), inputs[0]->data);
    memory b(b_md_, cpu_engine(), inputs[1]->data);
    memory dst(dst_md_, cpu_engine(), outputs[0]->data);
    prim_.execute(stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, dst}});
  }

 private:
  memory::desc a_md_, b_md_, dst_md_;
  dnnl::matmul::primitive_desc pd_;
  dnnl::matmul prim_;
};

}  // namespace

bool matmul_supports(const ir::Node& n) {
  if (n.op_type() != "MatMul" || !n.is_onnx_domain() || n.num_inputs() != 2 || n.num_outputs() != 1) return false;
  const ir::Value *a = n.input(0), *b = n.input(1);
  for (const ir::Value* v : {a, b})
    if (!v || v->type.dtype != DType::f32 || !v->type.shape.is_static() ||
        v->type.shape.elements() == 0)
      return false;
  auto d = matmul_dims(a->type.shape.to_shape(), b->type.shape.to_shape());
  return d && d->dst.size() <= DNNL_MAX_NDIMS;
}

std::unique_ptr<Node> make_matmul_node(const ir::Node& n) { return std::make_unique<MatMulNode>(n); }

}  // namespace kiln::cpu
