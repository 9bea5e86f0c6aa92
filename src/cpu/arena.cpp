#include "cpu/arena.hpp"

#include <kiln/error.hpp>

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>

#include "core/pages.hpp"
#include "core/strings.hpp"

namespace kiln::cpu {

namespace {

// `size` bytes (a multiple of Arena::kAlignment) from malloc: arenas below 2 MiB.
void* allocate_small(size_t size) { return std::aligned_alloc(Arena::kAlignment, size); }

// Arenas from 2 MiB on: core/pages.hpp's map_huge_aligned (where the system gives every mapping
// transparent huge pages, THP "always", whole ones). Not advised as huge pages (MADV_HUGEPAGE) any
// more: on the virtual machines measured a huge page's first touch may have to be backed by the
// host 4 KiB at a time, 8.8 us per 4 KiB of memory the guest never used against 1.4-1.7 us on
// small pages, and the advice bought nothing once the pages were in. 2026-12-05, the same binary
// with and without it, interleaved: MobileNetV2 f32's first inference 24-48 ms with it against
// 6-9 without, ResNet-50's 74-87 against 36-40, their later ones the same (min 3.36-3.48 /
// 3.34-3.42 ms, 33.1-37.7 / 33.0-33.2 ms); EfficientNet-B0's first pass over 12 new shapes, whose
// arena grows into fresh memory as they do, 213-280 ms against 121-134, its later passes the same
// (95-106 ms). (On 2026-11-27 the advice had measured 4% faster and a quicker first inference for
// MobileNetV2: the host's memory, not kiln, decides.)

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
    if (size < kHugePageBytes) {
      release();  // the old bytes go first: never both at once
      data_ = allocate_small(size);
      if (!data_) return false;
      capacity_ = size;
      return true;
    }
    size = whole_huge_pages(size);
    void* p = map_huge_aligned(size);
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

void Arena::populate() {
  if (data_) populate_pages(data_, capacity_);
}

Arena::~Arena() { release(); }

}  // namespace kiln::cpu
