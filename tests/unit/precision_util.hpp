#pragma once
// inference_precision defaults to bf16 on CPUs that run bf16 natively (docs/settings.md), so
// every test that compares outputs with f32 references (hand computations, the reference
// executor, exact values) compiles with f32_properties(...): f32 said explicitly at the call.
#include <kiln/core.hpp>

namespace kiln::test {

// `properties` plus inference_precision = f32.
inline AnyMap f32_properties(AnyMap properties = {}) {
  properties["inference_precision"] = "f32";
  return properties;
}

}  // namespace kiln::test
