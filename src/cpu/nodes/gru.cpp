// GRU: ONNX GRU on kiln's gru_f32 (forward, reverse, bidirectional; any batch and length; either
// linear_before_reset), for the common form: f32, layout 0 ([seq, batch, input]), the default
// activations (Sigmoid, Tanh), no clip, and every sequence the full length (sequence_lens absent
// or a constant of T). W^T and R^T are packed once per compiled model through the weights cache,
// R's z and r columns apart from its h columns (gru_f32.hpp). Everything else, and a CPU
// without AVX2, runs on the reference kernel.
#include <omp.h>

#include <algorithm>

#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/gemm_f32.hpp"
#include "cpu/gru_f32.hpp"
#include "cpu/nodes/node_factory.hpp"
#include "cpu/nodes/rnn_forms.hpp"
#include "cpu/weights_cache.hpp"

namespace kiln::cpu {

namespace {

using dnnl::memory;

class GruNode : public Node {
 public:
  explicit GruNode(const ir::Node& n) : Node(n) {}
  const char* type() const override { return "GRU"; }
  NodeKind kind() const override { return NodeKind::GRU; }

  std::vector<InputLayout> prepare() override {
    const Shape& x = inputs[0]->shape;  // [T, N, C]
    const int64_t D = rnn_directions(*source), H = inputs[2]->shape[2];  // R [D, 3H, H]
    g_ = {x[0], x[1], x[2], H, D, source->attr_s("direction", "forward") == "reverse",
          source->attr_i("linear_before_reset", 0) != 0};
    w_ = {};
    const int64_t G3 = 3 * H;
    for (int64_t d = 0; d < D; ++d) {
      // B(k, n) = M[d][row0 + n][k]: the transpose of rows [row0, row0 + cols) of an ONNX [3H, K] matrix
      auto pack = [&](const Edge* e, int64_t K, int64_t row0, int64_t cols, const char* which) {
        const memory::desc packed({gemm_f32::packed_size(K, cols)}, memory::data_type::f32, memory::format_tag::a);
        return pack_weights(e->constant, cat("gru/kiln/", which, "/", d), packed, [&](memory& dst) {
          gemm_f32::pack_b(static_cast<const float*>(e->data) + (d * G3 + row0) * K, K, cols, 1, K, 1.0f,
                           static_cast<float*>(dst.get_data_handle()));
        }, WeightsCache::Pages::streamed);
      };
      packed_[d][0] = pack(inputs[1], g_.C, 0, G3, "W");
      packed_[d][1] = pack(inputs[2], H, 0, 2 * H, "Rzr");
      packed_[d][2] = pack(inputs[2], H, 2 * H, H, "Rh");
      w_.w[d] = static_cast<const float*>(packed_[d][0].get_data_handle());
      w_.r_zr[d] = static_cast<const float*>(packed_[d][1].get_data_handle());
      w_.r_h[d] = static_cast<const float*>(packed_[d][2].get_data_handle());
      bias_[d].clear();
      rb_h_[d].clear();
      if (const Edge* B = input(3)) {  // [D, 6H]: Wb (z, r, h) then Rb (z, r, h)
        const float* row = static_cast<const float*>(B->data) + d * 6 * H;
        bias_[d].assign(row, row + G3);
        for (int64_t j = 0; j < 2 * H; ++j) bias_[d][static_cast<size_t>(j)] += row[G3 + j];
        if (g_.linear_before_reset) {
          rb_h_[d].assign(row + G3 + 2 * H, row + 2 * G3);  // inside r * (h Rh^T + Rbh)
          w_.rb_h[d] = rb_h_[d].data();
        } else {
          for (int64_t j = 2 * H; j < G3; ++j) bias_[d][static_cast<size_t>(j)] += row[G3 + j];
        }
        w_.bias[d] = bias_[d].data();
      }
    }
    threads_ = std::max(1, omp_get_max_threads());
    impl = gru_f32::impl_name();
    for (Edge* e : outputs)
      if (e) e->blocked.reset();
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    req[0] = InputLayout::plain();
    if (input(5)) req[5] = InputLayout::plain();
    return req;
  }

  size_t scratch_bytes() const override { return gru_f32::scratch_bytes(g_); }

  void execute(dnnl::stream&) override {
    auto data = [](const Edge* e) { return e ? static_cast<float*>(e->data) : nullptr; };
    gru_f32::run(g_, w_, data(inputs[0]), data(input(5)), data(output(0)), data(output(1)), scratch, threads_);
  }

 private:
  Edge* input(size_t i) const { return i < inputs.size() ? inputs[i] : nullptr; }
  // Omitted ONNX outputs are values named *_unused with no reader; they are written all the same.
  Edge* output(size_t i) const { return i < outputs.size() ? outputs[i] : nullptr; }

  gru_f32::Geometry g_;
  gru_f32::Weights w_;
  memory packed_[2][3];  // per direction: W^T, Rzr^T, Rh^T
  std::vector<float> bias_[2], rb_h_[2];
  int threads_ = 1;
};

}  // namespace

bool gru_supports(const ir::Node& n) {
  if (n.op_type() != "GRU" || !gru_f32::available()) return false;
  // the form gru_f32 computes: layout 0, default activations, no clip, full-length sequences
  const auto r = rnn_f32_sizes(n, 3);
  if (!r) return false;
  const int64_t D = r->D, H = r->H;
  if (!rnn_default_activations(n, {"sigmoid", "tanh"})) return false;
  if (!rnn_optional_f32(n, 3, {D, 6 * H}, true) || !rnn_full_length(n, r->T)) return false;  // B, sequence_lens
  return rnn_optional_f32(n, 5, {D, r->N, H}, false) && rnn_f32_outputs(n);  // initial_h
}

std::unique_ptr<Node> make_gru_node(const ir::Node& n) { return std::make_unique<GruNode>(n); }

}  // namespace kiln::cpu
