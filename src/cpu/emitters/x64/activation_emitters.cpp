// Unary ops without transcendental functions: Neg, Abs, Relu, Sqrt, Clip, LeakyRelu,
// PowerStatic, Floor / Ceil / Round. NaN and signed zeros follow the reference kernels.
#include <kiln/error.hpp>

#include <cfloat>
#include <cmath>

#include "core/strings.hpp"
#include "cpu/emitters/x64/kernel_emitter.hpp"

namespace kiln::cpu::x64 {

using namespace Xbyak;

namespace {


void emit_neg(KernelEmitter& h, const Expression& e) { h.vxor(h.vout(e), h.vin(e, 0), h.cst_bits(kSignBit)); }

void emit_abs(KernelEmitter& h, const Expression& e) { h.vand(h.vout(e), h.vin(e, 0), h.cst_bits(kAbsMask)); }

// x < 0 ? 0 : x. vmaxps returns its second operand (x) for a NaN or equal zeros.
void emit_relu(KernelEmitter& h, const Expression& e) {
  const Xmm t = h.tmp(0);
  h.vxorps(t, t, t);
  h.vmaxps(h.vout(e), t, h.vin(e, 0));
}

// v < lo ? lo : v, then v > hi ? hi : v (NaN stays NaN).
void emit_clip(KernelEmitter& h, const Expression& e) {
  const Xmm lo = h.tmp(0), hi = h.tmp(1), t = h.tmp(2);
  h.load_const(lo, static_cast<float>(e.op().attr("min", -FLT_MAX)));
  h.load_const(hi, static_cast<float>(e.op().attr("max", FLT_MAX)));
  h.vmaxps(t, lo, h.vin(e, 0));
  h.vminps(h.vout(e), hi, t);
}

void emit_leaky_relu(KernelEmitter& h, const Expression& e) {
  const Xmm x = h.vin(e, 0), t = h.tmp(0), z = h.tmp(1);
  h.vmulps(t, x, h.cst(static_cast<float>(e.op().attr("alpha", 0.01))));
  h.vmovaps(z, x);
  h.blend_if(z, x, h.cst(0.0f), kLtOq, t, h.tmp(2));
  h.vmovaps(h.vout(e), z);
}

void emit_sqrt(KernelEmitter& h, const Expression& e) { h.vsqrtps(h.vout(e), h.vin(e, 0)); }

template <uint8_t Mode>
void emit_round(KernelEmitter& h, const Expression& e) {
  h.vround(h.vout(e), h.vin(e, 0), Mode);
}

// x ^ p for an integer p (square and multiply, 1 / x^|p| when negative) or p = 0.5
// (sqrt, with pow's +0 for -0 and +inf for -inf).
void emit_power_static(KernelEmitter& h, const Expression& e) {
  const double p = e.op().attr("power");
  const Xmm x = h.vin(e, 0), acc = h.tmp(0), base = h.tmp(1), t = h.tmp(2);
  if (p == 0.5) {
    h.vsqrtps(acc, x);
    h.vxorps(t, t, t);
    h.vaddps(acc, acc, t);  // -0 -> +0
    h.blend_if(acc, x, h.cst(-INFINITY), kEqOq, h.cst(INFINITY), t);
    h.vmovaps(h.vout(e), acc);
    return;
  }
  KILN_CHECK(p == std::floor(p) && std::fabs(p) <= 16, cat("snippets x64: PowerStatic exponent ", p, " is not supported"));
  int64_t n = static_cast<int64_t>(std::fabs(p));
  h.load_const(acc, 1.0f);
  h.vmovaps(base, x);
  bool first = true;
  while (n) {
    if (n & 1) {
      if (first) h.vmovaps(acc, base);
      else h.vmulps(acc, acc, base);
      first = false;
    }
    n >>= 1;
    if (n) h.vmulps(base, base, base);
  }
  if (p < 0) {
    h.load_const(t, 1.0f);
    h.vdivps(acc, t, acc);
  }
  h.vmovaps(h.vout(e), acc);
}

}  // namespace

void register_activation_emitters(std::map<std::string, EmitFn>& m) {
  m["Neg"] = emit_neg;
  m["Abs"] = emit_abs;
  m["Relu"] = emit_relu;
  m["Clip"] = emit_clip;
  m["LeakyRelu"] = emit_leaky_relu;
  m["Sqrt"] = emit_sqrt;
  m["Floor"] = emit_round<0x01>;
  m["Ceil"] = emit_round<0x02>;
  m["Round"] = emit_round<0x00>;
  m["PowerStatic"] = emit_power_static;
}

}  // namespace kiln::cpu::x64
