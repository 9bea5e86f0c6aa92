#pragma once
// The oneDNN eltwise algorithm computing an ONNX unary op exactly (shared by the
// Eltwise node and by the fusion passes, which turn the op into a post-op).
#include <oneapi/dnnl/dnnl.hpp>

#include <optional>

#include "ir/graph.hpp"

namespace kiln::cpu {

struct EltwiseSpec {
  dnnl::algorithm alg;
  float alpha = 0.0f;
  float beta = 0.0f;
};

// The algorithm and parameters computing node n (f32) as ONNX specifies, if oneDNN has one.
std::optional<EltwiseSpec> eltwise_spec(const ir::Node& n);

}  // namespace kiln::cpu
