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
// layer. With two directions and a team of two or more threads, each direction is its own
// primitive and the two run at once, one thread each, writing their slices of Y directly;
// otherwise one primitive computes them, and Y [T, D, N, H] is its dst_layer [T, N, D*H]
// when N or D is 1, else a reorder permutes it into Y from a buffer of the node.
#include <omp.h>

#include <cstring>

#include "core/strings.hpp"
#include "cpu/arena.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/gemm_f32.hpp"
#include "cpu/lstm_f32.hpp"
#include "cpu/nodes/node_factory.hpp"
#include "cpu/nodes/rnn_forms.hpp"
#include "cpu/weights_cache.hpp"

namespace kiln::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

// oneDNN gate g (i, f, c, o) is ONNX gate kOnnxGate[g] (ONNX order i, o, f, c).
constexpr int kOnnxGate[4] = {0, 2, 3, 1};

class LstmNode : public Node {
 public:
  explicit LstmNode(const ir::Node& n) : Node(n) {}
  const char* type() const override { return "LSTM"; }
  NodeKind kind() const override { return NodeKind::LSTM; }

  std::vector<InputLayout> prepare() override {
    const Shape& x = inputs[0]->shape;  // [T, N, C]
    T_ = x[0], N_ = x[1], C_ = x[2];
    D_ = rnn_directions(*source);
    H_ = inputs[2]->shape[2];  // R [D, 4H, H]
    const std::string dir = source->attr_s("direction", "forward");
    src_layer_ = memory::desc({T_, N_, C_}, memory::data_type::f32, tag::tnc);
    has_h0_ = input(5) != nullptr;
    has_c0_ = input(6) != nullptr;
    // kiln's kernel where the CPU runs it: nothing made per sequence length, and about twice
    // as fast as oneDNN's lstm_forward on a recogniser's BiLSTM (lstm_f32.hpp)
    kiln_kernel_ = lstm_f32::available();
    if (kiln_kernel_) return prepare_kiln_kernel(dir);
    // Two directions and two threads: each direction is a primitive of its own, run at the
    // same time on one thread each (a direction's steps depend on each other, so splitting
    // one step over the team costs a barrier per step: 200 steps of a recogniser's BiLSTM run
    // 2.3x faster this way). The directions then write Y as strided views, no permute.
    split_ = D_ == 2 && omp_get_max_threads() >= 2;
    parts_.clear();
    if (split_) {
      parts_.push_back(make_part(0, 1, dnnl::rnn_direction::unidirectional_left2right));
      parts_.push_back(make_part(1, 1, dnnl::rnn_direction::unidirectional_right2left));
    } else {
      parts_.push_back(make_part(0, D_, dir == "bidirectional" ? dnnl::rnn_direction::bidirectional_concat
                                        : dir == "reverse"     ? dnnl::rnn_direction::unidirectional_right2left
                                                               : dnnl::rnn_direction::unidirectional_left2right));
    }
    impl = parts_[0].pd.impl_info_str();
    // one primitive over both directions writes [T, N, D*H]: Y [T, D, N, H] is that only when
    // N or D is 1; else it writes a staging buffer that a reorder permutes into Y
    permute_ = !split_ && D_ > 1 && N_ > 1;
    if (permute_) {
      const auto f32 = memory::data_type::f32;
      reorder_src_ = memory::desc({T_, N_, D_, H_}, f32, memory::dims{N_ * D_ * H_, D_ * H_, H_, 1});
      reorder_dst_ = memory::desc({T_, N_, D_, H_}, f32, memory::dims{D_ * N_ * H_, H_, N_ * H_, 1});
      permute_prim_ = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), reorder_src_, cpu_engine(), reorder_dst_));
    }
    staging_bytes_ = permute_ || !output(0) ? static_cast<size_t>(T_ * N_ * D_ * H_) * sizeof(float) : 0;
    return plain_layouts();
  }

  size_t scratch_bytes() const override { return kiln_kernel_ ? lstm_f32::scratch_bytes(kg_) : staging_bytes_; }

  void execute(dnnl::stream& stream) override {
    if (kiln_kernel_) {
      auto data = [](const Edge* e) { return e ? static_cast<float*>(e->data) : nullptr; };
      lstm_f32::run(kg_, kw_, data(inputs[0]), has_h0_ ? data(input(5)) : nullptr, has_c0_ ? data(input(6)) : nullptr,
                    data(output(0)), data(output(1)), data(output(2)), scratch, threads_);
      return;
    }
    if (!split_) {
      run_part(parts_[0], stream, nullptr);
      if (permute_) {
        memory from(reorder_src_, cpu_engine(), scratch), to(reorder_dst_, cpu_engine(), output(0)->data);
        permute_prim_.execute(stream, from, to);
      }
      return;
    }
    // the parts' scratchpads, side by side in this thread's buffer for them (shared by every
    // split LSTM this thread runs, of every plan: they run one at a time)
    thread_local Arena scratch;
    const size_t first = Arena::aligned(parts_[0].pd.scratchpad_desc().get_size());
    char* base = static_cast<char*>(scratch.reserve(first + parts_[1].pd.scratchpad_desc().get_size()));
    memory pads[2] = {memory(parts_[0].pd.scratchpad_desc(), cpu_engine(), base),
                      memory(parts_[1].pd.scratchpad_desc(), cpu_engine(), base + first)};
    stream.wait();  // what came before is done
#pragma omp parallel num_threads(2)
    {
      // oneDNN runs a primitive called inside a parallel region on the calling thread alone;
      // a team of one (the caller inside a parallel region already) runs both parts
      const int t = omp_get_thread_num(), team = omp_get_num_threads();
      dnnl::stream own(cpu_engine());
      for (int part = t; part < 2; part += team) run_part(parts_[static_cast<size_t>(part)], own, &pads[part]);
      own.wait();
    }
  }

 private:
  // Outputs plain; X and the initial states wanted plain.
  std::vector<InputLayout> plain_layouts() {
    for (Edge* e : outputs)
      if (e) e->blocked.reset();
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    req[0] = InputLayout::plain();
    if (has_h0_) req[5] = InputLayout::plain();
    if (has_c0_) req[6] = InputLayout::plain();
    return req;
  }

  // W^T and R^T in gemm_f32's panels per direction (once per model, through the weights cache),
  // the two biases summed; ONNX's gate order is kept.
  std::vector<InputLayout> prepare_kiln_kernel(const std::string& dir) {
    kg_ = {T_, N_, C_, H_, D_, dir == "reverse"};
    kw_ = {};
    const int64_t H = H_, G4 = 4 * H_;
    for (int64_t d = 0; d < D_; ++d) {
      auto pack = [&](const Edge* e, int64_t K, const char* which) {
        const memory::desc packed({gemm_f32::packed_size(K, G4)}, memory::data_type::f32, tag::a);
        return pack_weights(e->constant, cat("lstm/kiln/", which, "/", d), packed, [&](memory& dst) {
          // B(k, n) = W[d][n][k]: the transpose of the ONNX [4H, K] matrix
          gemm_f32::pack_b(static_cast<const float*>(e->data) + d * G4 * K, K, G4, 1, K, 1.0f,
                           static_cast<float*>(dst.get_data_handle()));
        }, WeightsCache::Pages::streamed);
      };
      kpacked_[d][0] = pack(inputs[1], C_, "W");
      kpacked_[d][1] = pack(inputs[2], H, "R");
      kw_.w[d] = static_cast<const float*>(kpacked_[d][0].get_data_handle());
      kw_.r[d] = static_cast<const float*>(kpacked_[d][1].get_data_handle());
      kbias_[d].clear();
      if (const Edge* B = input(3)) {  // [D, 8H]: Wb then Rb
        const float* row = static_cast<const float*>(B->data) + d * 8 * H;
        kbias_[d].resize(static_cast<size_t>(G4));
        for (int64_t j = 0; j < G4; ++j) kbias_[d][static_cast<size_t>(j)] = row[j] + row[G4 + j];
        kw_.bias[d] = kbias_[d].data();
      }
    }
    threads_ = std::max(1, omp_get_max_threads());
    impl = lstm_f32::impl_name();
    return plain_layouts();
  }

  // One primitive: directions [d0, d0 + nd) of the op.
  struct Part {
    int64_t d0 = 0, nd = 1;
    dnnl::lstm_forward::primitive_desc pd;
    dnnl::lstm_forward prim;
    memory::desc states, dst_layer;
    memory weights_layer, weights_iter, bias;
  };

  Part make_part(int64_t d0, int64_t nd, dnnl::rnn_direction direction) {
    const auto f32 = memory::data_type::f32;
    const int64_t D = D_, N = N_, H = H_, C = C_;
    Part p;
    p.d0 = d0;
    p.nd = nd;
    p.states = memory::desc({1, nd, N, H}, f32, tag::ldnc);
    // one direction of Y [T, D, N, H] as [T, N, H]; or both directions as [T, N, D*H]
    p.dst_layer = nd == 1 && D > 1 ? memory::desc({T_, N, H}, f32, memory::dims{D * N * H, H, 1})
                                   : memory::desc({T_, N, nd * H}, f32, tag::tnc);
    const memory::desc none;
    auto d = dnnl::lstm_forward::desc(dnnl::prop_kind::forward_inference, direction, src_layer_, has_h0_ ? p.states : none,
                                      has_c0_ ? p.states : none, memory::desc({1, nd, C, 4, H}, f32, tag::any),
                                      memory::desc({1, nd, H, 4, H}, f32, tag::any), memory::desc({1, nd, 4, H}, f32, tag::ldgo),
                                      p.dst_layer, output(1) ? p.states : none, output(2) ? p.states : none);
    dnnl::primitive_attr attr;
    if (split_) attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // the parts run at once: one each
    p.pd = dnnl::lstm_forward::primitive_desc(d, attr, cpu_engine());
    p.prim = dnnl::lstm_forward(p.pd);

    // W / R: ONNX [D, 4H, K] (gates i, o, f, c) -> ldigo [1, nd, K, 4, H] (gates i, f, c, o) -> the primitive's layout
    auto pack = [&](const Edge* e, const memory::desc& target, int64_t K, const char* which) {
      return pack_weights(e->constant, cat("lstm/", which, "/", d0, "/", nd), target, [&](memory& dst) {
        const float* src = static_cast<const float*>(e->data);
        std::vector<float> plain(static_cast<size_t>(nd * K * 4 * H));
        for (int64_t dd = 0; dd < nd; ++dd)
          for (int64_t k = 0; k < K; ++k)
            for (int g = 0; g < 4; ++g)
              for (int64_t h = 0; h < H; ++h)
                plain[static_cast<size_t>(((dd * K + k) * 4 + g) * H + h)] =
                    src[((d0 + dd) * 4 * H + kOnnxGate[g] * H + h) * K + k];
        memory m(memory::desc({1, nd, K, 4, H}, f32, tag::ldigo), cpu_engine(), plain.data());
        reorder_into(m, dst);
      }, WeightsCache::Pages::streamed);
    };
    p.weights_layer = pack(inputs[1], p.pd.weights_layer_desc(), C, "W");
    p.weights_iter = pack(inputs[2], p.pd.weights_iter_desc(), H, "R");
    // bias: Wb + Rb per gate, ldgo [1, nd, 4, H]
    p.bias = memory(memory::desc({1, nd, 4, H}, f32, tag::ldgo), cpu_engine());
    float* b = static_cast<float*>(p.bias.get_data_handle());
    std::memset(b, 0, static_cast<size_t>(nd * 4 * H) * sizeof(float));
    if (const Edge* B = input(3)) {
      const float* src = static_cast<const float*>(B->data);  // [D, 8H]: Wb (i, o, f, c) then Rb
      for (int64_t dd = 0; dd < nd; ++dd) {
        const float* row = src + (d0 + dd) * 8 * H;
        for (int g = 0; g < 4; ++g)
          for (int64_t h = 0; h < H; ++h)
            b[(dd * 4 + g) * H + h] = row[kOnnxGate[g] * H + h] + row[(4 + kOnnxGate[g]) * H + h];
      }
    }
    return p;
  }

  // `scratchpad`: the part's own (split parts), else null (oneDNN's, of this thread)
  void run_part(Part& p, dnnl::stream& stream, const memory* scratchpad) {
    const size_t state_offset = static_cast<size_t>(p.d0 * N_ * H_);  // floats into [D, N, H]
    auto state = [&](const Edge* e) { return static_cast<float*>(e->data) + state_offset; };
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC_LAYER, memory(src_layer_, cpu_engine(), inputs[0]->data)},
        {DNNL_ARG_WEIGHTS_LAYER, p.weights_layer},
        {DNNL_ARG_WEIGHTS_ITER, p.weights_iter},
        {DNNL_ARG_BIAS, p.bias}};
    if (scratchpad) args[DNNL_ARG_SCRATCHPAD] = *scratchpad;
    if (has_h0_) args[DNNL_ARG_SRC_ITER] = memory(p.states, cpu_engine(), state(input(5)));
    if (has_c0_) args[DNNL_ARG_SRC_ITER_C] = memory(p.states, cpu_engine(), state(input(6)));
    float* y = static_cast<float*>(permute_ || !output(0) ? scratch : output(0)->data);
    if (!permute_) y += state_offset;  // a direction's slice of Y [T, D, N, H] starts at d * N * H
    args[DNNL_ARG_DST_LAYER] = memory(p.dst_layer, cpu_engine(), y);
    if (output(1)) args[DNNL_ARG_DST_ITER] = memory(p.states, cpu_engine(), state(output(1)));
    if (output(2)) args[DNNL_ARG_DST_ITER_C] = memory(p.states, cpu_engine(), state(output(2)));
    p.prim.execute(stream, args);
  }

  Edge* input(size_t i) const { return i < inputs.size() ? inputs[i] : nullptr; }
  // Omitted ONNX outputs are values named *_unused with no reader; they are written all the same.
  Edge* output(size_t i) const { return i < outputs.size() ? outputs[i] : nullptr; }

  int64_t T_ = 0, N_ = 0, C_ = 0, D_ = 1, H_ = 0;
  bool has_h0_ = false, has_c0_ = false, split_ = false, permute_ = false;
  memory::desc src_layer_, reorder_src_, reorder_dst_;
  std::vector<Part> parts_;
  dnnl::reorder permute_prim_;
  size_t staging_bytes_ = 0;  // scratch: Y as [T, N, D, H] before the permute, or Y when not wanted
  bool kiln_kernel_ = false;  // lstm_f32 runs it, not oneDNN
  lstm_f32::Geometry kg_;
  lstm_f32::Weights kw_;
  memory kpacked_[2][2];  // per direction: W^T, R^T
  std::vector<float> kbias_[2];
  int threads_ = 1;
};

}  // namespace

bool lstm_supports(const ir::Node& n) {
  if (n.op_type() != "LSTM") return false;
  // the forms oneDNN's LSTM and lstm_f32 compute: layout 0, default activations, no clip /
  // input_forget, full-length sequences
  const auto r = rnn_f32_sizes(n, 4);
  if (!r || n.attr_i("input_forget", 0) != 0) return false;
  const int64_t D = r->D, H = r->H;
  if (!rnn_default_activations(n, {"sigmoid", "tanh", "tanh"})) return false;
  if (!rnn_optional_f32(n, 3, {D, 8 * H}, true) || !rnn_full_length(n, r->T)) return false;  // B, sequence_lens
  if (!rnn_optional_f32(n, 5, {D, r->N, H}, false) || !rnn_optional_f32(n, 6, {D, r->N, H}, false)) return false;
  if (n.num_inputs() > 7 && n.input(7)) return false;  // peepholes
  return rnn_f32_outputs(n);
}

std::unique_ptr<Node> make_lstm_node(const ir::Node& n) { return std::make_unique<LstmNode>(n); }

}  // namespace kiln::cpu
