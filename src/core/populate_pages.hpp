#pragma once
// Pages brought into memory ahead of their first touch: MADV_POPULATE_WRITE (Linux 5.14) maps
// every page of a range that is not in memory yet, as a write there would, in one system call
// instead of a page fault each, and leaves pages that are in memory as they are (their bytes
// too). For memory about to be written whose contents do not matter: a heap's room before a
// burst of allocations (heap_headroom.hpp), a compiled model's arena (cpu/arena.hpp).
#include <cstddef>

namespace kiln {

// Populates the whole pages inside [begin, begin + bytes). False only when the system cannot
// (an older kernel: asked once, then never again), after which pages fault in at their first
// touch as they would have; another failure (no memory) also leaves the range's pages to their
// first touch, but returns true, as a range without a whole page does.
bool populate_pages(const void* begin, size_t bytes);

}  // namespace kiln
