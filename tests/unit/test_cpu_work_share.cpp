// cpu::WorkShare (cpu/work_share.hpp): every item runs exactly once over a team's calls, a
// thread runs its own share from the front, and a late or absent thread's items are taken by the
// others from the back.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "cpu/work_share.hpp"

namespace test_cpu_work_share {

using kiln::cpu::WorkShare;

// Runs `share` on `threads` std::threads; returns which thread ran each item (-1: none), failing
// on an item run twice.
std::vector<int> run_team(WorkShare& share, int threads) {
  std::vector<std::atomic<int>> owner(static_cast<size_t>(share.items()));
  for (auto& o : owner) o.store(-1);
  std::atomic<int> twice{0};
  std::vector<std::thread> team;
  for (int t = 0; t < threads; ++t)
    team.emplace_back([&, t] {
      share.run(t, [&](int64_t item) {
        int expected = -1;
        if (!owner[static_cast<size_t>(item)].compare_exchange_strong(expected, t)) twice.fetch_add(1);
        std::this_thread::sleep_for(std::chrono::microseconds(50));  // work, so that the others overlap
      });
    });
  for (auto& th : team) th.join();
  EXPECT_EQ(twice.load(), 0) << "an item ran twice";
  std::vector<int> out;
  for (auto& o : owner) out.push_back(o.load());
  return out;
}

TEST(CpuWorkShare, EveryItemRunsExactlyOnce) {
  for (int64_t items : {0, 1, 2, 7, 64, 1001}) {
    for (int threads : {1, 2, 3}) {
      WorkShare share(items, threads);
      const std::vector<int> owner = run_team(share, threads);
      for (int64_t i = 0; i < items; ++i) ASSERT_GE(owner[static_cast<size_t>(i)], 0) << items << " items, item " << i;
    }
  }
}

TEST(CpuWorkShare, ALateThreadsItemsAreTakenFromTheBackOfItsShare) {
  WorkShare share(200, 2);
  std::vector<std::atomic<int>> owner(200);
  for (auto& o : owner) o.store(-1);
  std::atomic<int> done{0};
  auto body = [&](int t) {
    share.run(t, [&](int64_t item) {
      owner[static_cast<size_t>(item)].store(t);
      done.fetch_add(1);
    });
  };
  std::thread first(body, 0);
  // thread 1 comes only once 150 items ran: thread 0 ran its 100, then 50 of thread 1's
  while (done.load() < 150) std::this_thread::yield();
  std::thread late(body, 1);
  first.join();
  late.join();
  EXPECT_EQ(done.load(), 200);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(owner[static_cast<size_t>(i)], 0) << "item " << i;
  for (int i = 150; i < 200; ++i) EXPECT_EQ(owner[static_cast<size_t>(i)], 0) << "a thief takes from the back: item " << i;
  for (int i = 100; i < 150; ++i) EXPECT_GE(owner[static_cast<size_t>(i)], 0) << "item " << i;
}

TEST(CpuWorkShare, ASmallerTeamStillRunsEveryItem) {
  // sized for 4 threads, run by 2 (a nested or limited OpenMP team): the shares of threads 2
  // and 3 are taken by the two that came
  WorkShare share(40, 4);
  const std::vector<int> owner = run_team(share, 2);
  for (int i = 0; i < 40; ++i) EXPECT_GE(owner[static_cast<size_t>(i)], 0) << "item " << i;
}

TEST(CpuWorkShare, ParallelShareRunsEveryItemOnceOnTheTeamOrInOrderAlone) {
  std::vector<std::atomic<int>> runs(1000);
  for (auto& r : runs) r.store(0);
  kiln::cpu::parallel_share(1000, [&](int64_t i) { runs[static_cast<size_t>(i)].fetch_add(1); });
  for (size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(runs[i].load(), 1) << "item " << i;
  std::vector<int64_t> order;
  const std::thread::id me = std::this_thread::get_id();
  kiln::cpu::parallel_share(
      5,
      [&](int64_t i) {
        EXPECT_EQ(std::this_thread::get_id(), me);
        order.push_back(i);
      },
      /*parallel=*/false);
  EXPECT_EQ(order, (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

}  // namespace test_cpu_work_share
