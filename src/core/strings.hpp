#pragma once
// Small string helpers used for error messages.
#include <sstream>
#include <string>
#include <vector>

namespace kiln {

// cat("node ", name, " expects ", 3, " inputs") -> one string.
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

template <typename T>
std::string join(const std::vector<T>& v, const char* sep = ",") {
  std::ostringstream os;
  for (size_t i = 0; i < v.size(); ++i) os << (i ? sep : "") << v[i];
  return os.str();
}

}  // namespace kiln
