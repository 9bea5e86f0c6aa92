#include "core/populate_pages.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

namespace kiln {

namespace {
std::atomic<bool> g_refused{false};  // the kernel does not know MADV_POPULATE_WRITE
}  // namespace

bool populate_pages(const void* begin, size_t bytes) {
  if (g_refused.load(std::memory_order_relaxed)) return false;
  static const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto lo = reinterpret_cast<uintptr_t>(begin), hi = lo + bytes;
  const uintptr_t from = (lo + page - 1) / page * page, to = hi / page * page;
  if (from < to && ::madvise(reinterpret_cast<void*>(from), to - from, MADV_POPULATE_WRITE) != 0 && errno == EINVAL) {
    g_refused.store(true, std::memory_order_relaxed);  // an older kernel: stop asking
    return false;
  }
  return true;
}

}  // namespace kiln
