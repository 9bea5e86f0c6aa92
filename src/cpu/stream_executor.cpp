#include "cpu/stream_executor.hpp"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <condition_variable>
#include <deque>

namespace kiln::cpu {

struct StreamExecutor::Shared {
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<std::function<void()>> queue;
  bool stop = false;
};

namespace {

void pin_this_thread(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  sched_setaffinity(0, sizeof set, &set);  // best effort: a CPU may have gone offline
}

void worker_main(std::shared_ptr<StreamExecutor::Shared> s, StreamLayout layout, size_t index) {
  configure_team(layout.threads_per_stream, layout.pin,
                 index < layout.cpus.size() ? layout.cpus[index] : std::vector<int>{});
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(s->mutex);
      s->ready.wait(lock, [&] { return s->stop || !s->queue.empty(); });
      if (s->queue.empty()) return;  // stopping, and nothing left to run
      task = std::move(s->queue.front());
      s->queue.pop_front();
    }
    task();
    task = nullptr;  // what the task held goes here, possibly the executor itself
  }
}

}  // namespace

void configure_team(int threads, PinMode mode, const std::vector<int>& cpus) {
  omp_set_num_threads(std::max(1, threads));
  if (mode == PinMode::none || cpus.empty()) return;
  // Team threads start with the master's mask, so pin the master to the whole set
  // first; then each thread pins itself. libgomp keeps this team's threads for the
  // master's later parallel regions of at most this size.
  pin_this_thread(cpus);
#pragma omp parallel
  {
    if (mode == PinMode::numa) {
      pin_this_thread(cpus);
    } else {
      const size_t t = static_cast<size_t>(omp_get_thread_num());
      pin_this_thread({cpus[t % cpus.size()]});
    }
  }
}

std::mutex& exclusive_requests_mutex() {
  static std::mutex m;
  return m;
}

StreamExecutor::StreamExecutor(const StreamLayout& layout) : shared_(std::make_shared<Shared>()) {
  const int n = std::max(1, layout.streams);
  for (int i = 0; i < n; ++i) workers_.emplace_back(worker_main, shared_, layout, static_cast<size_t>(i));
}

StreamExecutor::~StreamExecutor() {
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    shared_->stop = true;
  }
  shared_->ready.notify_all();
  for (std::thread& t : workers_) {
    if (t.get_id() == std::this_thread::get_id()) t.detach();  // destroyed by its own task
    else t.join();
  }
}

void StreamExecutor::submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    shared_->queue.push_back(std::move(task));
  }
  shared_->ready.notify_one();
}

}  // namespace kiln::cpu
