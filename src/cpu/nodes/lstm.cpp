// LSTM: ONNX LSTM on oneDNN's lstm_forward (forward, reverse, bidirectional; any batch),
// for the common form: f32, layout 0 ([seq, batch, input]), the default activations
// (Sigmoid, Tanh, Tanh), no clip, no input_forget, no peepholes, and every sequence the
// full length (sequence_lens absent or a constant of T). Everything else runs on the
// reference kernel.
//
// ONNX and oneDNN order the gates differently (ONNX i, o, f, c; oneDNN i, f, c, o) and ONNX
// keeps two biases: the weights are repacked once per compiled model through the weights
// cache (W [D, 4H, C] -> ldigo, R [D, 4H, H] -> ldigo, in the layout the primitive picks) and
// the bias is Wb + Rb in ldgo. The states are plain [D, N, H], which is oneDNN's ldnc with one
// layer. Y [T, D, N, H] is oneDNN's dst_layer [T, N, D*H] when N or D is 1; otherwise the
// primitive writes [T, N, D, H] to a buffer of the node and a reorder permutes it into Y.
#include <cstring>

#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/nodes/node_factory.hpp"
#include "cpu/weights_cache.hpp"

namespace kiln::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

// oneDNN gate g (i, f, c, o) is ONNX gate kOnnxGate[g] (ONNX order i, o, f, c).
constexpr int kOnnxGate[4] = {0, 2, 3, 1};

int64_t directions(const ir::Node& n) { return n.attr_s("direction", "forward") == "bidirectional" ? 2 : 1; }

class LstmNode : public Node {
 public:
  explicit LstmNode(const ir::Node& n) {
    source = &n;
    name = n.name();
  }
  const char* type() const override { return "LSTM"; }

  std::vector<InputLayout> prepare() override {
    const Shape& x = inputs[0]->shape;  // [T, N, C]
    const int64_t T = x[0], N = x[1], C = x[2];
    const int64_t D = directions(*source);
    const int64_t H = inputs[2]->shape[2];  // R [D, 4H, H]
    const auto f32 = memory::data_type::f32;
    const std::string dir = source->attr_s("direction", "forward");
    const auto direction = dir == "bidirectional" ? dnnl::rnn_direction::bidirectional_concat
                           : dir == "reverse"     ? dnnl::rnn_direction::unidirectional_right2left
                                                  : dnnl::rnn_direction::unidirectional_left2right;
    const memory::desc states({1, D, N, H}, f32, tag::ldnc);
    src_layer_ = memory::desc({T, N, C}, f32, tag::tnc);
    has_h0_ = input(5) != nullptr;
    has_c0_ = input(6) != nullptr;
    const memory::desc none;
    dst_layer_ = memory::desc({T, N, D * H}, f32, tag::tnc);
    states_ = states;
    auto d = dnnl::lstm_forward::desc(dnnl::prop_kind::forward_inference, direction, src_layer_, has_h0_ ? states : none,
                                      has_c0_ ? states : none, memory::desc({1, D, C, 4, H}, f32, tag::any),
                                      memory::desc({1, D, H, 4, H}, f32, tag::any), memory::desc({1, D, 4, H}, f32, tag::ldgo),
                                      dst_layer_, output(1) ? states : none, output(2) ? states : none);
    pd_ = dnnl::lstm_forward::primitive_desc(d, cpu_engine());
    prim_ = dnnl::lstm_forward(pd_);
    impl = pd_.impl_info_str();

    // W / R: ONNX [D, 4H, K] (gates i, o, f, c) -> ldigo [1, D, K, 4, H] (gates i, f, c, o) -> the primitive's layout
    auto pack = [&](const Edge* e, const memory::desc& target, int64_t K, const char* which) {
      return pack_weights(e->constant, cat("lstm/", which), target, [&](memory& dst) {
        const float* src = static_cast<const float*>(e->data);
        std::vector<float> plain(static_cast<size_t>(D * K * 4 * H));
        for (int64_t dd = 0; dd < D; ++dd)
          for (int64_t k = 0; k < K; ++k)
            for (int g = 0; g < 4; ++g)
              for (int64_t h = 0; h < H; ++h)
                plain[static_cast<size_t>(((dd * K + k) * 4 + g) * H + h)] =
                    src[(dd * 4 * H + kOnnxGate[g] * H + h) * K + k];
        memory m(memory::desc({1, D, K, 4, H}, f32, tag::ldigo), cpu_engine(), plain.data());
        reorder_into(m, dst);
      });
    };
    weights_layer_ = pack(inputs[1], pd_.weights_layer_desc(), C, "W");
    weights_iter_ = pack(inputs[2], pd_.weights_iter_desc(), H, "R");
    // bias: Wb + Rb per gate, ldgo [1, D, 4, H]
    bias_ = memory(memory::desc({1, D, 4, H}, f32, tag::ldgo), cpu_engine());
    float* b = static_cast<float*>(bias_.get_data_handle());
    std::memset(b, 0, static_cast<size_t>(D * 4 * H) * sizeof(float));
    if (const Edge* B = input(3)) {
      const float* src = static_cast<const float*>(B->data);  // [D, 8H]: Wb (i, o, f, c) then Rb
      for (int64_t dd = 0; dd < D; ++dd)
        for (int g = 0; g < 4; ++g)
          for (int64_t h = 0; h < H; ++h)
            b[(dd * 4 + g) * H + h] = src[dd * 8 * H + kOnnxGate[g] * H + h] + src[dd * 8 * H + (4 + kOnnxGate[g]) * H + h];
    }
    // Y [T, D, N, H] as dims (T, N, D, H): the permute target when the primitive's [T, N, D*H] differs
    permute_ = output(0) && D > 1 && N > 1;
    if (permute_) {
      staging_.resize(static_cast<size_t>(T * N * D * H));
      memory::desc tndh({T, N, D, H}, f32, memory::dims{N * D * H, D * H, H, 1});
      memory::desc y({T, N, D, H}, f32, memory::dims{D * N * H, H, N * H, 1});
      reorder_src_ = tndh;
      reorder_dst_ = y;
      permute_prim_ = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), tndh, cpu_engine(), y));
    }
    for (Edge* e : outputs)
      if (e) e->blocked.reset();
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    req[0] = InputLayout::plain();
    if (has_h0_) req[5] = InputLayout::plain();
    if (has_c0_) req[6] = InputLayout::plain();
    return req;
  }

  void execute(dnnl::stream& stream) override {
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC_LAYER, memory(src_layer_, cpu_engine(), inputs[0]->data)},
        {DNNL_ARG_WEIGHTS_LAYER, weights_layer_},
        {DNNL_ARG_WEIGHTS_ITER, weights_iter_},
        {DNNL_ARG_BIAS, bias_}};
    if (has_h0_) args[DNNL_ARG_SRC_ITER] = memory(states_, cpu_engine(), input(5)->data);
    if (has_c0_) args[DNNL_ARG_SRC_ITER_C] = memory(states_, cpu_engine(), input(6)->data);
    void* y = permute_ ? staging_.data() : (output(0) ? output(0)->data : nullptr);
    if (!y) {  // Y not wanted: the primitive still writes it
      staging_.resize(dst_layer_.get_size() / sizeof(float));
      y = staging_.data();
    }
    args[DNNL_ARG_DST_LAYER] = memory(dst_layer_, cpu_engine(), y);
    if (output(1)) args[DNNL_ARG_DST_ITER] = memory(states_, cpu_engine(), output(1)->data);
    if (output(2)) args[DNNL_ARG_DST_ITER_C] = memory(states_, cpu_engine(), output(2)->data);
    prim_.execute(stream, args);
    if (permute_) {
      memory from(reorder_src_, cpu_engine(), staging_.data()), to(reorder_dst_, cpu_engine(), output(0)->data);
      permute_prim_.execute(stream, from, to);
    }
  }

 private:
  Edge* input(size_t i) const { return i < inputs.size() ? inputs[i] : nullptr; }
  // An output someone may read (graph outputs and consumers); ONNX's omitted outputs are
  // values named *_unused with no reader, still written (they are cheap) when present.
  Edge* output(size_t i) const { return i < outputs.size() ? outputs[i] : nullptr; }

  bool has_h0_ = false, has_c0_ = false, permute_ = false;
  memory::desc src_layer_, dst_layer_, states_, reorder_src_, reorder_dst_;
  dnnl::lstm_forward::primitive_desc pd_;
  dnnl::lstm_forward prim_;
  dnnl::reorder permute_prim_;
  memory weights_layer_, weights_iter_, bias_;
  std::vector<float> staging_;  // Y as [T, N, D, H] before the permute (or Y when not wanted)
};

// The constant tensor of input i, or null when absent or not a constant.
const Tensor* constant_input(const ir::Node& n, size_t i) {
  const ir::Value* v = i < n.num_inputs() ? n.input(i) : nullptr;
  return v && v->is_constant() ? &v->constant() : nullptr;
}

}  // namespace

bool lstm_supports(const ir::Node& n) {
  if (n.op_type() != "LSTM" || !n.domain().empty() || n.num_inputs() < 3) return false;
  const ir::Value* x = n.input(0);
  if (!x || x->type.dtype != DType::f32 || !x->type.shape.is_static() || x->type.shape.rank() != 3) return false;
  const Shape xs = x->type.shape.to_shape();
  if (xs[0] < 1 || xs[1] < 1 || xs[2] < 1) return false;
  const int64_t D = directions(n);
  const Tensor *W = constant_input(n, 1), *R = constant_input(n, 2);
  if (!W || !R || W->dtype() != DType::f32 || R->dtype() != DType::f32 || W->rank() != 3 || R->rank() != 3) return false;
  const int64_t H = R->shape()[2];
  if (H < 1 || W->shape() != Shape{D, 4 * H, xs[2]} || R->shape() != Shape{D, 4 * H, H}) return false;
  if (n.has_attr("hidden_size") && n.attr_i("hidden_size") != H) return false;
  // the forms oneDNN's LSTM computes: layout 0, default activations, no clip / input_forget
  if (n.attr_i("layout", 0) != 0 || n.has_attr("clip") || n.attr_i("input_forget", 0) != 0) return false;
  if (n.has_attr("activations")) {
    std::vector<std::string> acts = n.attr_strings("activations");
    for (size_t i = 0; i < acts.size(); ++i) {
      std::string low;
      for (char c : acts[i]) low += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (low != (i % 3 == 0 ? "sigmoid" : "tanh")) return false;
    }
  }
  if (const Tensor* B = constant_input(n, 3); n.num_inputs() > 3 && n.input(3)) {
    if (!B || B->dtype() != DType::f32 || B->shape() != Shape{D, 8 * H}) return false;
  }
  if (n.num_inputs() > 4 && n.input(4)) {  // sequence_lens: only every sequence at full length
    const Tensor* L = constant_input(n, 4);
    if (!L) return false;
    for (int64_t v : L->to_i64())
      if (v != xs[0]) return false;
  }
  for (size_t i : {size_t(5), size_t(6)})
    if (n.num_inputs() > i && n.input(i)) {
      const ir::Value* s = n.input(i);
      if (s->type.dtype != DType::f32 || !s->type.shape.is_static() ||
          s->type.shape.to_shape() != Shape{D, xs[1], H})
        return false;
    }
  if (n.num_inputs() > 7 && n.input(7)) return false;  // peepholes
  for (const ir::Value* o : n.outputs())
    if (o && o->type.dtype != DType::f32) return false;
  return true;
}

std::unique_ptr<Node> make_lstm_node(const ir::Node& n) { return std::make_unique<LstmNode>(n); }

}  // namespace kiln::cpu
