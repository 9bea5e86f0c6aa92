#include "core/heap_headroom.hpp"

#include <cstdlib>
#include <vector>

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
  for (void* p : blocks) std::free(p);
}

}  // namespace kiln
