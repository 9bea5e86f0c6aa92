// DynamicQuantizeLinear: x (f32) -> y (u8), y_scale, y_zero_point, as the reference kernel
// (ops/quant.cpp) and ONNX Runtime compute it: the range [min(0, min x), max(0, max x)] mapped
// onto 0..255, y = saturate(round_half_even(x / scale) + zero_point). Two passes over x on
// the stream's threads: the range (min / max are exact in any order), then the quantization
// (a division, as the reference does, not a multiplication by 1 / scale), in AVX-512 / AVX2
// intrinsics where the ISA in use has them.
// QuantizeLinear with a constant scale and zero point (per tensor, u8 / s8: the activations of
// a QDQ model) is the second pass alone, bit-exact with the reference too.
//
// x may come in a blocked layout: y takes the same layout in u8 (elementwise). A layout that
// pads channels is taken plain instead, so y's padding never holds a zero point.
#include <algorithm>
#include <cmath>

#include <immintrin.h>

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps(), which -Wmaybe-uninitialized
// reports as uninitialised when they are inlined into a target("avx512f") function.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/isa.hpp"
#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

namespace {

// Both passes in three versions: AVX-512, AVX2 and plain C++ (SSE4.1 CPUs), picked by the ISA
// in use (cpu/isa.hpp, so KILN_MAX_CPU_ISA caps it). min / max take the running value as the
// second operand, which x86 returns when x is NaN: NaN is skipped as in the reference.

void range_plain(const float* x, int64_t n, float& lo, float& hi) {
  for (int64_t i = 0; i < n; ++i) lo = x[i] < lo ? x[i] : lo, hi = x[i] > hi ? x[i] : hi;
}

// The output's range: u8 [0, 255] or s8 [-128, 127] (stored as its two's complement byte).
struct Bounds {
  float lo = 0.0f, hi = 255.0f;
  bool is_signed() const { return lo < 0.0f; }
};

uint8_t quantize_one(float x, float scale, float zp, Bounds b) {
  float r = std::nearbyint(x / scale) + zp;
  r = r >= b.lo ? r : b.lo;  // NaN -> lo
  return static_cast<uint8_t>(static_cast<int32_t>(r > b.hi ? b.hi : r));
}

void quantize_plain(const float* x, int64_t n, float scale, float zp, Bounds b, uint8_t* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = quantize_one(x[i], scale, zp, b);
}

__attribute__((target("avx512f,avx512bw"))) void range_avx512(const float* x, int64_t n, float& lo, float& hi) {
  __m512 vlo = _mm512_setzero_ps(), vhi = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    vlo = _mm512_min_ps(v, vlo);
    vhi = _mm512_max_ps(v, vhi);
  }
  if (i < n) {  // the masked lanes read 0, which the range holds anyway
    const __m512 v = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << (n - i)) - 1), x + i);
    vlo = _mm512_min_ps(v, vlo);
    vhi = _mm512_max_ps(v, vhi);
  }
  alignas(64) float l[16], h[16];
  _mm512_store_ps(l, vlo);
  _mm512_store_ps(h, vhi);
  for (int k = 0; k < 16; ++k) lo = std::min(lo, l[k]), hi = std::max(hi, h[k]);
}

__attribute__((target("avx512f,avx512bw"))) inline __m512i quantize16(__m512 v, __m512 scale, __m512 zp, __m512 lo,
                                                                      __m512 hi) {
  __m512 r = _mm512_roundscale_ps(_mm512_div_ps(v, scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  r = _mm512_max_ps(_mm512_add_ps(r, zp), lo);  // NaN -> lo
  return _mm512_cvtps_epi32(_mm512_min_ps(r, hi));
}

// (the bytes of the in-range int32 values are the u8 / s8 results)
__attribute__((target("avx512f,avx512bw"))) void quantize_avx512(const float* x, int64_t n, float scale, float zp,
                                                                  Bounds b, uint8_t* y) {
  const __m512 vs = _mm512_set1_ps(scale), vz = _mm512_set1_ps(zp), lo = _mm512_set1_ps(b.lo), hi = _mm512_set1_ps(b.hi);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm512_cvtepi32_epi8(quantize16(_mm512_loadu_ps(x + i), vs, vz, lo, hi)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_cvtepi32_storeu_epi8(y + i, m, quantize16(_mm512_maskz_loadu_ps(m, x + i), vs, vz, lo, hi));
  }
}

__attribute__((target("avx2"))) void range_avx2(const float* x, int64_t n, float& lo, float& hi) {
  __m256 vlo = _mm256_setzero_ps(), vhi = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    vlo = _mm256_min_ps(v, vlo);
    vhi = _mm256_max_ps(v, vhi);
  }
  alignas(32) float l[8], h[8];
  _mm256_store_ps(l, vlo);
  _mm256_store_ps(h, vhi);
  for (int k = 0; k < 8; ++k) lo = std::min(lo, l[k]), hi = std::max(hi, h[k]);
  range_plain(x + i, n - i, lo, hi);
}

__attribute__((target("avx2"))) void quantize_avx2(const float* x, int64_t n, float scale, float zp, Bounds b,
                                                    uint8_t* y) {
  const __m256 vs = _mm256_set1_ps(scale), vz = _mm256_set1_ps(zp), lo = _mm256_set1_ps(b.lo),
               hi = _mm256_set1_ps(b.hi);
  const bool is_signed = b.is_signed();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 r = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + i), vs), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(r, vz), lo), hi);  // NaN -> lo
    const __m256i w = _mm256_cvtps_epi32(r);
    const __m128i a = _mm256_castsi256_si128(w), c = _mm256_extracti128_si256(w, 1);
    const __m128i p16 = is_signed ? _mm_packs_epi32(a, c) : _mm_packus_epi32(a, c);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y + i), is_signed ? _mm_packs_epi16(p16, p16) : _mm_packus_epi16(p16, p16));
  }
  quantize_plain(x + i, n - i, scale, zp, b, y + i);
}

// Chunks of this many elements per OpenMP task (whole cache lines, enough work per thread).
constexpr int64_t kQuantizeChunk = 1 << 16;

enum class Kernels { avx512, avx2, plain };

Kernels kernels_for_isa() {
  return isa_at_least(Isa::avx512_core) ? Kernels::avx512 : isa_at_least(Isa::avx2) ? Kernels::avx2 : Kernels::plain;
}
const char* kernels_name(Kernels k) { return k == Kernels::avx512 ? "avx512" : k == Kernels::avx2 ? "avx2" : "c++"; }

// y = saturate(round_half_even(x / scale) + zp) over `count` elements, on the stream's threads.
void quantize_all(Kernels k, const float* x, int64_t count, float scale, float zp, Bounds bounds, uint8_t* y) {
  const int64_t chunks = (count + kQuantizeChunk - 1) / kQuantizeChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t b = c * kQuantizeChunk, n = std::min(kQuantizeChunk, count - b);
    if (k == Kernels::avx512) quantize_avx512(x + b, n, scale, zp, bounds, y + b);
    else if (k == Kernels::avx2) quantize_avx2(x + b, n, scale, zp, bounds, y + b);
    else quantize_plain(x + b, n, scale, zp, bounds, y + b);
  }
}

class DynamicQuantizeNode : public Node {
 public:
  explicit DynamicQuantizeNode(const ir::Node& n) : Node(n) {}
  const char* type() const override { return "DynamicQuantize"; }
  NodeKind kind() const override { return NodeKind::DynamicQuantize; }

  std::vector<InputLayout> prepare() override {
    kernels_ = kernels_for_isa();
    impl = kernels_name(kernels_);  // (the counters add the output type)
    std::vector<InputLayout> req(inputs.size(), InputLayout::plain());
    if (elementwise_layout(*inputs[0], dnnl_u8, *outputs[0])) req[0] = InputLayout::any();
    return req;
  }

  void execute(dnnl::stream& stream) override {
    stream.wait();  // x may come from a oneDNN primitive
    const auto* x = static_cast<const float*>(inputs[0]->data);
    auto* y = static_cast<uint8_t*>(outputs[0]->data);
    const int64_t count = static_cast<int64_t>(inputs[0]->bytes() / sizeof(float));
    const int64_t chunks = (count + kQuantizeChunk - 1) / kQuantizeChunk;
    const bool avx512 = kernels_ == Kernels::avx512, avx2 = kernels_ == Kernels::avx2;
    float lo = 0.0f, hi = 0.0f;  // the range includes 0
#pragma omp parallel for reduction(min : lo) reduction(max : hi) schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t b = c * kQuantizeChunk, n = std::min(kQuantizeChunk, count - b);
      float l = 0.0f, h = 0.0f;
      if (avx512) range_avx512(x + b, n, l, h);
      else if (avx2) range_avx2(x + b, n, l, h);
      else range_plain(x + b, n, l, h);
      lo = std::min(lo, l);
      hi = std::max(hi, h);
    }
    const float scale = (hi - lo) / 255.0f;
    float zp = 0.0f;
    if (scale != 0.0f && std::isfinite(scale)) zp = std::nearbyint(std::clamp(0.0f - lo / scale, 0.0f, 255.0f));
    *static_cast<float*>(outputs[1]->data) = scale;
    *static_cast<uint8_t*>(outputs[2]->data) = static_cast<uint8_t>(zp);
    if (scale == 0.0f) {  // all zeros: everything quantizes to 0
      std::fill(y, y + count, uint8_t{0});
      return;
    }
    quantize_all(kernels_, x, count, scale, zp, Bounds{}, y);
  }

 private:
  Kernels kernels_ = Kernels::plain;  // by the ISA in use, chosen in prepare()
};

// QuantizeLinear, per tensor, constant scale and zero point.
class QuantizeNode : public Node {
 public:
  explicit QuantizeNode(const ir::Node& n) : Node(n) {}
  const char* type() const override { return "QuantizeLinear"; }
  NodeKind kind() const override { return NodeKind::Quantize; }

  std::vector<InputLayout> prepare() override {
    kernels_ = kernels_for_isa();
    scale_ = static_cast<const float*>(inputs[1]->constant.raw())[0];
    const bool s8 = outputs[0]->dtype == DType::i8;
    bounds_ = s8 ? Bounds{-128.0f, 127.0f} : Bounds{};
    zp_ = inputs.size() > 2 && inputs[2] ? static_cast<float>(zero_point(*inputs[2])) : 0.0f;
    impl = kernels_name(kernels_);  // (the counters add the output type)
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    if (!elementwise_layout(*inputs[0], s8 ? dnnl_s8 : dnnl_u8, *outputs[0])) req[0] = InputLayout::plain();
    return req;
  }

  void execute(dnnl::stream& stream) override {
    stream.wait();  // x may come from a oneDNN primitive
    const auto* x = static_cast<const float*>(inputs[0]->data);
    auto* y = static_cast<uint8_t*>(outputs[0]->data);
    quantize_all(kernels_, x, static_cast<int64_t>(inputs[0]->bytes() / sizeof(float)), scale_, zp_, bounds_, y);
  }

 private:
  static int32_t zero_point(const Edge& e) {
    return e.constant.dtype() == DType::u8 ? int32_t{*static_cast<const uint8_t*>(e.constant.raw())}
                                           : int32_t{*static_cast<const int8_t*>(e.constant.raw())};
  }
  Kernels kernels_ = Kernels::plain;
  float scale_ = 1.0f, zp_ = 0.0f;
  Bounds bounds_;
};

}  // namespace

bool quantize_supports(const ir::Node& n) {
  if (n.op_type() != "QuantizeLinear" || !n.is_onnx_domain() || n.num_inputs() < 2 || n.num_outputs() != 1) return false;
  if (n.has_attr("output_dtype") || n.attr_i("block_size", 0) != 0) return false;
  const ir::Value *x = n.input(0), *s = n.input(1), *z = n.input(2);
  if (!x || x->type.dtype != DType::f32 || !x->type.shape.is_static()) return false;
  if (!s || !s->is_constant() || s->constant().dtype() != DType::f32 || s->constant().size() != 1) return false;
  const float scale = s->constant().data<float>()[0];
  if (!(scale > 0) || !std::isfinite(scale)) return false;  // the reference's division by 0 / inf stays there
  if (z && (!z->is_constant() || z->constant().size() != 1 ||
            (z->constant().dtype() != DType::u8 && z->constant().dtype() != DType::i8)))
    return false;
  return true;
}

std::unique_ptr<Node> make_quantize_node(const ir::Node& n) { return std::make_unique<QuantizeNode>(n); }

bool dynamic_quantize_supports(const ir::Node& n) {
  if (n.op_type() != "DynamicQuantizeLinear" || !n.is_onnx_domain() || n.num_inputs() != 1 || n.num_outputs() != 3)
    return false;
  const ir::Value* x = n.input(0);
  if (!x || x->type.dtype != DType::f32 || !x->type.shape.is_static()) return false;
  for (const ir::Value* o : n.outputs())
    if (!o) return false;
  return true;
}

std::unique_ptr<Node> make_dynamic_quantize_node(const ir::Node& n) { return std::make_unique<DynamicQuantizeNode>(n); }

}  // namespace kiln::cpu
