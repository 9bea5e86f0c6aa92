#pragma once
// kiln::Error: the one exception type kiln throws for anything a user can cause
// (bad model, bad input, unsupported op). Messages name the node, the op and what
// was expected.
#include <stdexcept>
#include <string>

namespace kiln {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace kiln

// KILN_CHECK(cond, msg-expression): throw kiln::Error(msg) when cond is false.
// msg may be any expression convertible to std::string (use kiln::cat for formatting).
#define KILN_CHECK(cond, msg)                 \
  do {                                        \
    if (!(cond)) throw ::kiln::Error(msg);    \
  } while (0)
