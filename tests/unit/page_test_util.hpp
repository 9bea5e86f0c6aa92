#pragma once
// Which pages are in memory (mincore), for the tests of pages brought in ahead of their first
// touch (core/pages.hpp: heap headroom, its faulting thread, the arena).
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <vector>

#include "core/pages.hpp"

namespace kiln::test {

// Per page of the whole pages inside [p, p + bytes): whether it is in memory.
inline std::vector<bool> resident(const void* p, size_t bytes) {
  const PageSpan s = whole_pages(p, bytes);
  std::vector<unsigned char> v(s.bytes() / page_bytes());
  if (!v.empty()) {
    EXPECT_EQ(::mincore(reinterpret_cast<void*>(s.begin), s.bytes(), v.data()), 0);
  }
  std::vector<bool> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = v[i] & 1;
  return out;
}

// How many of those pages are in memory.
inline size_t resident_pages(const void* p, size_t bytes) {
  size_t n = 0;
  for (bool r : resident(p, bytes)) n += r;
  return n;
}

// Whether this kernel populates pages ahead (MADV_POPULATE_WRITE, Linux 5.14), asked of a
// mapping of its own.
inline bool system_populates() {
  const size_t page = page_bytes();
  void* m = ::mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return false;
  const bool yes = populate_pages(m, 4 * page) && resident_pages(m, 4 * page) == 4;
  ::munmap(m, 4 * page);
  return yes;
}

}  // namespace kiln::test
