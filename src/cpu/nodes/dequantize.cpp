// DequantizeLinear, per tensor with a constant scale and zero point, from u8 / s8 to f32:
// y = float(x - zero_point) * scale, the product rounded once as the reference computes it.
// Elementwise, so y takes x's layout (in f32) when it has no padded channels: the 8-bit
// channels-last output of an int8 convolution is read where it lies.
#include <algorithm>
#include <cmath>

#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

namespace {

constexpr int64_t kDequantizeChunk = 1 << 15;  // elements per OpenMP task

template <typename Q>
void dequantize(const Q* x, float* y, int64_t count, float scale, int32_t zp) {
  const int64_t chunks = (count + kDequantizeChunk - 1) / kDequantizeChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t b = c * kDequantizeChunk, e = std::min(count, b + kDequantizeChunk);
#pragma omp simd
    for (int64_t i = b; i < e; ++i) y[i] = static_cast<float>(static_cast<int32_t>(x[i]) - zp) * scale;
  }
}

class DequantizeNode : public Node {
 public:
  explicit DequantizeNode(const ir::Node& n) : Node(n) {}
  const char* type() const override { return "DequantizeLinear"; }
  NodeKind kind() const override { return NodeKind::Dequantize; }

  std::vector<InputLayout> prepare() override {
    scale_ = static_cast<const float*>(inputs[1]->constant.raw())[0];
    signed_ = inputs[0]->dtype == DType::i8;
    if (inputs.size() > 2 && inputs[2]) {
      const void* z = inputs[2]->constant.raw();
      zp_ = signed_ ? int32_t{*static_cast<const int8_t*>(z)} : int32_t{*static_cast<const uint8_t*>(z)};
    }
    impl = signed_ ? "c++_from_s8" : "c++_from_u8";
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    if (!elementwise_layout(*inputs[0], dnnl_f32, *outputs[0])) req[0] = InputLayout::plain();
    return req;
  }

  void execute(dnnl::stream& stream) override {
    stream.wait();  // x may come from a oneDNN primitive
    auto* y = static_cast<float*>(outputs[0]->data);
    const int64_t count = static_cast<int64_t>(outputs[0]->bytes() / sizeof(float));
    if (signed_) dequantize(static_cast<const int8_t*>(inputs[0]->data), y, count, scale_, zp_);
    else dequantize(static_cast<const uint8_t*>(inputs[0]->data), y, count, scale_, zp_);
  }

 private:
  float scale_ = 1.0f;
  int32_t zp_ = 0;
  bool signed_ = false;
};

}  // namespace

bool dequantize_supports(const ir::Node& n) {
  if (n.op_type() != "DequantizeLinear" || !n.is_onnx_domain() || n.num_inputs() < 2 || n.num_outputs() != 1) return false;
  if (n.has_attr("output_dtype") || n.attr_i("block_size", 0) != 0) return false;
  const ir::Value *x = n.input(0), *s = n.input(1), *z = n.input(2);
  if (!x || (x->type.dtype != DType::u8 && x->type.dtype != DType::i8) || !x->type.shape.is_static()) return false;
  if (n.output(0)->type.dtype != DType::f32) return false;
  if (!s || !s->is_constant() || s->constant().dtype() != DType::f32 || s->constant().size() != 1) return false;
  return !z || (z->is_constant() && z->constant().size() == 1 && z->constant().dtype() == x->type.dtype);
}

std::unique_ptr<Node> make_dequantize_node(const ir::Node& n) { return std::make_unique<DequantizeNode>(n); }

}  // namespace kiln::cpu
