#include "tools/common/trace.hpp"

#include <algorithm>
#include <fstream>

#include "core/strings.hpp"

namespace kiln::tools {

void Trace::add(size_t request, const std::vector<ProfilingInfo>& rows) {
  for (const ProfilingInfo& r : rows) {
    if (r.status != ProfilingInfo::Status::executed) continue;
    events_.push_back({request, r.start_us, r.real_time_us, r.node_name, r.node_type, r.exec_type});
    origin_us_ = origin_us_ < 0 ? r.start_us : std::min(origin_us_, r.start_us);
  }
}

nlohmann::json Trace::json() const {
  nlohmann::json ev = nlohmann::json::array();
  std::vector<size_t> tracks;
  for (const Event& e : events_) {
    ev.push_back({{"name", e.name},
                  {"cat", e.type},
                  {"ph", "X"},
                  {"ts", e.start_us - origin_us_},
                  {"dur", e.dur_us},
                  {"pid", 1},
                  {"tid", e.request},
                  {"args", {{"type", e.type}, {"exec_type", e.exec}}}});
    if (std::find(tracks.begin(), tracks.end(), e.request) == tracks.end()) tracks.push_back(e.request);
  }
  for (size_t t : tracks)  // name the tracks
    ev.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", t}, {"args", {{"name", cat("request ", t)}}}});
  return {{"traceEvents", ev}, {"displayTimeUnit", "ms"}};
}

void Trace::write(const std::string& path) const {
  std::ofstream f(path);
  KILN_CHECK(f.good(), cat("--trace: cannot write '", path, "'"));
  f << json().dump() << "\n";
  f.close();
  KILN_CHECK(!f.fail(), cat("--trace: cannot write '", path, "'"));
}

}  // namespace kiln::tools
