#include "core/heap_headroom.hpp"

#include <cstdlib>
#include <vector>

namespace kiln {

void reserve_heap_headroom(size_t bytes) {
  std::vector<void*> blocks;
  blocks.reserve((bytes + kHeadroomBlock - 1) / kHeadroomBlock);
  for (size_t have = 0; have < bytes; have += kHeadroomBlock) {
    void* p = std::malloc(kHeadroomBlock);
    if (!p) break;  // no memory to spare: the allocations after make do without
    blocks.push_back(p);
  }
  // in allocation order: each block but the last joins its free neighbours, not the heap's
  // top, so the top (and a trim of it) grows once
  for (void* p : blocks) std::free(p);
}

}  // namespace kiln
