#pragma once
// Shared by the fuzz targets: what counts as a finding, and input values.
#include <kiln/error.hpp>
#include <kiln/tensor.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace kiln::fuzz {

// Runs `f`; true when it returned, false when it threw a kiln::Error a user may get (bad
// input, said clearly). Aborts (a finding) on a kiln::Error that reports an internal error:
// the API wraps exceptions kiln did not expect that way. Other exceptions escape to the
// fuzzer, which reports them.
template <class F>
bool expect_kiln_error(F&& f) {
  try {
    f();
    return true;
  } catch (const kiln::Error& e) {
    const std::string what = e.what();
    if (what.rfind("internal error", 0) == 0) {  // the API's wrapping (messages may quote user text)
      std::fprintf(stderr, "kiln fuzz: finding: %s\n", what.c_str());
      std::abort();
    }
    return false;
  }
}

// Fills a numeric tensor with a small deterministic pattern (integers stay in 0..3, so
// indices and shapes read from inputs stay small; floats in [-2, 2)).
void fill_pattern(Tensor& t, uint32_t seed);

// Reads every byte of a tensor's data, so a buffer shorter than its shape says shows under
// AddressSanitizer.
void touch(const Tensor& t);

}  // namespace kiln::fuzz
