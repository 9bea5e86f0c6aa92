#pragma once
// Memory by whole pages: the page size, the whole pages inside a byte range, and pages brought
// into memory ahead of their first touch. MADV_POPULATE_WRITE (Linux 5.14) maps every page of a
// range that is not in memory yet, as a write there would, in one system call instead of a page
// fault each, and leaves pages that are in memory as they are (their bytes too): for memory
// about to be written whose contents do not matter, a heap's room before a burst of
// allocations (heap_headroom.hpp) or a compiled model's arena (cpu/arena.hpp).
#include <cstddef>
#include <cstdint>

namespace kiln {

size_t page_bytes();  // the system's page size

// The whole pages inside [lo, hi): [begin, end), page aligned; empty when none is.
struct PageSpan {
  uintptr_t begin = 0, end = 0;
  bool empty() const { return begin >= end; }
  size_t bytes() const { return empty() ? 0 : end - begin; }
};
PageSpan whole_pages(uintptr_t lo, uintptr_t hi);
inline PageSpan whole_pages(const void* p, size_t bytes) {
  const auto lo = reinterpret_cast<uintptr_t>(p);
  return whole_pages(lo, lo + bytes);
}

// The size of a transparent huge page on x86-64: what the arena and the weights cache align to.
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// `bytes` rounded up to whole huge pages: a size map_huge_aligned takes.
inline constexpr size_t whole_huge_pages(size_t bytes) {
  return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
}

// `size` bytes (a multiple of kHugePageBytes) of fresh anonymous memory aligned to kHugePageBytes,
// so that the system can back it with whole huge pages (THP "always", or where advised); null when
// the memory cannot be had. Give it back with munmap(p, size).
void* map_huge_aligned(size_t size);

// Populates the whole pages inside [begin, begin + bytes). False only when the system cannot
// (an older kernel: asked once, then never again), after which pages fault in at their first
// touch as they would have; another failure (no memory) also leaves the range's pages to their
// first touch, but returns true, as a range without a whole page does.
bool populate_pages(const void* begin, size_t bytes);

}  // namespace kiln
