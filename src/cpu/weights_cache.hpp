#pragma once
// WeightsCache: the packed (reordered) weights of a compiled model, shared by every
// cpu::Graph built from it. Each stream builds its own cpu::Graph per plan (its own
// intermediate buffers), but a Convolution or FullyConnected node of any of them asks the
// cache for its weights in the layout its primitive wants: the first asks packs them,
// the others get the same dnnl::memory (oneDNN only reads weights). So weights are packed
// once per compiled model, not once per stream.
//
// Key: the constant's data (its storage is kept alive by the entry, so the address cannot
// be reused by another constant), a variant string naming any transformation the node
// applies on the way (e.g. FullyConnected's alpha and transB), and the target descriptor.
#include <kiln/tensor.hpp>

#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <utility>
#include <vector>

namespace kiln::cpu {

class WeightsCache {
 public:
  WeightsCache() = default;
  ~WeightsCache();
  WeightsCache(const WeightsCache&) = delete;
  WeightsCache& operator=(const WeightsCache&) = delete;

  // Fills `dst` (allocated in the target layout) from the source constant.
  using Pack = std::function<void(dnnl::memory& dst)>;

  // Where packed weights live. `streamed`: weights a product reads once per inference for a few
  // rows of activations (FullyConnected, recurrent gates, integer MatMul at a batch of one), whose
  // time goes to fetching them: 2 MiB pages (transparent huge pages, advised), so that the TLB
  // does not miss every 4 KiB. BERT-6 at [1, 8..134] (42 MB of weights, past the L2 TLB's reach
  // of 12 MiB on Zen 4): the stream's later passes 0.93 of the time (medians of 10 alternations),
  // its compile 19-240 ms against 38-49 (the host backing fresh memory, below). `reused`: the others (convolutions read each weight for
  // many pixels), on oneDNN's allocation as before: advising ResNeXt-50's convolution weights
  // cost its compile 480-1020 ms against 120-160 (a huge page's first touch on this virtual
  // machine is backed 4 KiB at a time by the host, see cpu/arena.cpp) for nothing measurable.
  enum class Pages { reused, streamed };

  // The packed weights for (source, variant, target): made by `pack` on first request,
  // the same memory after. Thread-safe.
  dnnl::memory get(const Tensor& source, const std::string& variant, const dnnl::memory::desc& target,
                   const Pack& pack, Pages pages = Pages::reused);

  // Every packed weight: its source, the key its variant is stored under, layout and memory
  // (for the model cache, cpu/model_cache.hpp).
  struct Packed {
    Tensor source;
    std::string key;
    dnnl::memory::desc desc;
    dnnl::memory packed;
  };
  std::vector<Packed> snapshot() const;
  // Adds packed weights made elsewhere (read from the model cache): a later get() for this
  // source, key and layout returns `packed` without packing.
  void seed(const Tensor& source, const std::string& key, const dnnl::memory::desc& desc, dnnl::memory packed);

  size_t entries() const;  // distinct packed weights
  size_t bytes() const;    // their total size
  size_t hits() const;     // requests answered from the cache

  // Gives the pages of `source`'s bytes back to the system once every reader of it holds its
  // packed copy (cpu::Graph decides that: release_sources.hpp). `source` keeps its address
  // (so later get()s still find the packed copies by it) but its bytes read as zeros from
  // now on: a get() that would pack from it again throws instead. Memory kiln does not own
  // (wrapped, use_count 0) is left alone. Returns the bytes given back (0 when already).
  size_t release(const Tensor& source);
  size_t released_bytes() const;  // the total release() gave back

  // The cache that nodes being prepared on this thread use (null: none, each node packs
  // its own copy). cpu::Graph sets it for the duration of its construction.
  static WeightsCache* current();
  class Scope {
   public:
    explicit Scope(WeightsCache* cache);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    WeightsCache* previous_;
  };

 private:
  struct Entry {
    Tensor source;  // keeps the constant's storage (and so the key's address) alive
    dnnl::memory::desc desc;
    dnnl::memory packed;
  };
  // Room for `streamed` weights: `bytes` from the chunks below (64-byte aligned), or null: the
  // caller lets oneDNN allocate instead, for the first kSmallPagesUpTo bytes of streamed weights
  // (a model whose weights the TLB reaches on 4 KiB pages: no chunk, no 2 MiB page faulted in for
  // a few KB), and when no chunk can be had. Under mutex_.
  void* allocate_streamed(size_t bytes);
  static constexpr size_t kSmallPagesUpTo = size_t{4} << 20;
  size_t streamed_bytes_ = 0;
  // Mappings of anonymous memory, 2 MiB aligned and advised as transparent huge pages, that the
  // streamed weights are carved from one after another; unmapped with the cache.
  struct Chunk {
    char* base = nullptr;
    size_t size = 0, used = 0;
  };
  std::vector<Chunk> chunks_;
  mutable std::mutex mutex_;
  std::map<std::pair<const void*, std::string>, std::vector<Entry>> entries_;
  std::set<const void*> released_;  // the addresses of the sources given back
  size_t count_ = 0, bytes_ = 0, hits_ = 0, released_bytes_ = 0;
};

// The sources pack_weights() is asked for on this thread while a recorder is in scope: what a
// node being prepared read through the weights cache (cpu::Graph, stage 7).
class PackRecorder {
 public:
  PackRecorder();
  ~PackRecorder();
  PackRecorder(const PackRecorder&) = delete;
  PackRecorder& operator=(const PackRecorder&) = delete;
  // Whether `t` (these very bytes: same address and size) was asked for.
  bool packed(const Tensor& t) const;
  static void record(const Tensor& source);  // pack_weights: into the innermost recorder, if any

 private:
  std::vector<std::pair<const void*, size_t>> seen_;
  PackRecorder* previous_;
};

// For nodes: the weights packed into `target` through the current cache, or into a
// private copy when there is none (oneDNN's allocation, whatever `pages` asks).
dnnl::memory pack_weights(const Tensor& source, const std::string& variant, const dnnl::memory::desc& target,
                          const WeightsCache::Pack& pack, WeightsCache::Pages pages = WeightsCache::Pages::reused);

// dst <- src through a oneDNN reorder, on this thread, waiting for it.
void reorder_into(dnnl::memory& src, dnnl::memory& dst);

}  // namespace kiln::cpu
