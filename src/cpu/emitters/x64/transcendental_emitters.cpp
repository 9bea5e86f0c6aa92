// Exp, Sigmoid, Tanh, Erf by polynomial approximations (relative error ~1e-7).
#include "cpu/emitters/x64/kernel_emitter.hpp"

namespace kiln::cpu::x64 {

using namespace Xbyak;

namespace {

constexpr uint8_t kLtOq = 0x11, kGeOq = 0x1D;

// dst = e^src. src may be t0, dst must differ from t0..t3. x is clamped to [-104, 89]
// (NaN kept: min/max return their second operand then), x = n ln2 + r with |r| <= ln2/2
// (ln2 in two parts so n ln2 is exact), e^r by its degree-7 Taylor polynomial, and the
// result scaled by 2^n with vscalefps (overflow to inf, underflow to 0).
void exp_core(KernelEmitter& h, const Zmm& dst, const Zmm& src, const Zmm& t0, const Zmm& t1, const Zmm& t2, const Zmm& t3) {
  h.load_const(t3, -104.0f);
  h.vmaxps(t0, t3, src);
  h.load_const(t3, 89.0f);
  h.vminps(t0, t3, t0);
  h.load_const(t3, 1.44269504088896341f);
  h.vmulps(t1, t0, t3);
  h.vrndscaleps(t1, t1, 0x08);  // nearest
  h.vmovaps(t2, t0);
  h.load_const(t3, 0.693359375f);
  h.vfnmadd231ps(t2, t1, t3);
  h.load_const(t3, -2.12194440e-4f);
  h.vfnmadd231ps(t2, t1, t3);
  static const float coeffs[] = {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};
  h.load_const(t3, 1.0f / 5040);
  for (float c : coeffs) {
    h.load_const(t0, c);
    h.vfmadd213ps(t3, t2, t0);
  }
  h.vscalefps(dst, t3, t1);
}

void emit_exp(KernelEmitter& h, const Expression& e) {
  const Zmm t0 = KernelEmitter::tmp(0);
  h.vmovaps(t0, h.vin(e, 0));
  exp_core(h, h.vout(e), t0, t0, KernelEmitter::tmp(1), KernelEmitter::tmp(2), KernelEmitter::tmp(3));
}

// |x| into a.
void abs_into(KernelEmitter& h, const Zmm& a, const Zmm& x, const Zmm& scratch) {
  h.load_const_bits(scratch, 0x7fffffffu);
  h.vpandd(a, x, scratch);
}

// dst = |y| with the sign of x.
void copysign_out(KernelEmitter& h, const Zmm& dst, const Zmm& y, const Zmm& x, const Zmm& scratch) {
  h.load_const_bits(scratch, 0x80000000u);
  h.vpandd(scratch, scratch, x);
  h.vpord(dst, y, scratch);
}

// x >= 0: 1 / (1 + e^-x); otherwise e^x / (1 + e^x) (both with e = e^-|x|).
void emit_sigmoid(KernelEmitter& h, const Expression& e) {
  const Zmm x = h.vin(e, 0);
  const Zmm t0 = KernelEmitter::tmp(0), t1 = KernelEmitter::tmp(1), t2 = KernelEmitter::tmp(2), t3 = KernelEmitter::tmp(3),
            a = KernelEmitter::tmp(4), ex = KernelEmitter::tmp(5);
  h.vxorps(t0, t0, t0);
  h.vcmpps(h.k3, x, t0, kGeOq);
  h.load_const_bits(t0, 0x80000000u);
  h.vpord(t0, x, t0);  // -|x|
  exp_core(h, ex, t0, t0, t1, t2, t3);
  h.load_const(t0, 1.0f);
  h.vaddps(t1, t0, ex);
  h.vdivps(t2, t0, t1);
  h.vdivps(a, ex, t1);
  h.vmovaps(a | h.k3, t2);
  h.vmovaps(h.vout(e), a);
}

// tanh|x| = (1 - e) / (1 + e), e = e^(-2|x|); below |x| = 0.125 the odd Taylor series to x^7.
void emit_tanh(KernelEmitter& h, const Expression& e) {
  const Zmm x = h.vin(e, 0);
  const Zmm t0 = KernelEmitter::tmp(0), t1 = KernelEmitter::tmp(1), t2 = KernelEmitter::tmp(2), t3 = KernelEmitter::tmp(3),
            a = KernelEmitter::tmp(4), ex = KernelEmitter::tmp(5);
  abs_into(h, a, x, t0);
  h.load_const(t1, -2.0f);
  h.vmulps(t0, a, t1);
  exp_core(h, ex, t0, t0, t1, t2, t3);
  h.load_const(t0, 1.0f);
  h.vsubps(t1, t0, ex);
  h.vaddps(t2, t0, ex);
  h.vdivps(ex, t1, t2);  // large
  h.vmulps(t2, a, a);
  h.load_const(t3, -17.0f / 315);
  h.load_const(t0, 2.0f / 15);
  h.vfmadd213ps(t3, t2, t0);
  h.load_const(t0, -1.0f / 3);
  h.vfmadd213ps(t3, t2, t0);
  h.vmulps(t3, t3, t2);
  h.vfmadd213ps(t3, a, a);  // small = a + a s q
  h.load_const(t0, 0.125f);
  h.vcmpps(h.k2, a, t0, kLtOq);
  h.vmovaps(ex | h.k2, t3);
  copysign_out(h, h.vout(e), ex, x, t0);
}

// |x| < 0.5: 2/sqrt(pi) times the odd Maclaurin series to x^13; otherwise
// 1 - t P(t) e^(-x^2), t = 1 / (1 + p|x|) (Abramowitz & Stegun 7.1.26). Sign of x.
void emit_erf(KernelEmitter& h, const Expression& e) {
  const Zmm x = h.vin(e, 0);
  const Zmm t0 = KernelEmitter::tmp(0), t1 = KernelEmitter::tmp(1), t2 = KernelEmitter::tmp(2), t3 = KernelEmitter::tmp(3),
            a = KernelEmitter::tmp(4), r = KernelEmitter::tmp(5);
  abs_into(h, a, x, t0);
  // e^(-ac^2), ac = min(|x|, 10)
  h.load_const(t1, 10.0f);
  h.vminps(t0, t1, a);
  h.vmulps(t0, t0, t0);
  h.load_const_bits(t1, 0x80000000u);
  h.vpxord(t0, t0, t1);
  exp_core(h, r, t0, t0, t1, t2, t3);
  // t = 1 / (1 + p ac)
  h.load_const(t1, 10.0f);
  h.vminps(t0, t1, a);
  h.load_const(t1, 0.3275911f);
  h.load_const(t2, 1.0f);
  h.vfmadd213ps(t1, t0, t2);
  h.vdivps(t1, t2, t1);
  static const float p[] = {-1.453152027f, 1.421413741f, -0.284496736f, 0.254829592f};
  h.load_const(t2, 1.061405429f);
  for (float c : p) {
    h.load_const(t0, c);
    h.vfmadd213ps(t2, t1, t0);
  }
  h.vmulps(t2, t2, t1);
  h.vmulps(t2, t2, r);
  h.load_const(t0, 1.0f);
  h.vsubps(r, t0, t2);  // large
  // small
  h.vmulps(t1, a, a);
  static const float q[] = {-1.0f / 1320, 1.0f / 216, -1.0f / 42, 1.0f / 10, -1.0f / 3, 1.0f};
  h.load_const(t2, 1.0f / 9360);
  for (float c : q) {
    h.load_const(t0, c);
    h.vfmadd213ps(t2, t1, t0);
  }
  h.vmulps(t2, t2, a);
  h.load_const(t0, 1.1283791670955126f);
  h.vmulps(t2, t2, t0);
  h.load_const(t0, 0.5f);
  h.vcmpps(h.k2, a, t0, kLtOq);
  h.vmovaps(r | h.k2, t2);
  copysign_out(h, h.vout(e), r, x, t0);
}

}  // namespace

void register_transcendental_emitters(std::map<std::string, EmitFn>& m) {
  m["Exp"] = emit_exp;
  m["Sigmoid"] = emit_sigmoid;
  m["Tanh"] = emit_tanh;
  m["Erf"] = emit_erf;
}

}  // namespace kiln::cpu::x64
