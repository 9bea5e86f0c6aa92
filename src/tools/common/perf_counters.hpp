#pragma once
// The performance-counter table of `kiln benchmark -pc`: per-node rows averaged over
// the timed iterations, printed in execution order or sorted by time.
#include <kiln/core.hpp>

#include <string>
#include <vector>

namespace kiln::tools {

// Sums the rows of several inferences of one plan (same nodes in the same order).
class PerfCounterAverage {
 public:
  void add(const std::vector<ProfilingInfo>& rows);
  std::vector<ProfilingInfo> average() const;  // per-run means
  size_t runs() const { return runs_; }

 private:
  std::vector<ProfilingInfo> sum_;
  size_t runs_ = 0;
};

// sort: "no_sort" (execution order), "sort" (by real time, then totals per node type),
// "simple_sort" (by real time, executed rows only).
std::string format_perf_counters(const std::vector<ProfilingInfo>& rows, const std::string& sort);

}  // namespace kiln::tools
