// reserve_heap_headroom (core/heap_headroom.hpp): on glibc, a thread's heap is writable far
// enough ahead after it that the allocations that follow need no growth of the mapping.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/heap_headroom.hpp"

namespace test_heap_headroom {

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

// In a thread of its own, in a process of its own (a death test's, re-executed: in this one
// the earlier tests' threads have made every arena glibc allows, and a new thread shares one
// they grew): exits 0 when the reservation left the heap writable ahead of the allocations that
// follow, 1 when not, 3 when the thread still got an arena other threads grew.
[[noreturn]] void reserve_in_a_fresh_thread() {
  size_t before = 0, after = 0, used = 0;
  bool fresh = true;
  std::thread t([&] {
    void* first = std::malloc(64);
    before = writable_mapping_bytes(first);
    if (before == 0 || before > (size_t{256} << 10)) {
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
  if (!fresh) std::_Exit(3);
  if (after < before + (size_t{900} << 10)) {
    std::fprintf(stderr, "the reservation left %zu writable bytes, %zu before\n", after, before);
    std::_Exit(1);
  }
  if (used != after) {
    std::fprintf(stderr, "the allocations after it grew the heap from %zu to %zu bytes\n", after, used);
    std::_Exit(1);
  }
  std::_Exit(0);
}

}  // namespace

TEST(HeapHeadroomDeathTest, LeavesTheThreadsHeapWritableAheadOfWhatFollows) {
#ifndef __GLIBC__
  GTEST_SKIP() << "how the heap grows is glibc's";
#endif
  if (sanitizer_allocator()) GTEST_SKIP() << "a sanitizer's allocator replaces glibc's heap";
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the child runs this test alone, from the start
  EXPECT_EXIT(reserve_in_a_fresh_thread(), [](int status) {
    return WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 3);
  }, "");
}

}  // namespace test_heap_headroom
