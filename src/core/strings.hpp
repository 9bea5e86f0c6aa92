#pragma once
// Small string helpers (error messages, quoted text).
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

// `s` with backslash and double quote escaped by a backslash and newline as \n: a string
// literal's body in Graphviz, a label value in Prometheus' text format.
inline std::string escape_quotes(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace kiln
