#pragma once
// oneDNN glue: the process-wide CPU engine, dtype mapping, plain (row-major) descriptors,
// padded layouts, the memo of primitive descriptors.
#include <kiln/dtype.hpp>
#include <kiln/tensor.hpp>

#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <typeinfo>

namespace kiln::cpu {

// The process's CPU engine. Its first use applies KILN_MAX_CPU_ISA (cpu/isa.hpp) to oneDNN,
// and throws kiln::Error for a bad value of it.
dnnl::engine& cpu_engine();

// oneDNN's data type for a kiln dtype, if oneDNN has one (f32, bf16, f16, i32, i8, u8).
std::optional<dnnl::memory::data_type> dnnl_type(DType t);

dnnl::memory::dims to_dims(const Shape& s);

// Dense row-major descriptor of a shape (rank 1..DNNL_MAX_NDIMS, oneDNN dtype); nullopt otherwise.
std::optional<dnnl::memory::desc> plain_desc(const Shape& s, DType t);

// True when a layout pads some dim (e.g. 17 channels in nChw16c hold 32): the padding
// must stay zero, and some oneDNN 2.6 kernels mishandle the last, partial block.
bool has_padding(const dnnl::memory::desc& d);


// The post-ops of `attr` as bytes: two attributes with equal keys give the same primitive
// when post-ops are all they set. "" when a post-op kind is not known here (do not cache).
std::string post_ops_key(const dnnl::primitive_attr& attr);

// The process's memo of primitive descriptors (bounded: emptied when it holds too many).
std::shared_ptr<const void> find_cached_pd(const std::string& key);
void cache_pd(const std::string& key, std::shared_ptr<const void> pd);
size_t cached_pds();

// The primitive descriptor of (d, attr), made once per process: identical layers of a model,
// the post-op trials of the fusion passes and every input-shape plan and stream get the one
// made first (creating one costs as much as running a small layer: oneDNN searches its
// implementations and their blockings). For attributes that carry post-ops only.
// `d.data` is oneDNN's plain C descriptor: equal bytes, equal operation.
template <class PD, class Desc>
PD cached_pd(const Desc& d, const dnnl::primitive_attr& attr) {
  const std::string ops = post_ops_key(attr);
  if (ops.empty()) return PD(d, attr, cpu_engine());
  std::string key = typeid(PD).name();
  key.append(reinterpret_cast<const char*>(&d.data), sizeof(d.data));
  key += ops;
  if (auto hit = find_cached_pd(key)) return *static_cast<const PD*>(hit.get());
  auto pd = std::make_shared<const PD>(d, attr, cpu_engine());  // a dnnl::error is not cached
  cache_pd(key, pd);
  return *pd;
}

}  // namespace kiln::cpu
