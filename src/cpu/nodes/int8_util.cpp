#include "cpu/nodes/int8_util.hpp"

#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/gemm_s16.hpp"
#include "cpu/isa.hpp"
#include "cpu/weights_cache.hpp"

namespace kiln::cpu {

bool exact_int8_kernels() { return isa_at_least(Isa::avx512_core_vnni) || isa_info().effective == Isa::avx2_vnni; }

bool int8_network_kernels() { return exact_int8_kernels() || gemm_s16::available(); }

Int8Weights s8_weights(const Tensor& w, bool split) {
  const bool u8 = w.dtype() == DType::u8;
  const size_t count = static_cast<size_t>(w.size());
  Int8Weights out;
  out.main.resize(count);
  if (split) out.hi.resize(count);
  for (size_t i = 0; i < count; ++i) {
    const int v = u8 ? static_cast<int>(w.data<uint8_t>()[i]) - 128 : static_cast<int>(w.data<int8_t>()[i]);
    if (split) {
      const int h = (v + 64) >> 7;  // floor: -1, 0 or 1
      out.main[i] = static_cast<int8_t>(v - 128 * h);
      out.hi[i] = static_cast<int8_t>(h);
    } else {
      out.main[i] = static_cast<int8_t>(v);
    }
  }
  return out;
}

PackedU8S8 pack_u8s8_if_safe(const Tensor& source, const std::string& variant, int64_t K, int64_t N,
                             const std::function<bool(std::vector<int8_t>*)>& values) {
  std::vector<int8_t> b;  // derived at most once here, and only when the cache has neither entry
  int derived = -1;       // -1: not yet; else whether the values fit s8 and are pair-safe
  auto safe = [&] {
    if (derived < 0) derived = values(&b) && gemm_s16::pair_safe(b.data(), K, N);
    return derived == 1;
  };
  const dnnl::memory::desc one({1}, dnnl::memory::data_type::u8, dnnl::memory::format_tag::a);
  const dnnl::memory verdict = pack_weights(source, variant + "/pair_safe", one, [&](dnnl::memory& dst) {
    *static_cast<uint8_t*>(dst.get_data_handle()) = safe() ? 1 : 0;
  });
  PackedU8S8 r;
  if (*static_cast<const uint8_t*>(verdict.get_data_handle()) == 0) return r;
  const int64_t bytes = gemm_s16::packed_size_u8s8(K, N);
  const dnnl::memory::desc desc({bytes + N * 4}, dnnl::memory::data_type::u8, dnnl::memory::format_tag::a);
  r.packed = pack_weights(source, variant, desc, [&](dnnl::memory& dst) {
    KILN_CHECK(safe(), "pack_u8s8_if_safe: the weights cache says '" + variant + "' is pair-safe, its values are not");
    auto* out = static_cast<int8_t*>(dst.get_data_handle());
    gemm_s16::pack_b_u8s8(b.data(), K, N, out, reinterpret_cast<int32_t*>(out + bytes));
  });
  r.column_sums = reinterpret_cast<const int32_t*>(static_cast<const int8_t*>(r.packed.get_data_handle()) + bytes);
  return r;
}

bool s8_weights_less_zero_points(const void* b, bool b_signed, int64_t K, const std::vector<int32_t>& zb,
                                 std::vector<int8_t>* out) {
  const int64_t N = static_cast<int64_t>(zb.size()), count = K * N;
  out->resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const int32_t v = (b_signed ? static_cast<int32_t>(static_cast<const int8_t*>(b)[i])
                                : static_cast<int32_t>(static_cast<const uint8_t*>(b)[i])) -
                      zb[static_cast<size_t>(i % N)];
    if (v < -128 || v > 127) return false;
    (*out)[static_cast<size_t>(i)] = static_cast<int8_t>(v);
  }
  return true;
}

std::vector<int32_t> weight_offsets(const Tensor& w, const Tensor* zw, int64_t channels) {
  const bool u8 = w.dtype() == DType::u8;
  std::vector<int32_t> c(static_cast<size_t>(channels), u8 ? 128 : 0);
  if (!zw) return c;
  for (int64_t m = 0; m < channels; ++m) {
    const int64_t i = zw->size() == 1 ? 0 : m;
    c[static_cast<size_t>(m)] -= u8 ? static_cast<int32_t>(zw->data<uint8_t>()[i]) : static_cast<int32_t>(zw->data<int8_t>()[i]);
  }
  return c;
}

PackedInt8 pack_int8_weights(const Tensor& w, bool split, const dnnl::memory::desc& plain,
                             const dnnl::memory::desc& target, const std::string& variant) {
  auto pack = [&](bool hi) {
    return pack_weights(w, cat(variant, split ? (hi ? "/hi" : "/lo") : "/w"), target, [&](dnnl::memory& dst) {
      Int8Weights w8 = s8_weights(w, split);
      dnnl::memory src(plain, cpu_engine(), hi ? w8.hi.data() : w8.main.data());
      reorder_into(src, dst);
    });
  };
  PackedInt8 out;
  out.main = pack(false);
  if (split) out.hi = pack(true);
  return out;
}

std::string int8_impl_name(const std::string& onednn_impl, bool split) {
  return split ? onednn_impl + " x2 (no VNNI: split weights)" : onednn_impl;
}

int32_t zero_point_value(DType dtype, const void* data) {
  return dtype == DType::u8 ? static_cast<int32_t>(*static_cast<const uint8_t*>(data))
                            : static_cast<int32_t>(*static_cast<const int8_t*>(data));
}

void s8_to_u8(const uint8_t* in, uint8_t* out, int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < count; ++i) out[i] = in[i] ^ 0x80u;  // two's complement v -> v + 128
}

bool is_int8(DType t) { return t == DType::u8 || t == DType::i8; }

bool activation_zero_point_ok(const ir::Value* zp, DType x) {
  return !zp || (zp->type.dtype == x && zp->type.shape.is_static() && shape_size(zp->type.shape.to_shape()) == 1);
}

bool weight_zero_point_ok(const ir::Value* zw, DType w, int64_t channels) {
  if (!zw) return true;
  if (!zw->is_constant() || zw->constant().dtype() != w) return false;
  return zw->constant().size() == 1 || (zw->constant().size() == channels && zw->constant().rank() == 1);
}

Requantization requantization(const Tensor& x_scale, const Tensor& w_scale, const Tensor& y_scale,
                              const Tensor& y_zero_point, int64_t channels) {
  Requantization r;
  const float xs = x_scale.data<float>()[0], ys = y_scale.data<float>()[0];
  r.mult.resize(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c)
    r.mult[static_cast<size_t>(c)] = xs * w_scale.data<float>()[w_scale.size() == 1 ? 0 : c] / ys;
  r.signed_out = y_zero_point.dtype() == DType::i8;
  r.zp = r.signed_out ? y_zero_point.data<int8_t>()[0] : y_zero_point.data<uint8_t>()[0];
  return r;
}

bool constant_scale(const ir::Value* v, int64_t alt) {
  if (!v || !v->is_constant() || v->constant().dtype() != DType::f32) return false;
  const int64_t k = v->constant().size();
  return k == 1 || (k == alt && v->constant().rank() == 1);
}

}  // namespace kiln::cpu
