// FakeQuantize (kiln domain, from QdqToFakeQuantize) that no host absorbed, with constant
// per-tensor or per-channel (axis 1) ranges, f32: the steps of the post-op list a Convolution or
// Pooling takes when it absorbs one (fusion_rules.cpp fake_quantize_post_ops: max, min, add, mul,
// round half to even, mul, add, each rounded to f32), applied op by op to blocks of the tensor
// that stay in cache, so fused and unfused FakeQuantizes compute alike. This is what a QDQ model
// runs on CPUs without exact int8 kernels (no VNNI): the reference kernel took 3 ms per
// ResNet-50 activation, and oneDNN 2.6's binary primitive with these post-ops has only its
// reference kernel on AVX2. Per-tensor ranges run in any layout; per-channel ones on plain data.
#include <algorithm>
#include <cmath>

#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/fusion_rules.hpp"
#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

namespace {

// The post-ops of `n` (all its inputs' facts), channels along axis 1; nullopt when not fusable.
std::optional<std::vector<PostOp>> fq_ops(const ir::Node& n) {
  std::vector<TensorFacts> facts;
  for (const ir::Value* v : n.inputs()) facts.push_back(v ? facts_of(*v) : TensorFacts{});
  std::vector<const TensorFacts*> ptrs;
  for (size_t i = 0; i < facts.size(); ++i) ptrs.push_back(n.input(i) ? &facts[i] : nullptr);
  std::string why;
  return fake_quantize_post_ops(n, ptrs, facts_of(*n.output(0)), 0, 1, &why);
}

constexpr int64_t kBlock = 4096;  // elements a step runs over before the next step
// 1.5 * 2^23: adding and subtracting it rounds a float below 2^22 in magnitude to an integer, half
// to even (the default rounding mode), in a loop the compiler vectorizes without SSE4.1
constexpr float kRound = 12582912.0f;

class FakeQuantizeNode : public Node {
 public:
  explicit FakeQuantizeNode(const ir::Node& n) : Node(n) {}
  const char* type() const override { return "FakeQuantize"; }
  NodeKind kind() const override { return NodeKind::FakeQuantize; }
  int inplace_input() const override { return 0; }  // elementwise: may write over x

  std::vector<InputLayout> prepare() override {
    const std::vector<PostOp> ops = *fq_ops(*source);  // supports() checked it
    const Shape& x = inputs[0]->shape;
    channels_ = 1;
    steps_.clear();
    for (const PostOp& op : ops) {
      Step st;
      st.op = op.kind == PostOp::Kind::eltwise ? Op::round
              : op.alg == dnnl::algorithm::binary_max ? Op::max
              : op.alg == dnnl::algorithm::binary_min ? Op::min
              : op.alg == dnnl::algorithm::binary_add ? Op::add
                                                       : Op::mul;
      if (st.op != Op::round) {
        st.values.assign(op.constant.data<float>(), op.constant.data<float>() + op.constant.size());
        channels_ = std::max<int64_t>(channels_, op.constant.size());
      }
      steps_.push_back(std::move(st));
    }
    inner_ = 1;
    for (size_t d = 2; d < x.size(); ++d) inner_ *= x[d];
    impl = channels_ > 1 ? "c++_per_channel" : "c++";
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    // one range: elementwise in any layout; per channel: on plain data
    if (channels_ > 1 || !elementwise_layout(*inputs[0], dnnl_f32, *outputs[0])) req[0] = InputLayout::plain();
    return req;
  }

  void execute(dnnl::stream& stream) override {
    stream.wait();  // x may come from a oneDNN primitive
    const auto* x = static_cast<const float*>(inputs[0]->data);
    auto* y = static_cast<float*>(outputs[0]->data);
    const int64_t count = static_cast<int64_t>(outputs[0]->bytes() / sizeof(float));
    // per channel: rows of `inner_` elements, row r in channel r % C; per tensor: blocks
    const int64_t row = channels_ > 1 ? inner_ : kBlock;
    const int64_t rows = (count + row - 1) / row;
    const int64_t C = channels_;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t b = r * row, n = std::min(row, count - b), c = C > 1 ? r % C : 0;
      for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
        const int64_t m = std::min(kBlock, n - i0);
        const float* in = x + b + i0;
        float* out = y + b + i0;
        for (const Step& st : steps_) {
          const float v = st.values.empty() ? 0.0f : st.values[st.values.size() == 1 ? 0 : static_cast<size_t>(c)];
          switch (st.op) {
            // NaN becomes the bound, as oneDNN's max / min post-ops (vmaxps / vminps) give it
            case Op::max: for (int64_t i = 0; i < m; ++i) out[i] = in[i] > v ? in[i] : v; break;
            case Op::min: for (int64_t i = 0; i < m; ++i) out[i] = in[i] < v ? in[i] : v; break;
            case Op::add: for (int64_t i = 0; i < m; ++i) out[i] = in[i] + v; break;
            case Op::mul: for (int64_t i = 0; i < m; ++i) out[i] = in[i] * v; break;
            case Op::round:  // half to even: values here lie in [-levels, 2 levels], far below 2^22
              for (int64_t i = 0; i < m; ++i) out[i] = (in[i] + kRound) - kRound;
              break;
          }
          in = out;  // the next step works on this one's result
        }
      }
    }
  }

 private:
  enum class Op { max, min, add, mul, round };
  struct Step {
    Op op = Op::round;
    std::vector<float> values;  // one, or one per channel
  };
  std::vector<Step> steps_;
  int64_t channels_ = 1, inner_ = 1;
};

}  // namespace

bool fake_quantize_supports(const ir::Node& n) {
  if (n.op_type() != "FakeQuantize" || n.domain() != "kiln" || n.num_inputs() != 5 || n.num_outputs() != 1) return false;
  const ir::Value* x = n.input(0);
  if (!x || x->type.dtype != DType::f32 || !x->type.shape.is_static() || x->type.shape.rank() < 2 ||
      x->type.shape.rank() > DNNL_MAX_NDIMS)
    return false;
  const auto ops = fq_ops(n);
  if (!ops || ops->empty()) return false;
  for (const PostOp& op : *ops) {  // binary max / min / add / mul with a constant, or round
    if (op.kind == PostOp::Kind::eltwise && op.alg == dnnl::algorithm::eltwise_round) continue;
    if (op.kind != PostOp::Kind::binary || op.constant.dtype() != DType::f32) return false;
    using A = dnnl::algorithm;
    if (op.alg != A::binary_max && op.alg != A::binary_min && op.alg != A::binary_add && op.alg != A::binary_mul)
      return false;
  }
  return true;
}

std::unique_ptr<Node> make_fake_quantize_node(const ir::Node& n) { return std::make_unique<FakeQuantizeNode>(n); }

}  // namespace kiln::cpu
