// Erf: oneDNN has no erf eltwise, and it sits on BERT's hot path (the exact GELU is
// exported as x * 0.5 * (1 + erf(x / sqrt(2)))). Computed here with the Chebyshev
// erfc approximation of Numerical Recipes (relative error of erfc < 1.2e-7, so
// |erf error| < 3e-7), vectorised with `omp simd` and split across the OpenMP team.
// erf(0) = 0, so blocked layouts with zero padding are taken as they are.
#include <cmath>
#include <omp.h>

#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

namespace {

#pragma omp declare simd
inline float fast_erf(float x) {
  float z = std::fabs(x);
  float t = 1.0f / (1.0f + 0.5f * z);
  float p = -z * z - 1.26551223f +
            t * (1.00002368f +
                 t * (0.37409196f +
                      t * (0.09678418f +
                           t * (-0.18628806f +
                                t * (0.27886807f +
                                     t * (-1.13520398f + t * (1.48851587f + t * (-0.82215223f + t * 0.17087277f))))))));
  float erfc = t * std::exp(p);
  return x >= 0.0f ? 1.0f - erfc : erfc - 1.0f;
}

class ErfNode : public Node {
 public:
  explicit ErfNode(const ir::Node& n) {
    source = &n;
    name = n.name();
  }
  const char* type() const override { return "Erf"; }

  std::vector<InputLayout> prepare() override {
    impl = "kiln:omp_simd";
    outputs[0]->blocked = inputs[0]->blocked;  // same layout (padding stays zero)
    return {InputLayout::any()};
  }

  void execute(dnnl::stream& stream) override {
    stream.wait();
    const float* x = static_cast<const float*>(inputs[0]->data);
    float* y = static_cast<float*>(outputs[0]->data);
    const int64_t n = static_cast<int64_t>(outputs[0]->bytes() / sizeof(float));
#pragma omp parallel for simd schedule(static) if (n > 4096)
    for (int64_t i = 0; i < n; ++i) y[i] = fast_erf(x[i]);
  }
};

}  // namespace

bool erf_supports(const ir::Node& n) {
  return n.op_type() == "Erf" && n.domain().empty() && n.input(0) && n.input(0)->type.dtype == DType::f32 &&
         n.input(0)->type.shape.is_static();
}

std::unique_ptr<Node> make_erf_node(const ir::Node& n) { return std::make_unique<ErfNode>(n); }

}  // namespace kiln::cpu
