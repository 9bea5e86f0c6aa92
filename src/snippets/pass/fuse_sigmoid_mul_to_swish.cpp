// Mul(x, Sigmoid(x)) -> Swish(x): one op computes x / (1 + e^-x) without Sigmoid's select
// between its two branches or the extra multiply (the x64 emitter: 17 vector operations on
// AVX-512 where the pair takes 20; these kernels are bound by the FMA pipes).
#include "ir/graph.hpp"
#include "snippets/op.hpp"
#include "snippets/pass/data_flow_passes.hpp"

namespace kiln::snippets::pass {

size_t fuse_sigmoid_mul_to_swish(ir::Graph& body) {
  size_t n = 0;
  for (ir::Node* mul : body.topo_order()) {
    if (mul->op_type() != "Mul" || !mul->is_onnx_domain() || mul->num_inputs() != 2) continue;
    for (size_t k = 0; k < 2; ++k) {
      ir::Value* s = mul->input(k);
      ir::Value* x = mul->input(1 - k);
      const ir::Node* sig = s->producer();
      // skip: the Sigmoid's value is needed on its own (another reader, a body output), or it
      // is the sigmoid of something else than the Mul's other operand
      if (!sig || sig->op_type() != "Sigmoid" || !sig->is_onnx_domain() || sig->input(0) != x) continue;
      if (s->uses().size() != 1 || body.is_output(s)) continue;
      body.replace_node(mul, "Swish", {x}, kSnippetsDomain);
      ++n;
      break;
    }
  }
  body.remove_dead();
  return n;
}

}  // namespace kiln::snippets::pass
