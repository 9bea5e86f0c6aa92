#pragma once
// oneDNN glue: the process-wide CPU engine, dtype mapping, plain (row-major) descriptors,
// padded layouts, the memo of implementation names.
#include <kiln/dtype.hpp>
#include <kiln/tensor.hpp>

#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <typeinfo>
#include <unordered_map>
#include <utility>

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

// The process's memo of implementation names (bounded: emptied when it holds too many).
std::optional<std::string> find_impl_name(const std::string& key);
void remember_impl_name(const std::string& key, const std::string& impl);

// oneDNN's implementation for (d, attr) -- "brgconv:avx512_core", "ref:any", ... -- asked
// once per process: the fusion passes ask it for every post-op they try on every layer of
// every plan and stream, and making the descriptor to read it costs about as much as
// running a small layer (oneDNN searches its implementations and their blockings). Only the
// name is kept, not the descriptor. For attributes that carry post-ops only; `d.data` is
// oneDNN's plain C descriptor: equal bytes, equal operation. Throws dnnl::error as
// creating the descriptor does (not remembered).
template <class PD, class Desc>
std::string impl_name(const Desc& d, const dnnl::primitive_attr& attr) {
  const std::string ops = post_ops_key(attr);
  if (ops.empty()) return PD(d, attr, cpu_engine()).impl_info_str();
  std::string key = typeid(PD).name();
  key.append(reinterpret_cast<const char*>(&d.data), sizeof(d.data));
  key += ops;
  if (auto hit = find_impl_name(key)) return *hit;
  std::string impl = PD(d, attr, cpu_engine()).impl_info_str();
  remember_impl_name(key, impl);
  return impl;
}

// A primitive for an operation descriptor with runtime dims (DNNL_RUNTIME_DIM_VAL), which
// serves every size of them: made once per thread and kept for every graph the thread builds
// (a thread's graphs run one at a time), so a new input shape costs a lookup instead of a
// descriptor (0.1-0.3 ms for a matmul) per layer. Attributes with post-ops only (else not
// kept). At most 512 per thread and kind: the memo empties when full.
template <class PD, class Prim, class Desc>
std::pair<PD, Prim> per_thread_primitive(const Desc& d, const dnnl::primitive_attr& attr) {
  static thread_local std::unordered_map<std::string, std::pair<PD, Prim>> memo;
  std::string key = post_ops_key(attr);
  if (key.empty()) {
    PD pd(d, attr, cpu_engine());
    return {pd, Prim(pd)};
  }
  key.append(reinterpret_cast<const char*>(&d.data), sizeof(d.data));
  if (auto it = memo.find(key); it != memo.end()) return it->second;
  if (memo.size() >= 512) memo.clear();
  PD pd(d, attr, cpu_engine());
  return memo.emplace(std::move(key), std::make_pair(pd, Prim(pd))).first->second;
}

// For graphs whose shapes vary (a primitive per new shape): oneDNN's first choice, unless it
// is brgemm-based ("brgconv:...", "brg:...") and a direct JIT implementation ("jit...") of the
// same operation follows in its list. A brgemm primitive generates several kernels for every
// shape it is made for (3-10 ms for one 3x3 convolution here), a direct JIT one a single
// kernel (0.3-0.6 ms), and for f32 3x3 convolutions they run equally fast (within 3%,
// measured over widths 96-1600; but 1x1 and depthwise-fused ones lose up to 40%, so the
// cpu::Executor builds a plan's graph again without this once the shape proves frequent).
// `pd` is replaced by the one chosen; returns whether it was. The operation descriptor `pd`
// was made from must still be alive: oneDNN's iterator reads it again.
template <class PD>
bool prefer_quick_to_create(PD& pd) {
  const std::string first = pd.impl_info_str();
  if (first.rfind("brg", 0) != 0) return false;
  PD trial = pd;  // shares the iterator, not the descriptor: `pd` stays valid
  while (trial.next_impl()) {
    const std::string impl = trial.impl_info_str();
    if (impl.rfind("jit", 0) == 0) {
      pd = trial;
      return true;
    }
  }
  return false;
}

}  // namespace kiln::cpu
