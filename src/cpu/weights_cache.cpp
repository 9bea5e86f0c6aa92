#include "cpu/weights_cache.hpp"

#include <sys/mman.h>

#include <algorithm>

#include "core/pages.hpp"
#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"

namespace kiln::cpu {

namespace {
thread_local WeightsCache* g_current = nullptr;
thread_local PackRecorder* g_recorder = nullptr;

// MADV_DONTNEED over the whole pages inside [p, p + n): the allocation stays (and so its
// address), its pages go back to the system and read as zeros if touched again. Returns the
// bytes given back.
size_t drop_pages(const void* p, size_t n) {
  const PageSpan s = whole_pages(p, n);
  if (s.empty() || ::madvise(reinterpret_cast<void*>(s.begin), s.bytes(), MADV_DONTNEED) != 0) return 0;
  return s.bytes();
}
}  // namespace

dnnl::memory WeightsCache::get(const Tensor& source, const std::string& variant, const dnnl::memory::desc& target,
                               const Pack& pack, Pages pages) {
  // the source's size is part of the key: two views of one storage with other sizes differ
  const std::pair<const void*, std::string> key{source.raw(), cat(source.byte_size(), "|", variant)};
  // Packing runs under the lock: it happens once per weight, at plan build time, and two
  // streams building the same plan at once then pack each weight once.
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Entry>& same_source = entries_[key];
  for (const Entry& e : same_source)
    if (e.desc == target) {
      ++hits_;
      return e.packed;
    }
  KILN_CHECK(!released_.count(source.raw()),
             cat("internal: a weight of ", source.byte_size(), " bytes was given back after packing (every reader had "
                 "its copy) and is now asked for in another layout (variant ", variant, ")"));
  void* room = pages == Pages::streamed ? allocate_streamed(target.get_size()) : nullptr;
  dnnl::memory m = room ? dnnl::memory(target, cpu_engine(), room) : dnnl::memory(target, cpu_engine());
  pack(m);
  same_source.push_back({source, target, m});
  ++count_;
  bytes_ += target.get_size();
  return m;
}

WeightsCache::~WeightsCache() {
  for (const Chunk& c : chunks_) ::munmap(c.base, c.size);
}

void* WeightsCache::allocate_streamed(size_t bytes) {
  constexpr size_t kAlign = 64, kChunk = size_t{16} << 20;
  bytes = (bytes + kAlign - 1) / kAlign * kAlign;
  streamed_bytes_ += bytes;
  if (bytes == 0 || streamed_bytes_ <= kSmallPagesUpTo) return nullptr;
  if (chunks_.empty() || chunks_.back().size - chunks_.back().used < bytes) {
    // a new chunk; the rest of the last one stays unused (never touched: no memory behind it)
    const size_t size = std::max(kChunk, whole_huge_pages(bytes));
    char* base = static_cast<char*>(map_huge_aligned(size));
    if (!base) return nullptr;
    // no transparent huge pages on this system (EINVAL): 4 KiB pages, as before
    ::madvise(base, size, MADV_HUGEPAGE);
    chunks_.push_back({base, size, 0});
  }
  Chunk& c = chunks_.back();
  void* p = c.base + c.used;
  c.used += bytes;
  return p;
}

std::vector<WeightsCache::Packed> WeightsCache::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Packed> all;
  for (const auto& [key, same_source] : entries_)
    for (const Entry& e : same_source) all.push_back({e.source, key.second, e.desc, e.packed});
  return all;
}

void WeightsCache::seed(const Tensor& source, const std::string& key, const dnnl::memory::desc& desc,
                        dnnl::memory packed) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Entry>& same_source = entries_[{source.raw(), key}];
  for (const Entry& e : same_source)
    if (e.desc == desc) return;
  same_source.push_back({source, desc, std::move(packed)});
  ++count_;
  bytes_ += desc.get_size();
}

size_t WeightsCache::entries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return count_;
}

size_t WeightsCache::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

size_t WeightsCache::hits() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return hits_;
}

size_t WeightsCache::release(const Tensor& source) {
  if (source.use_count() == 0 || source.byte_size() == 0) return 0;  // not kiln's memory
  std::lock_guard<std::mutex> lock(mutex_);
  if (!released_.insert(source.raw()).second) return 0;
  const size_t n = drop_pages(source.raw(), source.byte_size());
  released_bytes_ += n;
  return n;
}

size_t WeightsCache::released_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return released_bytes_;
}

WeightsCache* WeightsCache::current() { return g_current; }

WeightsCache::Scope::Scope(WeightsCache* cache) : previous_(g_current) { g_current = cache; }
WeightsCache::Scope::~Scope() { g_current = previous_; }

PackRecorder::PackRecorder() : previous_(g_recorder) { g_recorder = this; }
PackRecorder::~PackRecorder() { g_recorder = previous_; }

bool PackRecorder::packed(const Tensor& t) const {
  return std::find(seen_.begin(), seen_.end(), std::make_pair(t.raw(), t.byte_size())) != seen_.end();
}

void PackRecorder::record(const Tensor& source) {
  if (g_recorder) g_recorder->seen_.emplace_back(source.raw(), source.byte_size());
}

dnnl::memory pack_weights(const Tensor& source, const std::string& variant, const dnnl::memory::desc& target,
                          const WeightsCache::Pack& pack, WeightsCache::Pages pages) {
  PackRecorder::record(source);
  if (WeightsCache* cache = WeightsCache::current()) return cache->get(source, variant, target, pack, pages);
  dnnl::memory m(target, cpu_engine());
  pack(m);
  return m;
}

void reorder_into(dnnl::memory& src, dnnl::memory& dst) {
  dnnl::stream s(cpu_engine());
  dnnl::reorder(src, dst).execute(s, src, dst);
  s.wait();
}

}  // namespace kiln::cpu
