// Comparisons, logic, Where and Cast. Inside a kernel a bool is a float 1.0 / 0.0 and an
// integer a float holding an integral value (exact up to 2^24), so these ops stay on the
// vector registers; only f32 crosses the kernel boundary.
#include "cpu/emitters/x64/kernel_emitter.hpp"

namespace kiln::cpu::x64 {

using namespace Xbyak;

namespace {

// ONNX TensorProto data types the Cast emitter distinguishes.
constexpr int kOnnxFloat = 1, kOnnxBool = 9;

template <uint8_t Pred>
void emit_compare(KernelEmitter& h, const Expression& e) {
  h.cmp_to_float(h.vout(e), h.vin(e, 0), h.vin(e, 1), Pred, h.tmp(0));
}

void emit_and(KernelEmitter& h, const Expression& e) { h.vminps(h.vout(e), h.vin(e, 0), h.vin(e, 1)); }
void emit_or(KernelEmitter& h, const Expression& e) { h.vmaxps(h.vout(e), h.vin(e, 0), h.vin(e, 1)); }
void emit_xor(KernelEmitter& h, const Expression& e) { h.cmp_to_float(h.vout(e), h.vin(e, 0), h.vin(e, 1), kNeqOq, h.tmp(0)); }

void emit_not(KernelEmitter& h, const Expression& e) {
  const Xmm t = h.tmp(0);
  h.vmovups(t, h.cst(1.0f));
  h.vsubps(h.vout(e), t, h.vin(e, 0));
}

// cond != 0 ? a : b
void emit_where(KernelEmitter& h, const Expression& e) {
  const Xmm t = h.tmp(0);
  h.vmovaps(t, h.vin(e, 2));
  h.blend_if(t, h.vin(e, 0), h.cst(0.0f), kNeqUq, h.vin(e, 1), h.tmp(1));
  h.vmovaps(h.vout(e), t);
}

// "to" (ONNX type) and "from_f32" (set by the Linear IR for a float source): float -> integer
// truncates toward zero; anything -> bool is != 0 (NaN is true); integer / bool -> float and
// integer -> integer keep the value.
void emit_cast(KernelEmitter& h, const Expression& e) {
  const int to = static_cast<int>(e.op().attr("to", kOnnxFloat));
  const bool from_f32 = e.op().attr("from_f32", 1) != 0;
  const Xmm x = h.vin(e, 0), d = h.vout(e);
  if (to == kOnnxBool) {
    h.cmp_to_float(d, x, h.cst(0.0f), kNeqUq, h.tmp(0));
  } else if (to != kOnnxFloat && from_f32) {
    h.vround(d, x, 0x03);
  } else if (d.getIdx() != x.getIdx()) {
    h.vmovaps(d, x);
  }
}

}  // namespace

void register_logic_emitters(std::map<std::string, EmitFn>& m) {
  m["Equal"] = emit_compare<kEqOq>;
  m["Greater"] = emit_compare<kGtOq>;
  m["GreaterOrEqual"] = emit_compare<kGeOq>;
  m["Less"] = emit_compare<kLtOq>;
  m["LessOrEqual"] = emit_compare<kLeOq>;
  m["And"] = emit_and;
  m["Or"] = emit_or;
  m["Xor"] = emit_xor;
  m["Not"] = emit_not;
  m["Where"] = emit_where;
  m["Cast"] = emit_cast;
}

}  // namespace kiln::cpu::x64
