#pragma once
// Heap headroom: the calling thread's malloc heap made ready, in a few large steps, for a burst
// of small allocations that stay (a new input shape's plan: some 8,000 objects, 0.3-0.7 MiB).
//
// glibc grows the heap of a thread other than the main one (the arena it gives each thread)
// by exactly what an allocation lacks, rounded up to a page, with an mprotect system call each
// time. A plan is built on the stream's worker thread and kept, so every plan grew that heap a
// page at a time: 88 mprotect calls a plan of mobilenet_v3_small, 161 of EfficientNet-B0
// (strace -c over 60 new shapes). Allocating `bytes` in blocks below glibc's mmap threshold
// and freeing them moves the heap's writable end ahead in a few calls, and the plan then takes
// pages that need no system call: 8 and 17 mprotect calls a plan. The last block stays allocated
// until the thread's next reservation, so that the others stay a free chunk below it instead of
// joining the heap's top, which glibc hands back to the system past a threshold (a madvise, and
// the pages faulted in again: 65 times over EfficientNet-B0's 60 shapes, twice with the block
// held). With another allocator, or on the main arena (which grows by sbrk with its own
// padding), it costs a few allocations and frees, and a block held per thread.
//
// The room is writable but not yet in memory: each of its pages still costs a page fault at its
// first touch (about 90 a plan of mobilenet_v3_small, 1.5 us each on a virtual machine).
// HeadroomPages lets another thread take those faults ahead of the allocations
// (cpu/headroom_faulting.hpp: the second thread of the team, idle while a plan is built).
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace kiln {

// Allocates about `bytes` in blocks of kHeadroomBlock bytes and frees them but the last, which
// it holds (per thread) in place of the one the previous call held (0: nothing). The freed
// blocks' pages become the thread's headroom_pages().
void reserve_heap_headroom(size_t bytes);

// The pages of a reservation's freed blocks (whole pages inside them, neighbouring blocks one
// range), to be faulted in from any thread, a step at a time, while the reserving thread
// allocates from them: MADV_POPULATE_WRITE maps a page that is not in memory and leaves one
// that is as it is, so it never changes what the heap holds.
class HeadroomPages {
 public:
  HeadroomPages() = default;
  explicit HeadroomPages(std::vector<std::pair<uintptr_t, uintptr_t>> ranges) : ranges_(std::move(ranges)) {}
  // Faults in the next at most `bytes` (whole pages) not faulted in yet. False when none were
  // left, or the system cannot (before Linux 5.14: the pages fault in at their first touch).
  bool fault_in_next(size_t bytes);
  // Bytes not faulted in yet.
  size_t left() const;
  const std::vector<std::pair<uintptr_t, uintptr_t>>& ranges() const { return ranges_; }

 private:
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges_;  // [begin, end), page aligned
  size_t next_ = 0;                                       // the range being faulted in
  uintptr_t at_ = 0;                                      // its next page (0: its beginning)
};

// The calling thread's pages of its latest reservation (empty before one).
HeadroomPages& headroom_pages();

// Below the smallest mmap threshold glibc uses (128 KiB, raised at run time, never lowered):
// each block comes from the heap, not from a mapping of its own.
inline constexpr size_t kHeadroomBlock = size_t{96} << 10;

}  // namespace kiln
