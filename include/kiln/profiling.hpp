#pragma once
// One row of a runtime node's performance counters (InferRequest::get_profiling_info in
// <kiln/core.hpp>): what ran, as which kernel, for how long. Every executor fills these rows.
#include <string>

namespace kiln {

// One row of InferRequest::get_profiling_info(): a runtime node of the last inference
// (compile property enable_profiling / PERF_COUNT must be on).
struct ProfilingInfo {
  enum class Status { not_run, optimized_out, executed };
  Status status = Status::executed;
  std::string node_name;  // the runtime node (a fused node is named after its first ir node)
  std::string node_type;  // runtime node kind: Convolution, Eltwise, Reorder, Reference, ...
  std::string exec_type;  // implementation and precision, e.g. "brgconv_avx512_core_f32", "ref_any_f32"
  double real_time_us = 0;  // wall time of the node
  double start_us = 0;      // when it started: steady clock, microseconds since its epoch (timelines)
  double cpu_time_us = 0;   // process CPU time (all threads) spent during the node
  std::string fused_into;   // OPTIMIZED_OUT rows: the runtime node this layer was fused into
};
const char* status_name(ProfilingInfo::Status s);  // "EXECUTED", "NOT_RUN", "OPTIMIZED_OUT"

}  // namespace kiln
