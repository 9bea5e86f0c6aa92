#pragma once
// A Chrome-trace / Perfetto timeline ("traceEvents" JSON) of the runtime nodes of every
// profiled request: one complete event ("ph": "X") per executed node, one track per
// request, so parallel streams show side by side.
#include <kiln/core.hpp>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace kiln::tools {

class Trace {
 public:
  // The counters of one finished run of request `request` (rows with start times).
  void add(size_t request, const std::vector<ProfilingInfo>& rows);
  size_t events() const { return events_.size(); }
  nlohmann::json json() const;
  void write(const std::string& path) const;  // throws kiln::Error when it cannot

 private:
  struct Event {
    size_t request;
    double start_us, dur_us;
    std::string name, type, exec;
  };
  std::vector<Event> events_;
  double origin_us_ = -1;  // earliest start: the timeline's 0
};

}  // namespace kiln::tools
