#include "cpu/arena.hpp"

#include <kiln/error.hpp>

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "core/strings.hpp"

namespace kiln::cpu {

namespace {

constexpr size_t kHuge = size_t{2} << 20;

// `size` bytes (a multiple of Arena::kAlignment) from malloc: arenas below 2 MiB.
void* allocate_small(size_t size) { return std::aligned_alloc(Arena::kAlignment, size); }

// `size` bytes (a multiple of 2 MiB) of fresh anonymous memory aligned to 2 MiB, advised as
// transparent huge pages (where THP is on: 512 times fewer page faults for a large arena,
// fewer TLB misses for the kernels sweeping it). MobileNetV2 f32: 4.59-4.84 ms against
// 4.77-5.01, and its first inference 4.6-7.9 against 6.1-10.1 ms. (Packed weights stay on
// small pages: on a virtual machine a huge page's first touch may have to be backed by the
// host 4 KiB at a time, and BERT-6's first inference, which packs 40 MiB, took 29-38 ms or
// 129-174 ms at random, against 41-52 ms on small pages.) Null when the memory cannot be had.
void* map_huge(size_t size) {
  void* raw = ::mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw), aligned = (start + kHuge - 1) / kHuge * kHuge;
  if (aligned > start) ::munmap(raw, aligned - start);  // the slack before and after the aligned range
  if (const size_t tail = start + size + kHuge - (aligned + size); tail > 0)
    ::munmap(reinterpret_cast<void*>(aligned + size), tail);
  void* p = reinterpret_cast<void*>(aligned);
  ::madvise(p, size, MADV_HUGEPAGE);  // advice only
  return p;
}

}  // namespace

void Arena::release() {
  if (data_) {
    if (mapped_) ::munmap(data_, capacity_);
    else std::free(data_);
  }
  data_ = nullptr;
  mapped_ = false;
  capacity_ = 0;
}

// Grows to max(bytes, 1.5 x capacity). From 2 MiB on the bytes are mapped pages, and a larger
// arena takes the pages of the one it replaces (mremap moves them to the front of the new
// range): memory that was touched, faulted in and zeroed once stays so, and only the new part
// is faulted in. Freed and allocated again, every growth paid for all of it once more: a stream
// of growing shapes (widths or batches that rise) faulted in about three times its largest
// arena, 2-7 ms a new shape of MobileNet-v2 at batches 1-8 (the pages of the old arena are
// moved, not copied; the contents do not matter).
void* Arena::reserve(size_t bytes) {
  bytes = std::max<size_t>(bytes, kAlignment);
  if (bytes <= capacity_) return data_;
  const size_t grown = capacity_ + capacity_ / 2;
  auto place = [&](size_t size) -> bool {  // an arena of `size` bytes; false: out of memory
    if (size < kHuge) {
      release();  // the old bytes go first: never both at once
      data_ = allocate_small(size);
      if (!data_) return false;
      capacity_ = size;
      return true;
    }
    size = (size + kHuge - 1) / kHuge * kHuge;
    void* p = map_huge(size);
    if (!p) return false;
    if (mapped_ && ::mremap(data_, capacity_, capacity_, MREMAP_MAYMOVE | MREMAP_FIXED, p) != MAP_FAILED) {
      data_ = nullptr;  // its pages are the front of p now
      mapped_ = false;
      capacity_ = 0;
    }
    release();
    data_ = p;
    mapped_ = true;
    capacity_ = size;
    return true;
  };
  const size_t want = aligned(std::max(bytes, grown));
  if (!place(want) && !(want > aligned(bytes) && place(aligned(bytes))))  // the growth margin may be what does not fit
    throw Error(cat("out of memory: the intermediate tensors of these input shapes need ", bytes, " bytes (",
                    static_cast<double>(bytes) / double(1ull << 30), " GiB), which the machine cannot allocate"));
  ++reallocations_;
  return data_;
}

Arena::~Arena() { release(); }

}  // namespace kiln::cpu
