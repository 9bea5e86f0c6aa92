#include "cpu/dnnl_util.hpp"

#include <mutex>
#include <unordered_map>
#include <vector>

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

std::optional<dnnl::memory::desc> channels_last_desc(const Shape& s, DType t) {
  using tag = dnnl::memory::format_tag;
  auto dt = dnnl_type(t);
  if (!dt || s.size() < 3 || s.size() > 5) return std::nullopt;
  (void)shape_size(s);  // throws where the strides would overflow
  const tag cl[] = {tag::acb, tag::acdb, tag::acdeb};  // oneDNN's N, spatial..., C of rank 3, 4, 5
  return dnnl::memory::desc(to_dims(s), *dt, cl[s.size() - 3]);
}

bool same_element_offsets(const dnnl::memory::desc& a, const dnnl::memory::desc& b) {
  const dnnl_memory_desc_t &x = a.data, &y = b.data;
  if (x.format_kind != dnnl_blocked || y.format_kind != dnnl_blocked || x.ndims != y.ndims ||
      x.data_type != y.data_type || x.offset0 != y.offset0 || x.extra.flags != y.extra.flags)
    return false;
  if (x.format_desc.blocking.inner_nblks != 0 || y.format_desc.blocking.inner_nblks != 0) return false;
  for (int i = 0; i < x.ndims; ++i) {
    if (x.dims[i] != y.dims[i] || x.padded_dims[i] != x.dims[i] || y.padded_dims[i] != y.dims[i]) return false;
    if (x.dims[i] != 1 && x.format_desc.blocking.strides[i] != y.format_desc.blocking.strides[i]) return false;
  }
  return true;
}

bool has_padding(const dnnl::memory::desc& d) {
  for (int i = 0; i < d.data.ndims; ++i)
    if (d.data.padded_dims[i] != d.data.dims[i]) return true;
  return false;
}

std::optional<int64_t> channel_block(const dnnl::memory::desc& md) {
  const auto& d = md.data;
  if (d.format_kind != dnnl_blocked || has_padding(md) || d.ndims < 3 || d.data_type != dnnl_f32) return std::nullopt;
  const auto& b = d.format_desc.blocking;
  if (b.inner_nblks != 1 || b.inner_idxs[0] != 1) return std::nullopt;
  const int64_t B = b.inner_blks[0];
  int64_t expect = B;
  for (int i = d.ndims; i-- > 0;) {
    const int64_t outer = i == 1 ? d.dims[1] / B : d.dims[i];
    if (outer == 1) continue;
    if (b.strides[i] != expect) return std::nullopt;
    expect *= outer;
  }
  return B;
}

namespace {

template <class T>
void put(std::string& s, const T& v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

struct ImplNames {
  std::mutex mutex;
  std::unordered_map<std::string, std::string> entries;
};
ImplNames& impl_names() {
  static ImplNames c;
  return c;
}
constexpr size_t kMaxImplNames = 16384;

}  // namespace

PrimitiveMemoStats& primitive_memo_stats() {
  static PrimitiveMemoStats stats;
  return stats;
}

std::string post_ops_key(const dnnl::primitive_attr& attr) {
  const dnnl::post_ops po = attr.get_post_ops();
  std::string key = "po";
  for (int i = 0; i < po.len(); ++i) {
    const dnnl::primitive::kind k = po.kind(i);
    put(key, k);
    if (k == dnnl::primitive::kind::eltwise) {
      float scale = 0, alpha = 0, beta = 0;
      dnnl::algorithm alg{};
      po.get_params_eltwise(i, scale, alg, alpha, beta);
      put(key, scale), put(key, alg), put(key, alpha), put(key, beta);
    } else if (k == dnnl::primitive::kind::binary) {
      dnnl::algorithm alg{};
      dnnl::memory::desc md;
      po.get_params_binary(i, alg, md);
      put(key, alg), put(key, md.data);
    } else if (k == dnnl::primitive::kind::sum) {
      float scale = 0;
      int32_t zero_point = 0;
      dnnl::memory::data_type dt{};
      po.get_params_sum(i, scale, zero_point, dt);
      put(key, scale), put(key, zero_point), put(key, dt);
    } else if (k == dnnl::primitive::kind::prelu) {
      int mask = 0;
      po.get_params_prelu(i, mask);
      put(key, mask);
    } else if (k == dnnl::primitive::kind::convolution) {
      dnnl::memory::data_type w{}, b{}, d{};
      dnnl::memory::dim kernel = 0, stride = 0, pad = 0;
      int mask = 0;
      std::vector<float> scales;
      po.get_params_dw(i, w, b, d, kernel, stride, pad, mask, scales);
      put(key, w), put(key, b), put(key, d), put(key, kernel), put(key, stride), put(key, pad), put(key, mask);
      for (float s : scales) put(key, s);
    } else {
      return "";
    }
  }
  return key;
}

std::optional<std::string> find_impl_name(const std::string& key) {
  ImplNames& c = impl_names();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.entries.find(key);
  if (it == c.entries.end()) return std::nullopt;
  return it->second;
}

void remember_impl_name(const std::string& key, const std::string& impl) {
  ImplNames& c = impl_names();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.entries.size() >= kMaxImplNames) c.entries.clear();  // a stream of ever new shapes: start over
  c.entries.emplace(key, impl);
}

}  // namespace kiln::cpu
