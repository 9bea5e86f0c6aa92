#pragma once
// PointerMap: a map from object addresses to values in one open-addressed table (linear
// probing, grown by doubling at half full), for the indexes a new input shape's graph is built
// with (a copy's values by the original's, an ir value's edge): no allocation per entry, as a
// node-based std::unordered_map makes. Keys are never null; nothing is ever erased.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace kiln {

template <class K, class V>
class PointerMap {
 public:
  explicit PointerMap(size_t expected = 0) { rehash(expected); }

  // The value stored for `k`, or null.
  V* find(const K* k) {
    Slot& s = slots_[probe(k)];
    return s.key ? &s.value : nullptr;
  }
  // Stores `v` for `k` (replacing a value stored before).
  void set(const K* k, V v) {
    if (2 * (size_ + 1) > slots_.size()) rehash(slots_.size());
    Slot& s = slots_[probe(k)];
    if (!s.key) ++size_;
    s.key = k;
    s.value = std::move(v);
  }
  size_t size() const { return size_; }

 private:
  struct Slot {
    const K* key = nullptr;
    V value{};
  };
  size_t probe(const K* k) const {
    const size_t mask = slots_.size() - 1;
    // Fibonacci hashing of the address (objects are at least 16 bytes apart)
    size_t i = static_cast<size_t>((reinterpret_cast<uintptr_t>(k) >> 4) * 0x9E3779B97F4A7C15ull >> 17) & mask;
    while (slots_[i].key && slots_[i].key != k) i = (i + 1) & mask;
    return i;
  }
  void rehash(size_t entries) {
    size_t n = 16;
    while (n < 2 * entries + 2) n *= 2;
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(n, Slot{});
    for (Slot& s : old)
      if (s.key) slots_[probe(s.key)] = std::move(s);
  }
  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace kiln
