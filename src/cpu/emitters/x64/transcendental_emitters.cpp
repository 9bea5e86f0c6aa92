// Exp, Sigmoid, Swish, Tanh, Erf by polynomial approximations (relative error ~1e-7). Every
// constant is a memory operand from the kernel's constant table, and divisions are a
// reciprocal estimate refined by one Newton step (KernelEmitter::reciprocal).
#include "cpu/emitters/x64/kernel_emitter.hpp"
#include "cpu/exp_poly.hpp"

#include <cmath>

namespace kiln::cpu::x64 {

using namespace Xbyak;

using simd::kExpDegree;
using simd::kExpPoly;
using simd::kLn2Hi;
using simd::kLn2Lo;
using simd::kLog2e;

// dst = e^src; src and dst distinct from each other and from a, b, c (scratch). x is
// clamped (NaN kept: min/max return their second operand then; the upper clamp left out
// when the caller knows src <= 0), x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts so
// n ln2 is exact), e^r by a degree-5 polynomial fitted for relative error on that interval
// (1.5e-7 in f32 Horner, 2.5 ulp; the degree-7 Taylor polynomial it replaced reached 6e-8
// with two more FMAs, and the FMA pipes bound these kernels), and the result scaled by
// 2^n: vscalefps on AVX-512 (overflow to inf, underflow to 0); on AVX2 2^(n-1) by integer
// ops, doubled, inf above ln(FLT_MAX) and 0 below the clamp.
void emit_exp_core(KernelEmitter& h, const Xmm& dst, const Xmm& src, const Xmm& a, const Xmm& b, const Xmm& c,
                   bool nonpositive) {
  const float lo = h.avx512() ? -104.0f : -86.5f;
  const float hi = h.avx512() ? 89.0f : 88.72283f;
  h.vmovups(a, h.cst(lo));
  h.vmaxps(a, a, src);
  if (!nonpositive) {
    h.vmovups(b, h.cst(hi));
    h.vminps(a, b, a);
  }
  h.vmulps(b, a, h.cst(kLog2e));
  h.vround(b, b, 0);  // n
  h.vmovaps(c, a);
  h.vfnmadd231ps(c, b, h.cst(kLn2Hi));
  h.vfnmadd231ps(c, b, h.cst(kLn2Lo));  // r
  // minimax-like fit of (e^r - 1) / r, c5 first (Lawson's iteration on 4001 Chebyshev points)
  h.vmovups(a, h.cst(kExpPoly[0]));
  for (int i = 1; i <= kExpDegree; ++i) h.vfmadd213ps(a, c, h.cst(kExpPoly[i]));
  if (h.avx512()) {
    h.vscalefps(dst, a, b);
    return;
  }
  h.vsubps(b, b, h.cst(1.0f));
  h.scale_pow2(dst, a, b, c);
  h.vaddps(dst, dst, dst);
  if (!nonpositive) h.blend_if(dst, src, h.cst(hi), kGtOq, h.cst(INFINITY), a);
  h.blend_if(dst, src, h.cst(lo), kLtOq, h.cst(0.0f), a);
}

// r = tanh(a) for a = |z| >= 0 (a kept): (1 - e) / (1 + e), e = e^(-2a); below a = 0.125
// the odd Taylor series to a^7. Scratch: t0, t1, t2, m.
void emit_abs_tanh_core(KernelEmitter& h, const Xmm& r, const Xmm& a, const Xmm& t0, const Xmm& t1, const Xmm& t2,
                        const Xmm& m) {
  h.vmulps(m, a, h.cst(-2.0f));
  emit_exp_core(h, r, m, t0, t1, t2, /*nonpositive=*/true);
  h.vmovups(t0, h.cst(1.0f));
  h.vsubps(t0, t0, r);
  h.vaddps(t1, r, h.cst(1.0f));
  h.reciprocal(t2, t1, m);
  h.vmulps(r, t0, t2);  // large
  h.vmulps(t0, a, a);
  h.vmovups(t1, h.cst(-17.0f / 315));
  h.vfmadd213ps(t1, t0, h.cst(2.0f / 15));
  h.vfmadd213ps(t1, t0, h.cst(-1.0f / 3));
  h.vmulps(t1, t1, t0);
  h.vfmadd213ps(t1, a, a);  // small = a + a s q
  h.blend_if(r, a, h.cst(0.125f), kLtOq, t1, t0);
}

// r = erf(a) for a = |x| >= 0 (a kept): a < 0.5: 2/sqrt(pi) times the odd Maclaurin series
// to a^13; otherwise 1 - t P(t) e^(-a^2), t = 1 / (1 + p a) (Abramowitz & Stegun 7.1.26),
// with a capped at 10. Scratch: t0, t1, t2, m.
void emit_abs_erf_core(KernelEmitter& h, const Xmm& r, const Xmm& a, const Xmm& t0, const Xmm& t1, const Xmm& t2,
                       const Xmm& m) {
  // e^(-ac^2), ac = min(a, 10)
  h.vmovups(r, h.cst(10.0f));
  h.vminps(r, r, a);
  h.vmulps(m, r, r);
  h.vxor(m, m, h.cst_bits(kSignBit));
  emit_exp_core(h, r, m, t0, t1, t2, /*nonpositive=*/true);
  // t = 1 / (1 + p ac)
  h.vmovups(m, h.cst(10.0f));
  h.vminps(m, m, a);
  h.vmovups(t0, h.cst(0.3275911f));
  h.vfmadd213ps(t0, m, h.cst(1.0f));
  h.reciprocal(t1, t0, t2);
  static const float p[] = {-1.453152027f, 1.421413741f, -0.284496736f, 0.254829592f};
  h.vmovups(t2, h.cst(1.061405429f));
  for (float c : p) h.vfmadd213ps(t2, t1, h.cst(c));
  h.vmulps(t2, t2, t1);
  h.vmulps(t2, t2, r);
  h.vmovups(r, h.cst(1.0f));
  h.vsubps(r, r, t2);  // large
  // small
  h.vmulps(t0, a, a);
  static const float q[] = {-1.0f / 1320, 1.0f / 216, -1.0f / 42, 1.0f / 10, -1.0f / 3, 1.0f};
  h.vmovups(t1, h.cst(1.0f / 9360));
  for (float c : q) h.vfmadd213ps(t1, t0, h.cst(c));
  h.vmulps(t1, t1, a);
  h.vmulps(t1, t1, h.cst(1.1283791670955126f));
  h.blend_if(r, a, h.cst(0.5f), kLtOq, t1, t0);
}

namespace {

void emit_exp(KernelEmitter& h, const Expression& e) {
  const Xmm r = h.tmp(3);
  emit_exp_core(h, r, h.vin(e, 0), h.tmp(0), h.tmp(1), h.tmp(2));
  h.vmovaps(h.vout(e), r);
}

// 1 / (1 + e) for x >= 0 and e / (1 + e) otherwise, with e = e^-|x|.
void emit_sigmoid(KernelEmitter& h, const Expression& e) {
  const Xmm x = h.vin(e, 0);
  const Xmm t0 = h.tmp(0), t1 = h.tmp(1), t2 = h.tmp(2), t3 = h.tmp(3), nx = h.tmp(4), ex = h.tmp(5);
  h.vor(nx, x, h.cst_bits(kSignBit));  // -|x|
  emit_exp_core(h, ex, nx, t0, t1, t2, /*nonpositive=*/true);
  h.vaddps(t0, ex, h.cst(1.0f));
  h.reciprocal(t1, t0, t2);
  h.vmulps(t2, ex, t1);
  h.blend_if(t1, x, h.cst(0.0f), kLtOq, t2, t3);
  h.vmovaps(h.vout(e), t1);
}

// Swish(x) = x / (1 + e^-x) (snippets' Mul(x, Sigmoid(x)), pass::fuse_sigmoid_mul_to_swish).
// x is clamped below at -87, where the result is -1.4e-36: e^87 keeps 1 + e^-x and its
// reciprocal's Newton step finite (a -inf input gives that value, not ONNX's -inf * 0 = NaN);
// NaN is kept (min / max return their second operand then). e^-x is emit_exp_core's
// computation with the negation folded in: n = round(-x log2 e), s = x + n ln2 = -r, and
// e^r = e^-s by the same polynomial with its odd coefficients negated; the exponent argument
// is clamped at -104 (AVX-512: vscalefps flushes to 0) or -86.5 (AVX2: 2^n stays normal), so
// on AVX2 n is in [-125, 126] and scale_pow2 needs no fix-ups. 17 vector operations where
// Sigmoid and Mul take 20: no select between the two signs' forms, no multiply by e.
void emit_swish(KernelEmitter& h, const Expression& e) {
  const Xmm x = h.vin(e, 0);
  const Xmm xc = h.tmp(0), xe = h.tmp(1), n = h.tmp(2), s = h.tmp(3), p = h.tmp(4), t = h.tmp(5);
  h.vmovups(xc, h.cst(simd::kSwishLow));
  h.vmaxps(xc, xc, x);
  h.vmovups(xe, h.cst(h.avx512() ? simd::kSwishExpHigh : simd::kSwishExpHighAvx2));
  h.vminps(xe, xe, xc);
  h.vmulps(n, xe, h.cst(-kLog2e));
  h.vround(n, n, 0);
  h.vmovaps(s, xe);
  h.vfmadd231ps(s, n, h.cst(kLn2Hi));
  h.vfmadd231ps(s, n, h.cst(kLn2Lo));
  // kExpPoly at -s: the coefficients of odd degree negated
  h.vmovups(p, h.cst(simd::exp_poly_negated(0)));
  for (int i = 1; i <= kExpDegree; ++i) h.vfmadd213ps(p, s, h.cst(simd::exp_poly_negated(i)));
  h.scale_pow2(n, p, n, t);  // e^-x
  h.vaddps(n, n, h.cst(1.0f));
  h.reciprocal(p, n, t);
  h.vmulps(h.vout(e), xc, p);
}

// An odd function f from its core on |x|: f(x) = sign(x) f(|x|).
using AbsCore = void (*)(KernelEmitter&, const Xmm&, const Xmm&, const Xmm&, const Xmm&, const Xmm&, const Xmm&);
template <AbsCore Core>
void emit_odd(KernelEmitter& h, const Expression& e) {
  const Xmm x = h.vin(e, 0);
  const Xmm a = h.tmp(3), r = h.tmp(4);
  h.vand(a, x, h.cst_bits(kAbsMask));
  Core(h, r, a, h.tmp(0), h.tmp(1), h.tmp(2), h.tmp(5));
  h.vand(h.tmp(0), x, h.cst_bits(kSignBit));
  h.vor(h.vout(e), r, h.tmp(0));
}

}  // namespace

void register_transcendental_emitters(std::map<std::string, EmitFn>& m) {
  m["Exp"] = emit_exp;
  m["Sigmoid"] = emit_sigmoid;
  m["Swish"] = emit_swish;
  m["Tanh"] = emit_odd<emit_abs_tanh_core>;
  m["Erf"] = emit_odd<emit_abs_erf_core>;
}

}  // namespace kiln::cpu::x64
