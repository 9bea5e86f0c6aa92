#pragma once
// oneDNN glue: the process-wide CPU engine, dtype mapping, plain (row-major) descriptors,
// padded layouts, the memo of implementation names.
#include <kiln/dtype.hpp>
#include <kiln/tensor.hpp>

#include <memory>
#include <algorithm>
#include <atomic>
#include <functional>
#include <list>
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

// A primitive's user scratchpad (scratchpad_mode::user) over a node's working memory in the
// graph's arena (Node::scratch): the memory object is made again only when the memory plan
// moved it. add_to adds it to a primitive's arguments (nothing when the node has no scratch).
class UserScratchpad {
 public:
  void add_to(std::unordered_map<int, dnnl::memory>& args, const dnnl::memory::desc& desc, void* scratch) {
    if (!scratch) return;
    if (scratch != at_) memory_ = dnnl::memory(desc, cpu_engine(), at_ = scratch);
    args[DNNL_ARG_SCRATCHPAD] = memory_;
  }

 private:
  dnnl::memory memory_;
  void* at_ = nullptr;
};

// Dense row-major descriptor of a shape (rank 1..DNNL_MAX_NDIMS, oneDNN dtype); nullopt otherwise.
std::optional<dnnl::memory::desc> plain_desc(const Shape& s, DType t);

// Dense channels-last descriptor (N, spatial..., C in memory) of a shape of rank 3..5; nullopt
// otherwise.
std::optional<dnnl::memory::desc> channels_last_desc(const Shape& s, DType t);

// True when two dense layouts without blocks put every element at the same offset: the same
// dims, element type and strides, but for dims of size 1 (whose stride never counts).
bool same_element_offsets(const dnnl::memory::desc& a, const dnnl::memory::desc& b);

// True when a layout pads some dim (e.g. 17 channels in nChw16c hold 32): the padding
// must stay zero, and some oneDNN 2.6 kernels mishandle the last, partial block.
bool has_padding(const dnnl::memory::desc& d);

// The block size B of an f32 layout (rank 3 or more) blocked on dim 1 only, without padding,
// with the outer dims in plain order (nChw16c, nChw8c: element (n, c, h, w) at
// ((n, c / B, h, w), c % B)), or nothing.
std::optional<int64_t> channel_block(const dnnl::memory::desc& md);


// The post-ops of `attr` as bytes: two attributes with equal keys give the same primitive
// when post-ops are all they set. "" when a post-op kind is not known here (do not cache).
std::string post_ops_key(const dnnl::primitive_attr& attr);

// Whether a oneDNN implementation name is one of its reference kernels ("ref:any", ...).
inline bool is_ref_impl(const std::string& impl) { return impl.rfind("ref", 0) == 0; }

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

// Lookups of cached_primitive() that found a primitive / made one, on all threads.
struct PrimitiveMemoStats {
  std::atomic<size_t> hits{0}, misses{0};
};
PrimitiveMemoStats& primitive_memo_stats();

template <class PD, class Prim>
struct MemoPrimitive {
  PD pd;
  Prim prim;
  bool chosen = false;  // `choose` took another implementation than oneDNN's first
};

// The primitives a thread has made, by what defines them (operation descriptor, post-ops,
// scratchpad mode, and `variant`: the implementation choice when not oneDNN's first), with
// their descriptors. Layers alike (BERT's 6 or 12 copies of each FullyConnected), the plans of
// a variable-shape model and the rebuild of a plan all take the primitive made first: oneDNN
// 2.6 caches primitives but not descriptors, and a descriptor costs 0.1-1.5 ms (it searches
// implementations and blockings). A thread's graphs run one at a time, so sharing is safe.
// Bounded like oneDNN's primitive cache (property cpu_runtime_cache_capacity, 0: off): at most
// that many per thread and primitive kind, the least recently used dropped first.
// Attributes that post_ops_key() cannot describe are not kept. memo_primitive is the memo:
// `make` runs on a miss; cached_primitive and cached_primitive_if below are its users.
template <class PD, class Prim, class Desc>
std::optional<MemoPrimitive<PD, Prim>> memo_primitive(const Desc& d, const dnnl::primitive_attr& attr,
                                                      const char* variant,
                                                      const std::function<std::optional<MemoPrimitive<PD, Prim>>()>& make) {
  struct Memo {
    // an entry's nullopt: `make` declined, remembered too
    std::list<std::pair<std::string, std::optional<MemoPrimitive<PD, Prim>>>> lru;  // most recent first
    std::unordered_map<std::string, typename decltype(lru)::iterator> index;
  };
  static thread_local Memo memo;
  const size_t capacity = static_cast<size_t>(std::max(0, dnnl::get_primitive_cache_capacity()));
  std::string key = post_ops_key(attr);
  if (key.empty() || capacity == 0) return make();
  key += variant;
  key += static_cast<char>(attr.get_scratchpad_mode());
  key.append(reinterpret_cast<const char*>(&d.data), sizeof(d.data));
  if (auto it = memo.index.find(key); it != memo.index.end()) {
    memo.lru.splice(memo.lru.begin(), memo.lru, it->second);
    primitive_memo_stats().hits.fetch_add(1);
    return it->second->second;
  }
  auto made = make();
  primitive_memo_stats().misses.fetch_add(1);
  memo.lru.emplace_front(key, made);
  memo.index[std::move(key)] = memo.lru.begin();
  while (memo.lru.size() > capacity) {
    memo.index.erase(memo.lru.back().first);
    memo.lru.pop_back();
  }
  return made;
}

// The primitive for `d` and `attr`, through the memo. `choose` (may be null) picks the
// implementation from the descriptor oneDNN made first and says whether it changed it; it
// runs while `d` lives (oneDNN's iterator reads it again).
template <class PD, class Prim, class Desc>
MemoPrimitive<PD, Prim> cached_primitive(const Desc& d, const dnnl::primitive_attr& attr, const char* variant = "",
                                         const std::function<bool(PD&)>& choose = nullptr) {
  return *memo_primitive<PD, Prim>(d, attr, variant, [&]() -> std::optional<MemoPrimitive<PD, Prim>> {
    PD pd(d, attr, cpu_engine());
    const bool chosen = choose && choose(pd);
    return MemoPrimitive<PD, Prim>{pd, Prim(pd), chosen};
  });
}

// As cached_primitive, for an implementation that is only worth taking on conditions: the
// primitive when oneDNN has an implementation of `d` and `accept` takes its descriptor (e.g.
// by its name), else nullopt, without generating code. The answer is memoised either way.
template <class PD, class Prim, class Desc>
std::optional<MemoPrimitive<PD, Prim>> cached_primitive_if(const Desc& d, const dnnl::primitive_attr& attr,
                                                           const char* variant,
                                                           const std::function<bool(const PD&)>& accept) {
  return memo_primitive<PD, Prim>(d, attr, variant, [&]() -> std::optional<MemoPrimitive<PD, Prim>> {
    std::optional<PD> pd;
    try {
      pd.emplace(d, attr, cpu_engine());
    } catch (const dnnl::error& e) {
      if (e.status != dnnl_unimplemented) throw;
      return std::nullopt;  // no implementation on this CPU, or not with these attributes
    }
    if (!accept(*pd)) return std::nullopt;
    return MemoPrimitive<PD, Prim>{*pd, Prim(*pd), false};
  });
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
