#include "cpu/stream_layout.hpp"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "core/strings.hpp"

namespace kiln::cpu {

namespace {

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}
std::vector<int> parse_cpu_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, ',')) {
    if (part.empty() || part == "\n") continue;
    try {
      size_t dash = part.find('-');
      int a = std::stoi(part.substr(0, dash));
      int b = dash == std::string::npos ? a : std::stoi(part.substr(dash + 1));
      for (int c = a; c <= b && c - a < 65536; ++c) out.push_back(c);
    } catch (const std::exception&) {
      return {};
    }
  }
  return out;
}

CpuTopology detect_topology() {
  CpuTopology t;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) t.cpus.push_back(c);
  }
  if (t.cpus.empty()) t.cpus.push_back(0);
  const std::set<int> allowed(t.cpus.begin(), t.cpus.end());
  for (int node = 0; node < 1024; ++node) {
    std::ifstream f("/sys/devices/system/node/node" + std::to_string(node) + "/cpulist");
    if (!f) {
      if (node > 0 || !t.numa_nodes.empty()) break;
      continue;
    }
    std::string line;
    std::getline(f, line);
    std::vector<int> mine;
    for (int c : parse_cpu_list(line))
      if (allowed.count(c)) mine.push_back(c);
    if (!mine.empty()) t.numa_nodes.push_back(std::move(mine));
  }
  // every allowed CPU in exactly one node, else one node of all of them
  size_t covered = 0;
  for (auto& n : t.numa_nodes) covered += n.size();
  if (t.numa_nodes.empty() || covered != t.cpus.size()) t.numa_nodes = {t.cpus};
  return t;
}

std::string set_string(const std::vector<int>& cpus) {
  std::vector<std::string> parts;
  for (int c : cpus) parts.push_back(std::to_string(c));
  return "{" + join(parts, ",") + "}";
}

}  // namespace

CpuTopology CpuTopology::detect() {
  static const CpuTopology t = detect_topology();
  return t;
}

const char* pin_mode_name(PinMode m) {
  switch (m) {
    case PinMode::none: return "NO";
    case PinMode::cores: return "YES";
    case PinMode::numa: return "NUMA";
  }
  return "?";
}

const char* performance_mode_name(PerformanceMode m) {
  switch (m) {
    case PerformanceMode::none: return "NONE";
    case PerformanceMode::latency: return "LATENCY";
    case PerformanceMode::throughput: return "THROUGHPUT";
  }
  return "?";
}

int auto_streams(int threads, const CpuTopology& topo) {
  const size_t nodes = std::max<size_t>(1, topo.numa_nodes.size());
  const size_t per_node = std::max<size_t>(1, topo.cpus.size() / nodes);
  const int per_stream = per_node <= 4 ? 1 : per_node <= 16 ? 2 : 4;
  return std::max(1, threads / per_stream);
}

StreamLayout resolve_streams(const StreamRequest& r, const CpuTopology& topo) {
  using S = StreamRequest::Streams;
  const int cpus = static_cast<int>(topo.cpus.size());
  const int nodes = static_cast<int>(topo.numa_nodes.size());
  StreamLayout l;
  // At most one thread per CPU of the affinity mask (inference_num_threads = 1000 on two CPUs
  // would start 1000 OpenMP threads taking turns), and at most one stream per thread.
  const int threads = r.threads > 0 ? std::min(r.threads, cpus) : cpus;
  if (r.threads > cpus) l.clamped = cat("inference_num_threads ", r.threads, " -> ", cpus, " (the CPUs kiln may use)");
  bool per_node = false;  // stream i runs on NUMA node i
  switch (r.streams_kind) {
    case S::number:
      l.streams = std::min(r.streams, threads);
      if (r.streams > threads)
        l.clamped += cat(l.clamped.empty() ? "" : "; ", "num_streams ", r.streams, " -> ", threads, " (one thread each, ",
                         threads, threads == 1 ? " thread)" : " threads)");
      break;
    case S::numa:
      l.streams = nodes;
      per_node = true;
      break;
    case S::automatic: l.streams = auto_streams(threads, topo); break;
    case S::unset:
      if (r.mode == PerformanceMode::throughput) {
        l.streams = auto_streams(threads, topo);
      } else if (r.mode == PerformanceMode::latency) {
        l.streams = std::min(nodes, threads);  // one per NUMA node
        per_node = l.streams == nodes && nodes > 1;
      } else {
        l.streams = 1;
      }
      break;
  }
  l.threads_per_stream = l.streams > 0 ? std::max(1, threads / l.streams) : threads;
  l.pin = l.streams > 0 ? r.pin : PinMode::none;  // callers' threads are never pinned
  if (l.pin == PinMode::none) return l;
  for (int s = 0; s < l.streams; ++s) {
    std::vector<int> mine;
    if (per_node) {
      const auto& node = topo.numa_nodes[static_cast<size_t>(s % nodes)];
      for (int t = 0; t < l.threads_per_stream; ++t) mine.push_back(node[static_cast<size_t>(t) % node.size()]);
    } else {
      for (int t = 0; t < l.threads_per_stream; ++t)
        mine.push_back(topo.cpus[static_cast<size_t>((s * l.threads_per_stream + t) % cpus)]);
    }
    if (l.pin == PinMode::numa) {  // the whole node of the stream's first CPU
      for (const auto& node : topo.numa_nodes)
        if (std::find(node.begin(), node.end(), mine[0]) != node.end()) mine = node;
    } else {
      std::sort(mine.begin(), mine.end());
      mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
    }
    l.cpus.push_back(std::move(mine));
  }
  return l;
}

std::string StreamLayout::describe() const {
  std::string s;
  if (streams == 0) {
    s = cat("0 streams (requests run on the caller's thread), ", threads_per_stream,
            threads_per_stream == 1 ? " thread" : " threads");
  } else {
    s = cat(streams, streams == 1 ? " stream x " : " streams x ", threads_per_stream,
            threads_per_stream == 1 ? " thread" : " threads");
  }
  const std::string note = clamped.empty() ? "" : "; clamped: " + clamped;
  if (pin == PinMode::none) return s + ", not pinned" + note;
  s += pin == PinMode::numa ? ", pinned to NUMA nodes" : ", pinned to CPUs";
  for (const auto& c : cpus) s += " " + set_string(c);
  return s + note;
}

}  // namespace kiln::cpu
