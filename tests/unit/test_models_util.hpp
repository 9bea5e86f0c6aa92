#pragma once
// The real-architecture models of tests/models/make_test_models.py: ctest's `test_models`
// fixture makes them into the build directory and points KILN_TEST_MODELS at it. A test that
// needs one and does not find it fails (it does not skip): run `ctest -R test_models`, or the
// script with --out DIR and KILN_TEST_MODELS=DIR.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace kiln::test {

inline std::filesystem::path test_models_dir() {
  if (const char* env = std::getenv("KILN_TEST_MODELS"); env && *env) return env;
  return KILN_TEST_MODELS_DEFAULT;
}

// <dir>/<name>/model.onnx; adds a failure naming what to run when it is missing.
inline std::filesystem::path test_model(const std::string& name) {
  const auto path = test_models_dir() / name / "model.onnx";
  if (!std::filesystem::exists(path))
    ADD_FAILURE() << path << " not found: run `ctest -R test_models` (tests/models/make_test_models.py), or set "
                  << "KILN_TEST_MODELS to a directory it wrote";
  return path;
}

}  // namespace kiln::test
