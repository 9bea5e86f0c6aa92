#pragma once
// How a compiled model's requests use the machine: how many streams (worker threads, each
// the master of its own OpenMP team), how many threads each, and which CPUs each stream's
// threads are pinned to. resolve_streams() turns the compile properties (num_streams,
// inference_num_threads, performance_mode, enable_cpu_pinning) and the CPU topology into
// that layout; docs/settings.md explains the rules.
#include <string>
#include <vector>

namespace kiln::cpu {

// The logical CPUs this process may run on (its affinity mask) and how they group into
// NUMA nodes (/sys/devices/system/node; one node holding every CPU when unknown).
struct CpuTopology {
  std::vector<int> cpus;
  std::vector<std::vector<int>> numa_nodes;  // non-empty nodes, each a subset of `cpus`
  static CpuTopology detect();                // of this process, cached after the first call
};

enum class PinMode { none, cores, numa };
const char* pin_mode_name(PinMode m);  // "NO", "YES", "NUMA"

enum class PerformanceMode { none, latency, throughput };
const char* performance_mode_name(PerformanceMode m);  // "NONE", "LATENCY", "THROUGHPUT"

// What the user asked for.
struct StreamRequest {
  enum class Streams { unset, number, automatic, numa } streams_kind = Streams::unset;
  int streams = 0;   // Streams::number
  int threads = 0;   // inference_num_threads; 0: all CPUs
  PinMode pin = PinMode::cores;
  PerformanceMode mode = PerformanceMode::none;
};

// What the model runs with.
struct StreamLayout {
  int streams = 1;             // 0: requests run on the caller's thread
  int threads_per_stream = 1;  // OpenMP team of each stream (of the caller with 0 streams)
  PinMode pin = PinMode::none;
  // Per stream: the CPUs its team is pinned to. cores: thread t -> cpus[s][t % size];
  // numa: every thread of the stream -> all of cpus[s] (its node). Empty when not pinned.
  std::vector<std::vector<int>> cpus;
  // What was asked for and cut to what the machine has ("" when nothing was): more threads
  // than CPUs only take turns on them, and a stream needs a thread of its own.
  std::string clamped;
  int total_threads() const { return (streams > 0 ? streams : 1) * threads_per_stream; }
  std::string describe() const;  // "2 streams x 1 thread, pinned to CPUs {0} {1}[; clamped: ...]"
};

// The streams AUTO picks for `threads` threads on `topo`: threads per stream of 1 up to 4
// CPUs per NUMA node, 2 up to 16, else 4; as many streams as that gives (at least one).
int auto_streams(int threads, const CpuTopology& topo);

StreamLayout resolve_streams(const StreamRequest& r, const CpuTopology& topo);

}  // namespace kiln::cpu
