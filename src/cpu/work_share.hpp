#pragma once
// Items [0, n) shared by the threads of an OpenMP team, each thread starting on its own
// contiguous share (the locality of a static split: a GEMM thread's blocks share their panel of
// B) and, its share done, taking items one at a time from the far end of the share that has most
// left. A static split makes the team wait at the region's closing barrier for its slowest
// thread: one woken late from sleep, one that a busy host runs slower for a while, one with the
// dearer edge blocks. Measured on the BERT stream (Zen 3 VM, 2 threads): 9% of both threads'
// time waited at the barriers of kiln's GEMMs.
//
// Usage, inside `#pragma omp parallel` (every thread of the team calls run with the same
// WorkShare, made before the region):
//   WorkShare share(items, omp_get_max_threads());
//   #pragma omp parallel
//   share.run(omp_get_thread_num(), [&](int64_t item) { ... });
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include <kiln/error.hpp>

namespace kiln::cpu {

class WorkShare {
 public:
  // `items` to share among at most `threads` threads (thread numbers [0, threads)).
  WorkShare(int64_t items, int threads)
      : items_(std::max<int64_t>(items, 0)), threads_(std::max(threads, 1)), shares_(new Share[threads_]) {
    KILN_CHECK(items_ < (int64_t{1} << 32), "WorkShare: " + std::to_string(items_) + " items, more than 2^32 - 1");
    for (int t = 0; t < threads_; ++t)
      shares_[t].range.store(pack(items_ * t / threads_, items_ * (t + 1) / threads_), std::memory_order_relaxed);
  }

  // Calls f(item) for the items thread `ithr` takes: its share's from the front, then others' from
  // their back. Every item runs exactly once over the team's calls. A team smaller than `threads`
  // still runs every item: a share whose thread never comes is taken from its back.
  template <typename F>
  void run(int ithr, F&& f) {
    if (ithr < 0 || ithr >= threads_) ithr = 0;
    for (int64_t item; (item = take_front(shares_[ithr])) >= 0;) f(item);
    for (;;) {
      int victim = -1;
      int64_t most = 0;
      for (int t = 0; t < threads_; ++t) {
        const uint64_t r = shares_[t].range.load(std::memory_order_relaxed);
        if (const int64_t left = back(r) - front(r); left > most) most = left, victim = t;
      }
      if (victim < 0) return;
      if (const int64_t item = take_back(shares_[victim]); item >= 0) f(item);
    }
  }

  int64_t items() const { return items_; }

 private:
  // [front, back) of a share in one word, so that its owner and a thief never take the same item
  struct alignas(64) Share {
    std::atomic<uint64_t> range{0};
  };
  static uint64_t pack(int64_t f, int64_t b) { return static_cast<uint64_t>(f) << 32 | static_cast<uint64_t>(b); }
  static int64_t front(uint64_t r) { return static_cast<int64_t>(r >> 32); }
  static int64_t back(uint64_t r) { return static_cast<int64_t>(r & 0xffffffffu); }

  static int64_t take_front(Share& s) {
    uint64_t r = s.range.load(std::memory_order_relaxed);
    while (front(r) < back(r))
      if (s.range.compare_exchange_weak(r, pack(front(r) + 1, back(r)), std::memory_order_acq_rel)) return front(r);
    return -1;
  }
  static int64_t take_back(Share& s) {
    uint64_t r = s.range.load(std::memory_order_relaxed);
    while (front(r) < back(r))
      if (s.range.compare_exchange_weak(r, pack(front(r), back(r) - 1), std::memory_order_acq_rel)) return back(r) - 1;
    return -1;
  }

  int64_t items_;
  int threads_;
  std::unique_ptr<Share[]> shares_;
};

// f(item) for items [0, n) on the calling thread's OpenMP team through a WorkShare (the
// `#pragma omp parallel for schedule(static)` of a loop whose items are independent), or on the
// calling thread alone when `parallel` is false.
template <typename F>
void parallel_share(int64_t n, F&& f, bool parallel = true) {
  const int nthr = omp_get_max_threads();
  if (!parallel || n < 2 || nthr < 2) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
  WorkShare share(n, nthr);
#pragma omp parallel num_threads(nthr)
  share.run(omp_get_thread_num(), f);
}

}  // namespace kiln::cpu
