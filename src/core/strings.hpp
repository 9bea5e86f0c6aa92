#pragma once
// Small string helpers (error messages, quoted text).
#include <charconv>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace kiln {

namespace detail {
// One argument of cat(), written as `os << v` would write it. Text and integers are appended
// directly: a stream costs a locale and a buffer per call, and the compile pipeline writes
// its pass log with cat() for every new input shape (bench/micro/bench_plans.cpp).
template <typename T>
void cat_one(std::string& out, const T& v) {
  using D = std::decay_t<T>;
  if constexpr (std::is_pointer_v<T> && (std::is_same_v<D, const char*> || std::is_same_v<D, char*>)) {
    if (v) out += v;  // a stream writes nothing for a null pointer
  } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    out += std::string_view(v);
  } else if constexpr (std::is_same_v<D, char>) {
    out += v;
  } else if constexpr (std::is_integral_v<D> && !std::is_same_v<D, bool> && !std::is_same_v<D, signed char> &&
                       !std::is_same_v<D, unsigned char>) {
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, r.ptr);
  } else {  // floating point, bool, 8-bit characters, kiln's own types: as the stream writes them
    std::ostringstream os;
    os << v;
    out += os.str();
  }
}
}  // namespace detail

// cat("node ", name, " expects ", 3, " inputs") -> one string.
template <typename... Args>
std::string cat(const Args&... args) {
  std::string out;
  (detail::cat_one(out, args), ...);
  return out;
}

// join({1, 2, 3}) -> "1,2,3", each element written as cat() writes it (no stream: the fusion
// passes join post-op names for every new input shape)
template <typename T>
std::string join(const std::vector<T>& v, const char* sep = ",") {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += sep;
    detail::cat_one(out, v[i]);
  }
  return out;
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
