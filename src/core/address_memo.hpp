#pragma once
// AddressMemo: values computed from an object held by a shared_ptr, found by the object's
// address while it lives. Each entry keeps a weak_ptr to its object, whose control block then
// stays allocated, so no other object takes that address while the entry is there; an entry
// whose object is gone is never returned, and such entries are dropped once the map has
// doubled since the last scan (a long-running process sees many objects come and go). For
// objects that do not change once shared (a Subgraph's body). Not thread-safe.
#include <algorithm>
#include <cstddef>
#include <memory>
#include <unordered_map>

namespace kiln {

template <class T, class V>
class AddressMemo {
 public:
  // The value stored for `p`'s object, or null.
  const V* find(const std::shared_ptr<T>& p) const {
    auto it = map_.find(p.get());
    if (it == map_.end()) return nullptr;
    const Entry& e = it->second;
    const bool same = !e.owner.expired() && !e.owner.owner_before(p) && !p.owner_before(e.owner);
    return same ? &e.value : nullptr;
  }

  void insert(const std::shared_ptr<T>& p, V v) {
    if (map_.size() >= prune_at_) {  // entries of objects gone
      for (auto it = map_.begin(); it != map_.end();) it = it->second.owner.expired() ? map_.erase(it) : std::next(it);
      prune_at_ = std::max<size_t>(64, 2 * map_.size());
    }
    map_[p.get()] = Entry{p, std::move(v)};
  }

 private:
  struct Entry {
    std::weak_ptr<T> owner;
    V value;
  };
  std::unordered_map<const T*, Entry> map_;
  size_t prune_at_ = 64;
};

}  // namespace kiln
