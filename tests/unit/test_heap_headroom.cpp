// reserve_heap_headroom (core/heap_headroom.hpp): on glibc, a thread's heap is writable far
// enough ahead after it that the allocations that follow need no growth of the mapping.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/heap_headroom.hpp"

namespace {

// Bytes of the readable and writable mapping that holds `p` (/proc/self/maps), 0 if none.
size_t writable_mapping_bytes(const void* p) {
  std::ifstream maps("/proc/self/maps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  for (std::string line; std::getline(maps, line);) {
    std::istringstream in(line);
    std::string range, perms;
    in >> range >> perms;
    const size_t dash = range.find('-');
    const uintptr_t lo = std::stoull(range.substr(0, dash), nullptr, 16);
    const uintptr_t hi = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (at >= lo && at < hi) return perms.rfind("rw", 0) == 0 ? hi - lo : 0;
  }
  return 0;
}

bool sanitizer_allocator() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#else
  return false;
#endif
}

}  // namespace

TEST(HeapHeadroom, LeavesTheThreadsHeapWritableAheadOfWhatFollows) {
#ifndef __GLIBC__
  GTEST_SKIP() << "how the heap grows is glibc's";
#endif
  if (sanitizer_allocator()) GTEST_SKIP() << "a sanitizer's allocator replaces glibc's heap";
  size_t before = 0, after = 0, used = 0;
  bool fresh = true;
  std::thread t([&] {  // a thread of its own: its own arena (glibc makes up to 8 per core)
    void* first = std::malloc(64);
    before = writable_mapping_bytes(first);
    if (before == 0 || before > (size_t{256} << 10)) {  // shares a grown arena (or the main one)
      fresh = false;
      std::free(first);
      return;
    }
    kiln::reserve_heap_headroom(size_t{1} << 20);
    after = writable_mapping_bytes(first);
    std::vector<void*> small;  // 512 KiB of a plan's kind of objects, kept
    for (int i = 0; i < 8192; ++i) small.push_back(std::malloc(64));
    used = writable_mapping_bytes(first);
    for (void* p : small) std::free(p);
    std::free(first);
  });
  t.join();
  if (!fresh) GTEST_SKIP() << "the test thread got an arena other threads grew";
  EXPECT_GE(after, before + (size_t{900} << 10)) << "the reservation moved the writable end ahead";
  EXPECT_EQ(used, after) << "the allocations after it grew nothing";
}
