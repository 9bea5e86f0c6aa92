#include "core/heap_headroom.hpp"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "core/pages.hpp"

namespace kiln {

namespace {

// The last block of this thread's latest reservation, held until the next one: while it is
// allocated the other blocks, freed, stay a free chunk below it instead of joining the heap's
// top, which glibc would hand back to the system (and with it the pages they had mapped).
struct Keeper {
  void* block = nullptr;
  ~Keeper() { std::free(block); }
};
thread_local Keeper t_keeper;
thread_local HeadroomPages t_pages;

// Whole pages inside the blocks (each kHeadroomBlock bytes), blocks that follow each other
// (a chunk header apart) one range.
std::vector<std::pair<uintptr_t, uintptr_t>> pages_of(std::vector<void*> blocks) {
  std::sort(blocks.begin(), blocks.end());
  std::vector<std::pair<uintptr_t, uintptr_t>> spans;
  for (void* b : blocks) {
    const auto lo = reinterpret_cast<uintptr_t>(b), hi = lo + kHeadroomBlock;
    if (!spans.empty() && lo - spans.back().second <= 64)  // the allocator's header between them
      spans.back().second = hi;
    else
      spans.emplace_back(lo, hi);
  }
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
  for (auto [lo, hi] : spans)
    if (const PageSpan s = whole_pages(lo, hi); !s.empty()) ranges.emplace_back(s.begin, s.end);
  return ranges;
}

}  // namespace

void reserve_heap_headroom(size_t bytes) {
  std::vector<void*> blocks;
  blocks.reserve((bytes + kHeadroomBlock - 1) / kHeadroomBlock);
  for (size_t have = 0; have < bytes; have += kHeadroomBlock) {
    void* p = std::malloc(kHeadroomBlock);
    if (!p) break;  // no memory to spare: the allocations after make do without
    blocks.push_back(p);
  }
  if (blocks.empty()) return;
  std::free(t_keeper.block);
  t_keeper.block = blocks.back();
  blocks.pop_back();
  t_pages = HeadroomPages(pages_of(blocks));  // their addresses only: the blocks are freed next
  for (void* p : blocks) std::free(p);
}

bool HeadroomPages::fault_in_next(size_t bytes) {
  const uintptr_t page = page_bytes();
  while (next_ < ranges_.size()) {
    const auto [begin, end] = ranges_[next_];
    const uintptr_t from = std::max(at_, begin);
    if (from >= end) {
      ++next_, at_ = 0;
      continue;
    }
    const uintptr_t to = std::min(end, from + std::max<uintptr_t>(bytes / page, 1) * page);
    at_ = to;
    // (after another error, such as no memory, those pages fault in when touched)
    return populate_pages(reinterpret_cast<const void*>(from), to - from);
  }
  return false;
}

size_t HeadroomPages::left() const {
  size_t n = 0;
  for (size_t i = next_; i < ranges_.size(); ++i)
    n += ranges_[i].second - std::max(i == next_ ? at_ : 0, ranges_[i].first);
  return n;
}

HeadroomPages& headroom_pages() { return t_pages; }

}  // namespace kiln
