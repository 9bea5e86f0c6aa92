// Binary arithmetic: Add, Sub, Mul, Div, Max, Min, PRelu and FMA. The output register may be an
// input's (its last use), so every emitter reads all inputs before writing the output.
#include <cmath>

#include "cpu/emitters/x64/kernel_emitter.hpp"

namespace kiln::cpu::x64 {

using namespace Xbyak;

namespace {


// Max / Min propagate a NaN from either side like the reference kernels: the instruction
// returns its second operand when either is NaN, and a NaN first operand is blended back.
// With a Scalar operand that is not NaN one instruction does it: the Scalar first, the
// other operand second (returned when either is NaN).
template <bool IsMax>
void emit_minmax(KernelEmitter& h, const Expression& e) {
  for (size_t s = 0; s < 2; ++s) {
    const Expression* src = e.input_expr(s);
    if (src->kind() == snippets::OpKind::Scalar && !std::isnan(src->op().attr("value"))) {
      if (IsMax) h.vmaxps(h.vout(e), h.vin(e, s), h.vin(e, 1 - s));
      else h.vminps(h.vout(e), h.vin(e, s), h.vin(e, 1 - s));
      return;
    }
  }
  const Xmm a = h.vin(e, 0), b = h.vin(e, 1), t = h.tmp(0);
  if (IsMax) h.vmaxps(t, a, b);
  else h.vminps(t, a, b);
  h.blend_if(t, a, a, kUnordQ, a, h.tmp(1));
  h.vmovaps(h.vout(e), t);
}

void emit_fma(KernelEmitter& h, const Expression& e) {
  const Xmm t = h.tmp(0);
  h.vmovaps(t, h.vin(e, 2));
  h.vfmadd231ps(t, h.vin(e, 0), h.vin(e, 1));
  h.vmovaps(h.vout(e), t);
}

// x < 0 ? slope x : x
void emit_prelu(KernelEmitter& h, const Expression& e) {
  const Xmm x = h.vin(e, 0), t = h.tmp(0), y = h.tmp(1);
  h.vmulps(t, x, h.vin(e, 1));
  h.vmovaps(y, x);
  h.blend_if(y, x, h.cst(0.0f), kLtOq, t, h.tmp(2));
  h.vmovaps(h.vout(e), y);
}

}  // namespace

void register_arith_emitters(std::map<std::string, EmitFn>& m) {
  m["Add"] = [](KernelEmitter& h, const Expression& e) { h.vaddps(h.vout(e), h.vin(e, 0), h.vin(e, 1)); };
  m["Sub"] = [](KernelEmitter& h, const Expression& e) { h.vsubps(h.vout(e), h.vin(e, 0), h.vin(e, 1)); };
  m["Mul"] = [](KernelEmitter& h, const Expression& e) { h.vmulps(h.vout(e), h.vin(e, 0), h.vin(e, 1)); };
  m["Div"] = [](KernelEmitter& h, const Expression& e) { h.vdivps(h.vout(e), h.vin(e, 0), h.vin(e, 1)); };
  m["Max"] = emit_minmax<true>;
  m["Min"] = emit_minmax<false>;
  m["PRelu"] = emit_prelu;
  m["FMA"] = emit_fma;
}

}  // namespace kiln::cpu::x64
