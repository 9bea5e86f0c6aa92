#include "cpu/fusion_decisions.hpp"

namespace kiln::cpu {

bool FusionDecisions::decide(const std::string& key, std::string* why, const std::function<bool(std::string*)>& decide) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = answers_.find(key);
    if (it != answers_.end()) {
      if (why && !it->second.first) *why = it->second.second;
      return it->second.first;
    }
  }
  std::string reason;
  const bool ok = decide(&reason);
  std::lock_guard<std::mutex> lock(mu_);
  answers_.emplace(key, std::make_pair(ok, reason));  // a thread that decided first keeps its answer
  if (why && !ok) *why = reason;
  return ok;
}

size_t FusionDecisions::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return answers_.size();
}

}  // namespace kiln::cpu
