#include "cpu/dnnl_util.hpp"

#include "cpu/isa.hpp"

namespace kiln::cpu {

dnnl::engine& cpu_engine() {
  isa_info();  // the ISA cap before oneDNN's first primitive
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
  (void)shape_size(s);  // throws where the strides below would overflow
  dnnl::memory::dims strides(s.size());
  dnnl::memory::dim st = 1;
  for (size_t i = s.size(); i-- > 0;) {
    strides[i] = st;
    st *= s[i];
  }
  return dnnl::memory::desc(to_dims(s), *dt, strides);
}

bool has_padding(const dnnl::memory::desc& d) {
  for (int i = 0; i < d.data.ndims; ++i)
    if (d.data.padded_dims[i] != d.data.dims[i]) return true;
  return false;
}

}  // namespace kiln::cpu
