// Reduce: ReduceSum / ReduceMean / ReduceMax / ReduceMin / ReduceProd / ReduceL1 /
// ReduceL2 / ReduceSumSquare on oneDNN's reduction, plain in and out. Axes come from the
// attribute or a constant input; keepdims only changes the output's shape (the plain
// bytes are the same), so the primitive always sees dst with 1s on the reduced dims.
// oneDNN has JIT kernels when the reduced dims are the innermost ones (e.g. BERT's
// decomposed LayerNorm: ReduceMean over the last axis, or global pooling over H, W);
// Sum / Mean / Max / Min over a run of adjacent dims that is not innermost (e.g. ReduceMean
// over H of [N, C, H, W], a text recogniser collapsing the height) run on kiln's own loop over
// the input viewed as [outer, reduced, inner], vectorised along `inner`; oneDNN would take its
// reference kernel there (20x slower). Other patterns run oneDNN's reference kernel, still in
// f32 and parallel.
// Left on Reference: ReduceLogSum / ReduceLogSumExp, empty axes with
// noop_with_empty_axes=1 (identity), and reductions whose reduced dims are all 1.
#include <omp.h>

#include <algorithm>

#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

namespace {

using dnnl::memory;

// f32 row-major (the shapes here are non-empty, rank <= DNNL_MAX_NDIMS: see supports())

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

// The input as [outer, reduced, inner] when the reduced dims of s (1 in out) are one run of
// adjacent dims (dims of size 1 anywhere do not matter) with something after it; else nullopt.
struct MiddleRun {
  int64_t outer = 1, reduced = 1, inner = 1;
};
std::optional<MiddleRun> middle_run(const Shape& s, const Shape& out) {
  MiddleRun m;
  int state = 0;  // 0: before the run, 1: in it, 2: after it
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == 1) continue;
    const bool reduced = out[i] == 1;
    if (reduced && state == 2) return std::nullopt;  // a second run
    if (reduced) state = 1;
    else if (state == 1) state = 2;
    (state == 0 ? m.outer : state == 1 ? m.reduced : m.inner) *= s[i];
  }
  if (m.inner == 1 || m.reduced == 1) return std::nullopt;  // innermost: oneDNN's JIT does it
  return m;
}

enum class MiddleOp { sum, mean, max, min };

// y[o, i] = op over r of x[o, r, i]; rows of `inner` split into chunks so a small `outer`
// still spreads over the team. Max / Min propagate NaN.
void reduce_middle(const float* x, float* y, const MiddleRun& m, MiddleOp op) {
  const int64_t chunk = std::min<int64_t>(m.inner, 1024);
  const int64_t chunks = (m.inner + chunk - 1) / chunk;
#pragma omp parallel for schedule(static)
  for (int64_t job = 0; job < m.outer * chunks; ++job) {
    const int64_t o = job / chunks, i0 = (job % chunks) * chunk, n = std::min(chunk, m.inner - i0);
    const float* src = x + o * m.reduced * m.inner + i0;
    float* dst = y + o * m.inner + i0;
    std::copy(src, src + n, dst);
    for (int64_t r = 1; r < m.reduced; ++r) {
      const float* row = src + r * m.inner;
      switch (op) {
        case MiddleOp::sum:
        case MiddleOp::mean:
          for (int64_t i = 0; i < n; ++i) dst[i] += row[i];
          break;
        case MiddleOp::max:
          for (int64_t i = 0; i < n; ++i) dst[i] = (dst[i] > row[i] || dst[i] != dst[i]) ? dst[i] : row[i];
          break;
        case MiddleOp::min:
          for (int64_t i = 0; i < n; ++i) dst[i] = (dst[i] < row[i] || dst[i] != dst[i]) ? dst[i] : row[i];
          break;
      }
    }
    if (op == MiddleOp::mean) {
      const float scale = 1.0f / static_cast<float>(m.reduced);
      for (int64_t i = 0; i < n; ++i) dst[i] *= scale;
    }
  }
}

// The loop's op for oneDNN's algorithm, when the loop has it.
std::optional<MiddleOp> middle_op(dnnl::algorithm alg) {
  using A = dnnl::algorithm;
  if (alg == A::reduction_sum) return MiddleOp::sum;
  if (alg == A::reduction_mean) return MiddleOp::mean;
  if (alg == A::reduction_max) return MiddleOp::max;
  if (alg == A::reduction_min) return MiddleOp::min;
  return std::nullopt;
}

class ReduceNode : public Node {
 public:
  explicit ReduceNode(const ir::Node& n) : Node(n) {}
  const char* type() const override { return "Reduce"; }
  NodeKind kind() const override { return NodeKind::Reduce; }

  std::vector<InputLayout> prepare() override {
    const Shape& s = inputs[0]->shape;
    auto out = reduced_shape(*source, s);
    auto alg = reduce_alg(source->op_type());
    KILN_CHECK(out && alg, cat(source->describe(), ": not a reduction the Reduce node takes"));
    outputs[0]->blocked.reset();
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    req[0] = InputLayout::plain();
    middle_ = middle_run(s, *out);
    op_ = middle_op(alg->alg);
    if (middle_ && op_) {
      impl = "kiln:strided";
      return req;
    }
    middle_.reset();
    src_md_ = *plain_desc(s, DType::f32);
    dst_md_ = *plain_desc(*out, DType::f32);
    pd_ = dnnl::reduction::primitive_desc(dnnl::reduction::desc(alg->alg, src_md_, dst_md_, alg->p, 0.0f),
                                          cpu_engine());
    prim_ = dnnl::reduction(pd_);
    impl = pd_.impl_info_str();
    return req;
  }

  void execute(dnnl::stream& stream) override {
    if (middle_) {
      reduce_middle(static_cast<const float*>(inputs[0]->data), static_cast<float*>(outputs[0]->data), *middle_, *op_);
      return;
    }
    memory src(src_md_, cpu_engine(), inputs[0]->data);
    memory dst(dst_md_, cpu_engine(), outputs[0]->data);
    prim_.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  }

 private:
  std::optional<MiddleRun> middle_;  // set: kiln's loop instead of the primitive
  std::optional<MiddleOp> op_;
  memory::desc src_md_, dst_md_;
  dnnl::reduction::primitive_desc pd_;
  dnnl::reduction prim_;
};

}  // namespace

bool reduce_supports(const ir::Node& n) {
  if (!n.is_onnx_domain() || !reduce_alg(n.op_type()) || n.num_outputs() != 1) return false;
  if (n.num_inputs() < 1 || n.num_inputs() > 2) return false;
  const ir::Value* x = n.input(0);
  if (!x || x->type.dtype != DType::f32 || !x->type.shape.is_static()) return false;
  const Shape s = x->type.shape.to_shape();
  if (s.empty() || s.size() > DNNL_MAX_NDIMS || shape_size(s) == 0) return false;
  return reduced_shape(n, s).has_value();
}

std::unique_ptr<Node> make_reduce_node(const ir::Node& n) { return std::make_unique<ReduceNode>(n); }

}  // namespace kiln::cpu
