// reserve_heap_headroom (core/heap_headroom.hpp): on glibc, a thread's heap is writable far
// enough ahead after it that the allocations that follow need no growth of the mapping; its
// pages (HeadroomPages) fault in a step at a time, in order, without changing what they hold.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/heap_headroom.hpp"
#include "page_test_util.hpp"

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

TEST(HeapHeadroom, PagesFaultInAStepAtATimeInOrderAndKeepWhatTheyHold) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE)), n = 32;
  // an anonymous mapping never touched but for one page that holds data already
  char* base = static_cast<char*>(::mmap(nullptr, n * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(base, MAP_FAILED);
  std::memset(base + 5 * page, 0x5a, page);
  ASSERT_FALSE(kiln::test::resident(base, n * page)[0]);
  const auto b = reinterpret_cast<uintptr_t>(base);
  kiln::HeadroomPages pages({{b, b + 16 * page}, {b + 20 * page, b + 30 * page}});
  EXPECT_EQ(pages.left(), 26 * page);
  if (!pages.fault_in_next(4 * page)) {
    ::munmap(base, n * page);
    GTEST_SKIP() << "this kernel has no MADV_POPULATE_WRITE (Linux 5.14)";
  }
  std::vector<bool> r = kiln::test::resident(base, n * page);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(r[i], i < 4 || i == 5) << "page " << i;
  EXPECT_EQ(pages.left(), 22 * page);
  size_t steps = 1;
  while (pages.fault_in_next(4 * page)) ++steps;
  EXPECT_EQ(steps, 4u + 3u);  // 16 pages, then 10, 4 at a time
  EXPECT_EQ(pages.left(), 0u);
  EXPECT_FALSE(pages.fault_in_next(4 * page));
  r = kiln::test::resident(base, n * page);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(r[i], i < 16 || (i >= 20 && i < 30)) << "page " << i;
  for (size_t i = 0; i < page; ++i) ASSERT_EQ(static_cast<unsigned char>(base[5 * page + i]), 0x5a);
  EXPECT_EQ(base[page], 0);
  ::munmap(base, n * page);
}

TEST(HeapHeadroom, AReservationsPagesAreTheFreedBlocksWholePages) {
  std::thread t([] {
    kiln::reserve_heap_headroom(size_t{1} << 20);
    const kiln::HeadroomPages& pages = kiln::headroom_pages();
    const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    ASSERT_FALSE(pages.ranges().empty());
    size_t total = 0;
    for (auto [begin, end] : pages.ranges()) {
      EXPECT_EQ(begin % page, 0u);
      EXPECT_EQ(end % page, 0u);
      EXPECT_LT(begin, end);
      total += end - begin;
    }
    // eleven blocks of 96 KiB, ten of them freed (whole pages inside them; neighbours merged)
    EXPECT_LE(total, 10 * kiln::kHeadroomBlock);
    EXPECT_GE(total, 10 * (kiln::kHeadroomBlock - 2 * page));
    EXPECT_EQ(pages.left(), total);
    // what the thread allocates next may take them: memory it can use
    std::vector<void*> small;
    for (int i = 0; i < 4096; ++i) small.push_back(std::malloc(64));
    for (void* p : small) std::free(p);
  });
  t.join();
}

}  // namespace test_heap_headroom
