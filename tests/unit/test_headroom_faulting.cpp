// run_while_faulting_in_headroom (cpu/headroom_faulting.hpp): the build runs once, on the
// calling thread, while the team's second thread faults in the calling thread's headroom pages;
// what it did not reach stays the caller's; the build's error reaches the caller; with no
// second thread the build just runs.
#include <gtest/gtest.h>
#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/heap_headroom.hpp"
#include "cpu/headroom_faulting.hpp"
#include "page_test_util.hpp"

namespace test_headroom_faulting {

namespace {

const size_t kPage = static_cast<size_t>(::sysconf(_SC_PAGESIZE));

// An anonymous mapping of `pages` pages, none of them touched, as the thread's headroom pages.
struct UntouchedPages {
  size_t pages;
  char* base;
  explicit UntouchedPages(size_t n)
      : pages(n),
        base(static_cast<char*>(::mmap(nullptr, n * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))) {
    const auto b = reinterpret_cast<uintptr_t>(base);
    kiln::headroom_pages() = kiln::HeadroomPages({{b, b + n * kPage}});
  }
  ~UntouchedPages() {
    kiln::headroom_pages() = kiln::HeadroomPages();
    ::munmap(base, pages * kPage);
  }
  size_t in_memory() const { return kiln::test::resident_pages(base, pages * kPage); }
};

}  // namespace

TEST(HeadroomFaulting, TheSecondThreadFaultsInThePagesWhileTheBuildRuns) {
  if (!kiln::test::system_populates()) GTEST_SKIP() << "this kernel has no MADV_POPULATE_WRITE";
  if (omp_get_max_threads() < 2) GTEST_SKIP() << "a team of one thread: no second thread to do it";
  UntouchedPages room(256);  // 1 MiB
  ASSERT_EQ(room.in_memory(), 0u);
  const auto caller = std::this_thread::get_id();
  int builds = 0;
  bool on_caller = false;
  size_t seen = 0;
  kiln::cpu::run_while_faulting_in_headroom([&] {
    ++builds;
    on_caller = std::this_thread::get_id() == caller;
    // the build touches none of the pages: only the helper can bring them in
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((seen = room.in_memory()) < room.pages && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  });
  EXPECT_EQ(builds, 1);
  EXPECT_TRUE(on_caller);
  EXPECT_EQ(seen, room.pages);
  EXPECT_EQ(kiln::headroom_pages().left(), 0u);
}

TEST(HeadroomFaulting, TheHelperStopsWhenTheBuildIsDoneAndTheRestWaitsForTheNextBuild) {
  if (!kiln::test::system_populates()) GTEST_SKIP() << "this kernel has no MADV_POPULATE_WRITE";
  UntouchedPages room(4096);  // 16 MiB: likely more than a build that returns at once leaves time for
  kiln::cpu::run_while_faulting_in_headroom([] {});
  const size_t left = kiln::headroom_pages().left(), in = room.in_memory();
  EXPECT_EQ(left + in * kPage, room.pages * kPage);  // in memory: what it reached, and no more
  // nothing goes on faulting behind the caller's back
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(room.in_memory(), in);
  EXPECT_EQ(kiln::headroom_pages().left(), left);
  if (left == 0 || omp_get_max_threads() < 2) return;  // (a scheduler that ran the helper first)
  // the next build takes up where it stopped
  kiln::cpu::run_while_faulting_in_headroom([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (room.in_memory() < room.pages && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  });
  EXPECT_EQ(room.in_memory(), room.pages);
  EXPECT_EQ(kiln::headroom_pages().left(), 0u);
}

TEST(HeadroomFaulting, TheBuildsErrorReachesTheCaller) {
  UntouchedPages room(64);
  EXPECT_THROW(kiln::cpu::run_while_faulting_in_headroom([] { throw std::runtime_error("no plan"); }),
               std::runtime_error);
  // and the next build runs as usual
  int builds = 0;
  kiln::cpu::run_while_faulting_in_headroom([&] { ++builds; });
  EXPECT_EQ(builds, 1);
}

TEST(HeadroomFaulting, InsideAParallelRegionTheBuildJustRuns) {
  if (omp_get_max_threads() < 2) GTEST_SKIP() << "a team of one thread: no parallel region to be in";
  UntouchedPages room(64);
  int builds = 0;
  bool in_callers_region = false;
#pragma omp parallel num_threads(2)
  {
    if (omp_get_thread_num() == 0)
      kiln::cpu::run_while_faulting_in_headroom([&] {
        ++builds;
        in_callers_region = omp_get_level() == 1;  // no team of its own
      });
  }
  EXPECT_EQ(builds, 1);
  EXPECT_TRUE(in_callers_region);
  EXPECT_EQ(room.in_memory(), 0u);  // no helper: nothing faulted in
}

}  // namespace test_headroom_faulting
