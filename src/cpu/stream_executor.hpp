#pragma once
// StreamExecutor: a compiled model's streams. Each stream is a worker thread that is the
// master of its own OpenMP team (omp_set_num_threads(threads_per_stream) on the worker;
// with pinning, every team thread pins itself to its CPU once, at start). Tasks (the
// inferences of async requests) wait in one FIFO queue and the next free stream takes
// the next task, so at most `streams` requests run at once and the rest queue.
//
// Destruction drains the queue and joins the workers. A task may release the last
// reference to its own executor: the worker running it then detaches itself and exits
// after the task, touching only state it shares with the executor.
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "cpu/stream_layout.hpp"

namespace kiln::cpu {

class StreamExecutor {
 public:
  explicit StreamExecutor(const StreamLayout& layout);  // layout.streams >= 1
  ~StreamExecutor();
  StreamExecutor(const StreamExecutor&) = delete;
  StreamExecutor& operator=(const StreamExecutor&) = delete;

  // Queues a task; it must not throw (a task that does ends the process).
  void submit(std::function<void()> task);
  int streams() const { return static_cast<int>(workers_.size()); }

  struct Shared;  // queue and stop flag, shared with the workers

 private:
  std::shared_ptr<Shared> shared_;
  std::vector<std::thread> workers_;
};

// Sets the OpenMP team of the calling thread and, unless `mode` is none, pins each of its
// threads: cores: thread t to cpus[t % size]; numa: every thread to all of `cpus`.
void configure_team(int threads, PinMode mode, const std::vector<int>& cpus);

// Held around every inference of a compiled model with exclusive_async_requests = YES:
// one process-wide mutex, so those requests of all compiled models run one at a time.
std::mutex& exclusive_requests_mutex();

}  // namespace kiln::cpu
