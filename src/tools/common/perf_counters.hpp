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

// The per-node real times of one inference added up (executed rows; fused rows count 0), in ms.
double node_time_sum_ms(const std::vector<ProfilingInfo>& rows);

// "node time sum 61.700 ms = 98.7% of mean latency 62.500 ms (median 62.300 ms: 99.0%)":
// how much of a request's wall time the nodes account for.
std::string format_node_time_vs_latency(double node_sum_ms, double mean_ms, double median_ms);

}  // namespace kiln::tools
