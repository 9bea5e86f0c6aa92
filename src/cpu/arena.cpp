#include "cpu/arena.hpp"

#include <kiln/error.hpp>

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>

#include "core/strings.hpp"

namespace kiln::cpu {

namespace {

// `size` bytes (a multiple of Arena::kAlignment); from 2 MiB on, aligned to 2 MiB and advised
// as transparent huge pages (where THP is on: 512 times fewer page faults for a large arena,
// fewer TLB misses for the kernels sweeping it), which may round `size` up. MobileNetV2 f32:
// 4.59-4.84 ms against 4.77-5.01, and its first inference 4.6-7.9 against 6.1-10.1 ms.
// (Packed weights stay on small pages: on a virtual machine a huge page's first touch may
// have to be backed by the host 4 KiB at a time, and BERT-6's first inference, which packs
// 40 MiB, took 29-38 ms or 129-174 ms at random, against 41-52 ms on small pages.)
void* allocate(size_t& size) {
  constexpr size_t kHuge = size_t{2} << 20;
  if (size < kHuge) return std::aligned_alloc(Arena::kAlignment, size);
  const size_t rounded = (size + kHuge - 1) / kHuge * kHuge;
  void* p = std::aligned_alloc(kHuge, rounded);
  if (!p) return nullptr;
  ::madvise(p, rounded, MADV_HUGEPAGE);  // advice only
  size = rounded;
  return p;
}

}  // namespace

void* Arena::reserve(size_t bytes) {
  bytes = std::max<size_t>(bytes, kAlignment);
  if (bytes <= capacity_) return data_.get();
  size_t grown = capacity_ + capacity_ / 2;
  size_t size = std::max(bytes, grown);
  size = aligned(size);
  data_.reset();  // the old bytes go first: never both at once
  capacity_ = 0;
  void* p = allocate(size);
  if (!p && size > bytes) {  // the growth margin may be what does not fit
    size = aligned(bytes);
    p = allocate(size);
  }
  KILN_CHECK(p, cat("out of memory: the intermediate tensors of these input shapes need ", bytes, " bytes (",
                    static_cast<double>(bytes) / double(1ull << 30), " GiB), which the machine cannot allocate"));
  data_ = std::unique_ptr<void, void (*)(void*)>(p, [](void* q) { std::free(q); });
  capacity_ = size;
  ++reallocations_;
  return p;
}

}  // namespace kiln::cpu
