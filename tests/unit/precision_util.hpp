#pragma once
// inference_precision defaults to bf16 on CPUs that run bf16 natively (docs/settings.md), so
// every test that compares outputs with f32 references (hand computations, the reference
// executor, exact values) compiles with f32_properties(...): f32 said explicitly at the call.
#include <gtest/gtest.h>
#include <kiln/core.hpp>
#include <kiln/error.hpp>

#include <memory>
#include <string>

#include "cpu/isa.hpp"

namespace kiln::test {

// `properties` plus inference_precision = f32.
inline AnyMap f32_properties(AnyMap properties = {}) {
  properties["inference_precision"] = "f32";
  return properties;
}

// Where the instruction set in use cannot run bf16 (below AVX-512, e.g. an AVX2 CPU or
// KILN_MAX_CPU_ISA=AVX2), asking for it must be refused at compile time with an error that
// says what is missing and what to use instead; returns true there (the caller skips).
inline bool bf16_refused_here(const std::shared_ptr<Model>& model) {
  if (cpu::bf16_available()) return false;
  try {
    Core().compile_model(model, {{"inference_precision", "bf16"}});
    ADD_FAILURE() << "bf16 compiled on " << cpu::isa_description();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("inference_precision=bf16"), std::string::npos) << m;
    EXPECT_NE(m.find("AVX-512"), std::string::npos) << m;
    EXPECT_NE(m.find("inference_precision=f32"), std::string::npos) << m;
  }
  return true;
}

}  // namespace kiln::test
