#include "cpu/weights_cache.hpp"

#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"

namespace kiln::cpu {

namespace {
thread_local WeightsCache* g_current = nullptr;
}

dnnl::memory WeightsCache::get(const Tensor& source, const std::string& variant, const dnnl::memory::desc& target,
                               const Pack& pack) {
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
  dnnl::memory m(target, cpu_engine());
  pack(m);
  same_source.push_back({source, target, m});
  ++count_;
  bytes_ += target.get_size();
  return m;
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

WeightsCache* WeightsCache::current() { return g_current; }

WeightsCache::Scope::Scope(WeightsCache* cache) : previous_(g_current) { g_current = cache; }
WeightsCache::Scope::~Scope() { g_current = previous_; }

dnnl::memory pack_weights(const Tensor& source, const std::string& variant, const dnnl::memory::desc& target,
                          const WeightsCache::Pack& pack) {
  if (WeightsCache* cache = WeightsCache::current()) return cache->get(source, variant, target, pack);
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
