#pragma once
// Times one node for the performance counters: wall time (steady clock) and the CPU
// time of the whole process (all OpenMP threads) between start() and stop().
#include <kiln/profiling.hpp>

#include <chrono>
#include <ctime>

namespace kiln {

class NodeTimer {
 public:
  void start() {
    wall0_ = std::chrono::steady_clock::now();
    cpu0_ = process_cpu_us();
  }
  // Fills the two times of `row`.
  void stop(ProfilingInfo& row) const {
    row.real_time_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - wall0_).count();
    row.start_us = std::chrono::duration<double, std::micro>(wall0_.time_since_epoch()).count();
    row.cpu_time_us = process_cpu_us() - cpu0_;
  }

 private:
  static double process_cpu_us() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
  }
  std::chrono::steady_clock::time_point wall0_;
  double cpu0_ = 0;
};

}  // namespace kiln
