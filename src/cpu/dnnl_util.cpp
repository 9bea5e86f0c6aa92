#include "cpu/dnnl_util.hpp"

namespace kiln::cpu {

dnnl::engine& cpu_engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

std::optional<dnnl::memory::data_type> dnnl_type(DType t) {
  using dt = dnnl::memory::data_type;
  switch (t) {
    case DType::f32: return dt::f32;
    case DType::bf16: return dt::bf16;
    case DType::f16: return dt::f16;
    case DType::i32: return dt::s32;
    case DType::i8: return dt::s8;
    case DType::u8: return dt::u8;
    default: return std::nullopt;
  }
}

dnnl::memory::dims to_dims(const Shape& s) { return dnnl::memory::dims(s.begin(), s.end()); }

std::optional<dnnl::memory::desc> plain_desc(const Shape& s, DType t) {
  auto dt = dnnl_type(t);
  if (!dt || s.empty() || s.size() > DNNL_MAX_NDIMS) return std::nullopt;
  dnnl::memory::dims strides(s.size());
  dnnl::memory::dim st = 1;
  for (size_t i = s.size(); i-- > 0;) {
    strides[i] = st;
    st *= s[i];
  }
  return dnnl::memory::desc(to_dims(s), *dt, strides);
}

std::string cpu_isa_name() {
  using isa = dnnl::cpu_isa;
  switch (dnnl::get_effective_cpu_isa()) {
    case isa::sse41: return "sse41";
    case isa::avx: return "avx";
    case isa::avx2: return "avx2";
    case isa::avx2_vnni: return "avx2_vnni";
    case isa::avx512_mic: return "avx512_mic";
    case isa::avx512_mic_4ops: return "avx512_mic_4ops";
    case isa::avx512_core: return "avx512_core";
    case isa::avx512_core_vnni: return "avx512_core_vnni";
    case isa::avx512_core_bf16: return "avx512_core_bf16";
    case isa::avx512_core_amx: return "avx512_core_amx";
    default: return "generic";
  }
}

bool native_bf16() {
  // oneDNN's ISA values are bit sets: avx512_core_amx contains avx512_core_bf16.
  const auto bits = [](dnnl::cpu_isa i) { return static_cast<unsigned>(i); };
  static const bool native = (bits(dnnl::get_effective_cpu_isa()) & bits(dnnl::cpu_isa::avx512_core_bf16)) ==
                             bits(dnnl::cpu_isa::avx512_core_bf16);
  return native;
}

}  // namespace kiln::cpu
