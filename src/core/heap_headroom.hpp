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
#include <cstddef>

namespace kiln {

// Allocates about `bytes` in blocks of kHeadroomBlock bytes and frees them but the last, which
// it holds (per thread) in place of the one the previous call held (0: nothing).
void reserve_heap_headroom(size_t bytes);

// Below the smallest mmap threshold glibc uses (128 KiB, raised at run time, never lowered):
// each block comes from the heap, not from a mapping of its own.
inline constexpr size_t kHeadroomBlock = size_t{96} << 10;

}  // namespace kiln
