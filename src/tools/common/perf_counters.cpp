#include "tools/common/perf_counters.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

#include "core/strings.hpp"

namespace kiln::tools {

void PerfCounterAverage::add(const std::vector<ProfilingInfo>& rows) {
  if (sum_.empty() || sum_.size() != rows.size()) {
    // A different plan (new shapes): start over rather than mix nodes.
    sum_ = rows;
    runs_ = 1;
    return;
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    sum_[i].real_time_us += rows[i].real_time_us;
    sum_[i].cpu_time_us += rows[i].cpu_time_us;
  }
  ++runs_;
}

std::vector<ProfilingInfo> PerfCounterAverage::average() const {
  std::vector<ProfilingInfo> out = sum_;
  if (runs_ > 1)
    for (auto& r : out) {
      r.real_time_us /= static_cast<double>(runs_);
      r.cpu_time_us /= static_cast<double>(runs_);
    }
  return out;
}

namespace {

std::string fit(const std::string& s, size_t width) {
  if (s.size() <= width) return s;
  return s.substr(0, width - 3) + "...";
}

std::string row_line(const std::string& name, const char* status, const std::string& type, const std::string& exec,
                     double real_us, double cpu_us, double pct) {
  char buf[320];
  std::snprintf(buf, sizeof buf, "%-40s %-13s %-16s %-28s %10.3f %10.3f %6.2f%%\n", fit(name, 40).c_str(), status,
                fit(type, 16).c_str(), fit(exec, 28).c_str(), real_us / 1000.0, cpu_us / 1000.0, pct);
  return buf;
}

}  // namespace

std::string format_perf_counters(const std::vector<ProfilingInfo>& rows, const std::string& sort) {
  double total_real = 0, total_cpu = 0;
  for (auto& r : rows) {
    total_real += r.real_time_us;
    total_cpu += r.cpu_time_us;
  }
  auto pct = [&](double us) { return total_real > 0 ? 100.0 * us / total_real : 0.0; };
  std::vector<const ProfilingInfo*> order;
  for (auto& r : rows)
    if (sort != "simple_sort" || r.status == ProfilingInfo::Status::executed) order.push_back(&r);
  if (sort == "sort" || sort == "simple_sort")
    std::stable_sort(order.begin(), order.end(),
                     [](const ProfilingInfo* a, const ProfilingInfo* b) { return a->real_time_us > b->real_time_us; });

  std::string out;
  char head[320];
  std::snprintf(head, sizeof head, "%-40s %-13s %-16s %-28s %10s %10s %7s\n", "node", "status", "type", "exec type",
                "real ms", "cpu ms", "share");
  out += head;
  for (const ProfilingInfo* r : order)
    out += row_line(r->node_name, status_name(r->status), r->node_type, r->exec_type, r->real_time_us, r->cpu_time_us,
                    pct(r->real_time_us));
  if (sort == "sort") {
    struct Total {
      double real = 0, cpu = 0;
      size_t count = 0;
    };
    std::map<std::string, Total> by_type;
    for (auto& r : rows) {
      auto& t = by_type[r.node_type];
      t.real += r.real_time_us;
      t.cpu += r.cpu_time_us;
      t.count += r.status == ProfilingInfo::Status::executed;
    }
    std::vector<std::pair<std::string, Total>> types(by_type.begin(), by_type.end());
    std::stable_sort(types.begin(), types.end(), [](auto& a, auto& b) { return a.second.real > b.second.real; });
    out += "\nper node type:\n";
    for (auto& [type, t] : types)
      out += row_line(cat(type, " (", t.count, " nodes)"), "", type, "", t.real, t.cpu, pct(t.real));
  }
  char tail[160];
  std::snprintf(tail, sizeof tail, "total: %.3f ms real, %.3f ms cpu, %zu nodes\n", total_real / 1000.0,
                total_cpu / 1000.0, rows.size());
  out += tail;
  return out;
}

double node_time_sum_ms(const std::vector<ProfilingInfo>& rows) {
  double us = 0;
  for (const ProfilingInfo& r : rows)
    if (r.status == ProfilingInfo::Status::executed) us += r.real_time_us;
  return us / 1000.0;
}

std::string format_node_time_vs_latency(double node_sum_ms, double mean_ms, double median_ms) {
  auto pct = [&](double of) { return of > 0 ? 100.0 * node_sum_ms / of : 0.0; };
  char buf[200];
  std::snprintf(buf, sizeof buf, "node time sum %.3f ms = %.1f%% of mean latency %.3f ms (median %.3f ms: %.1f%%)",
                node_sum_ms, pct(mean_ms), mean_ms, median_ms, pct(median_ms));
  return buf;
}

}  // namespace kiln::tools
