#include "core/pages.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

namespace kiln {

namespace {
std::atomic<bool> g_refused{false};  // the kernel does not know MADV_POPULATE_WRITE
}  // namespace

size_t page_bytes() {
  static const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

PageSpan whole_pages(uintptr_t lo, uintptr_t hi) {
  const uintptr_t page = page_bytes();
  return {(lo + page - 1) / page * page, hi / page * page};
}

void* map_huge_aligned(size_t size) {
  void* raw = ::mmap(nullptr, size + kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (aligned > start) ::munmap(raw, aligned - start);  // the slack before and after the aligned range
  if (const size_t tail = start + kHugePageBytes - aligned; tail > 0) ::munmap(reinterpret_cast<void*>(aligned + size), tail);
  return reinterpret_cast<void*>(aligned);
}

bool populate_pages(const void* begin, size_t bytes) {
  if (g_refused.load(std::memory_order_relaxed)) return false;
  const PageSpan s = whole_pages(begin, bytes);
  if (!s.empty() && ::madvise(reinterpret_cast<void*>(s.begin), s.bytes(), MADV_POPULATE_WRITE) != 0 && errno == EINVAL) {
    g_refused.store(true, std::memory_order_relaxed);  // an older kernel: stop asking
    return false;
  }
  return true;
}

}  // namespace kiln
