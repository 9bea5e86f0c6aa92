#pragma once
// error_of(fn): what a test expects to fail with kiln::Error.
#include <gtest/gtest.h>
#include <kiln/error.hpp>

#include <exception>
#include <functional>
#include <string>

namespace kiln::test {

// The kiln::Error's message, or "<no error>" when fn returns; any other exception fails the
// test (bad input must give a kiln::Error, never something else).
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a kiln::Error: " << e.what();
    return e.what();
  }
  return "<no error>";
}

}  // namespace kiln::test
