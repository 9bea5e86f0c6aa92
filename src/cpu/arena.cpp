#include "cpu/arena.hpp"

#include <kiln/error.hpp>

#include <algorithm>
#include <cstdlib>

#include "core/strings.hpp"

namespace kiln::cpu {

void* Arena::reserve(size_t bytes) {
  bytes = std::max<size_t>(bytes, kAlignment);
  if (bytes <= capacity_) return data_.get();
  size_t grown = capacity_ + capacity_ / 2;
  size_t size = std::max(bytes, grown);
  size = aligned(size);
  data_.reset();  // the old bytes go first: never both at once
  capacity_ = 0;
  void* p = std::aligned_alloc(kAlignment, size);
  if (!p && size > bytes) {  // the growth margin may be what does not fit
    size = aligned(bytes);
    p = std::aligned_alloc(kAlignment, size);
  }
  KILN_CHECK(p, cat("out of memory: the intermediate tensors of these input shapes need ", bytes, " bytes (",
                    static_cast<double>(bytes) / double(1ull << 30), " GiB), which the machine cannot allocate"));
  data_ = std::unique_ptr<void, void (*)(void*)>(p, [](void* q) { std::free(q); });
  capacity_ = size;
  ++reallocations_;
  return p;
}

}  // namespace kiln::cpu
