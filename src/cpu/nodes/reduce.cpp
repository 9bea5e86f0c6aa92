// Reduce: ReduceSum / ReduceMean / ReduceMax / ReduceMin / ReduceProd / ReduceL1 /
// ReduceL2 / ReduceSumSquare on oneDNN's reduction, plain in and out. Axes come from the
// attribute or a constant input; keepdims only changes the output's shape (the plain
// bytes are the same), so the primitive always sees dst with 1s on the reduced dims.
// oneDNN has JIT kernels when the reduced dims are the innermost ones (e.g. BERT's
// decomposed LayerNorm: ReduceMean over the last axis, or global pooling over H, W);
// other patterns run its reference kernel, still in f32 and parallel.
// Left on Reference: ReduceLogSum / ReduceLogSumExp, empty axes with
// noop_with_empty_axes=1 (identity), and reductions whose reduced dims are all 1.
#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

namespace {

using dnnl::memory;

// f32 row-major (the shapes here are non-empty, rank <= DNNL_MAX_NDIMS: see supports())
memory::desc dense_desc(const Shape& s) { return *plain_desc(s, DType::f32); }

struct ReduceAlg {
  dnnl::algorithm alg;
  float p = 0.0f;
};

std::optional<ReduceAlg> reduce_alg(const std::string& op) {
  using A = dnnl::algorithm;
  if (op == "ReduceSum") return ReduceAlg{A::reduction_sum};
  if (op == "ReduceMean") return ReduceAlg{A::reduction_mean};
  if (op == "ReduceMax") return ReduceAlg{A::reduction_max};
  if (op == "ReduceMin") return ReduceAlg{A::reduction_min};
  if (op == "ReduceProd") return ReduceAlg{A::reduction_mul};
  if (op == "ReduceL1") return ReduceAlg{A::reduction_norm_lp_sum, 1.0f};
  if (op == "ReduceL2") return ReduceAlg{A::reduction_norm_lp_sum, 2.0f};
  if (op == "ReduceSumSquare") return ReduceAlg{A::reduction_norm_lp_power_p_sum, 2.0f};
  return std::nullopt;
}

// The input shape with the reduced dims set to 1 (what oneDNN's dst looks like), or
// nullopt when the node is not a reduction this kind takes.
std::optional<Shape> reduced_shape(const ir::Node& n, const Shape& s) {
  std::vector<int64_t> axes;
  if (n.has_input(1)) {
    const ir::Value* a = n.input(1);
    if (!a->is_constant() || n.has_attr("axes")) return std::nullopt;
    const Tensor& t = a->constant();
    if ((t.dtype() != DType::i64 && t.dtype() != DType::i32) || t.rank() > 1) return std::nullopt;
    axes = t.to_i64();
  } else {
    axes = n.attr_ints("axes", {});
  }
  const int64_t rank = static_cast<int64_t>(s.size());
  Shape out = s;
  if (axes.empty()) {
    if (n.attr_i("noop_with_empty_axes", 0) != 0) return std::nullopt;
    for (auto& d : out) d = 1;
  } else {
    std::vector<bool> seen(s.size(), false);
    for (int64_t a : axes) {
      if (a < 0) a += rank;
      if (a < 0 || a >= rank || seen[static_cast<size_t>(a)]) return std::nullopt;
      seen[static_cast<size_t>(a)] = true;
      out[static_cast<size_t>(a)] = 1;
    }
  }
  if (out == s) return std::nullopt;  // nothing to reduce: oneDNN rejects it
  return out;
}

class ReduceNode : public Node {
 public:
  explicit ReduceNode(const ir::Node& n) {
    source = &n;
    name = n.name();
  }
  const char* type() const override { return "Reduce"; }

  std::vector<InputLayout> prepare() override {
    const Shape& s = inputs[0]->shape;
    auto out = reduced_shape(*source, s);
    auto alg = reduce_alg(source->op_type());
    KILN_CHECK(out && alg, cat(source->describe(), ": not a reduction the Reduce node takes"));
    src_md_ = dense_desc(s);
    dst_md_ = dense_desc(*out);
    pd_ = dnnl::reduction::primitive_desc(dnnl::reduction::desc(alg->alg, src_md_, dst_md_, alg->p, 0.0f),
                                          cpu_engine());
    prim_ = dnnl::reduction(pd_);
    impl = pd_.impl_info_str();
    outputs[0]->blocked.reset();
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    req[0] = InputLayout::plain();
    return req;
  }

  void execute(dnnl::stream& stream) override {
    memory src(src_md_, cpu_engine(), inputs[0]->data);
    memory dst(dst_md_, cpu_engine(), outputs[0]->data);
    prim_.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  }

 private:
  memory::desc src_md_, dst_md_;
  dnnl::reduction::primitive_desc pd_;
  dnnl::reduction prim_;
};

}  // namespace

bool reduce_supports(const ir::Node& n) {
  if (!n.domain().empty() || !reduce_alg(n.op_type()) || n.num_outputs() != 1) return false;
  if (n.num_inputs() < 1 || n.num_inputs() > 2) return false;
  const ir::Value* x = n.input(0);
  if (!x || x->type.dtype != DType::f32 || !x->type.shape.is_static()) return false;
  const Shape s = x->type.shape.to_shape();
  if (s.empty() || s.size() > DNNL_MAX_NDIMS || shape_size(s) == 0) return false;
  return reduced_shape(n, s).has_value();
}

std::unique_ptr<Node> make_reduce_node(const ir::Node& n) { return std::make_unique<ReduceNode>(n); }

}  // namespace kiln::cpu
