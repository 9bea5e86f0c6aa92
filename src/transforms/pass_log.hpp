#pragma once
// What the graph passes did, and why they did not: every pass that looks at a place
// where its pattern starts records either "applied" (and what it fused) or "skipped"
// with the first condition that failed. `kiln inspect --explain-fusions` prints it.
#include <string>
#include <vector>

namespace kiln::transforms {

struct PassLog {
  struct Entry {
    std::string pass;     // e.g. "FuseConvolutionAndSimpleOperation"
    std::string where;    // the nodes involved, e.g. "conv_7 -> add_9"
    std::string message;  // applied: what happened; skipped: the first failed condition
    bool applied = false;
  };
  std::vector<Entry> entries;

  void applied(const std::string& pass, const std::string& where, const std::string& message = "") {
    entries.push_back({pass, where, message, true});
  }
  void skipped(const std::string& pass, const std::string& where, const std::string& reason) {
    entries.push_back({pass, where, reason, false});
  }
  size_t count_applied(const std::string& pass) const {
    size_t n = 0;
    for (auto& e : entries) n += e.applied && e.pass == pass;
    return n;
  }
};

}  // namespace kiln::transforms
