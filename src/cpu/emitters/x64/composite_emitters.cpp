// Activations built from the exp / tanh / erf cores and plain arithmetic: Elu, Softplus,
// Mish, Gelu (erf and tanh forms), HardSigmoid, HardSwish, Log, Reciprocal. NaN and
// infinities follow the reference kernels (src/ops/elementwise.cpp).
#include <cfloat>
#include <cmath>

#include "cpu/emitters/x64/kernel_emitter.hpp"

namespace kiln::cpu::x64 {

using namespace Xbyak;

namespace {

// x < 0 ? alpha (e^x - 1) : x
void emit_elu(KernelEmitter& h, const Expression& e) {
  const Xmm x = h.vin(e, 0), r = h.tmp(3), y = h.tmp(4);
  emit_exp_core(h, r, x, h.tmp(0), h.tmp(1), h.tmp(2));
  h.vsubps(r, r, h.cst(1.0f));
  h.vmulps(r, r, h.cst(static_cast<float>(e.op().attr("alpha", 1.0))));
  h.vmovaps(y, x);
  h.blend_if(y, x, h.cst(0.0f), kLtOq, r, h.tmp(0));
  h.vmovaps(h.vout(e), y);
}

// log(1 + q) for q = e^-|x| in (0, 1], as 2 atanh(s) with s = q / (2 + q) <= 1/3: the odd
// series to s^15 (accurate for small q too, like log1p). Result into r; t0, t1 scratch.
void log1p_unit(KernelEmitter& h, const Xmm& r, const Xmm& q, const Xmm& t0, const Xmm& t1) {
  h.vaddps(t0, q, h.cst(2.0f));
  h.reciprocal(r, t0, t1);
  h.vmulps(r, r, q);    // s
  h.vmulps(t0, r, r);   // s^2
  static const float c[] = {2.0f / 13, 2.0f / 11, 2.0f / 9, 2.0f / 7, 2.0f / 5, 2.0f / 3, 2.0f};
  h.vmovups(t1, h.cst(2.0f / 15));
  for (float k : c) h.vfmadd213ps(t1, t0, h.cst(k));
  h.vmulps(r, r, t1);
}

// max(x, 0) + log(1 + e^-|x|)
void emit_softplus(KernelEmitter& h, const Expression& e) {
  const Xmm x = h.vin(e, 0), nx = h.tmp(3), q = h.tmp(4), r = h.tmp(5);
  h.vor(nx, x, h.cst_bits(kSignBit));
  emit_exp_core(h, q, nx, h.tmp(0), h.tmp(1), h.tmp(2), /*nonpositive=*/true);
  log1p_unit(h, r, q, h.tmp(0), h.tmp(1));
  h.vxorps(q, q, q);
  h.vmaxps(q, x, q);  // x > 0 ? x : 0 (NaN -> 0, and the log term is NaN)
  h.vaddps(h.vout(e), q, r);
}

// x tanh(softplus(x)) = x n / (n + 2), n = e (e + 2), e = e^min(x, 20) (tanh(softplus(20)) is 1 in f32)
void emit_mish(KernelEmitter& h, const Expression& e) {
  const Xmm x = h.vin(e, 0), c = h.tmp(3), ex = h.tmp(4), n = h.tmp(5);
  h.vmovups(c, h.cst(20.0f));
  h.vminps(c, c, x);
  emit_exp_core(h, ex, c, h.tmp(0), h.tmp(1), h.tmp(2));
  h.vaddps(n, ex, h.cst(2.0f));
  h.vmulps(n, n, ex);
  h.vaddps(c, n, h.cst(2.0f));
  h.reciprocal(ex, c, h.tmp(0));
  h.vmulps(n, n, ex);
  h.vmulps(h.vout(e), n, x);
}

// 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x + 0.5 |x| erf(|x| / sqrt 2); the tanh form (attribute
// approximate = "tanh") with tanh(sqrt(2/pi) (x + 0.044715 x^3)) the same way.
void emit_gelu(KernelEmitter& h, const Expression& e) {
  const Xmm x = h.vin(e, 0), a = h.tmp(3), r = h.tmp(4);
  if (e.op().attr("tanh", 0) != 0) {
    h.vmulps(r, x, x);
    h.vmovups(a, h.cst(0.044715f));
    h.vfmadd213ps(a, r, h.cst(1.0f));                // 1 + 0.044715 x^2
    h.vand(r, x, h.cst_bits(kAbsMask));
    h.vmulps(a, a, r);
    h.vmulps(a, a, h.cst(0.7978845608028654f));      // |z|
    emit_abs_tanh_core(h, r, a, h.tmp(0), h.tmp(1), h.tmp(2), h.tmp(5));
  } else {
    h.vand(a, x, h.cst_bits(kAbsMask));
    h.vmulps(a, a, h.cst(0.7071067811865476f));
    emit_abs_erf_core(h, r, a, h.tmp(0), h.tmp(1), h.tmp(2), h.tmp(5));
  }
  const Xmm t = h.tmp(0), hx = h.tmp(1);
  h.vand(t, x, h.cst_bits(kAbsMask));
  h.vmulps(t, t, h.cst(0.5f));
  h.vmulps(hx, x, h.cst(0.5f));
  h.vfmadd213ps(t, r, hx);  // 0.5 |x| r + 0.5 x (halves first: no overflow near FLT_MAX)
  h.vmovaps(h.vout(e), t);
}

// max(0, min(1, alpha x + beta)) with std::min / std::max's NaN behaviour (NaN -> 1).
void hard_sigmoid_into(KernelEmitter& h, const Xmm& d, const Xmm& x, float alpha, float beta, const Xmm& t) {
  h.vmovups(d, h.cst(alpha));
  h.vfmadd213ps(d, x, h.cst(beta));
  h.vminps(d, d, h.cst(1.0f));  // d < 1 ? d : 1
  h.vxorps(t, t, t);
  h.vmaxps(d, d, t);  // d > 0 ? d : 0
}

void emit_hard_sigmoid(KernelEmitter& h, const Expression& e) {
  const Xmm d = h.tmp(1);
  hard_sigmoid_into(h, d, h.vin(e, 0), static_cast<float>(e.op().attr("alpha", 0.2)),
                    static_cast<float>(e.op().attr("beta", 0.5)), h.tmp(0));
  h.vmovaps(h.vout(e), d);
}

void emit_hard_swish(KernelEmitter& h, const Expression& e) {
  const Xmm x = h.vin(e, 0), d = h.tmp(1);
  hard_sigmoid_into(h, d, x, 1.0f / 6, 0.5f, h.tmp(0));
  h.vmulps(h.vout(e), d, x);
}

// log x = k ln2 + log m, x = m 2^k with m in [sqrt(1/2), sqrt(2)) (subnormals scaled by 2^23
// first), log m = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.172: the odd series to s^9.
// 0 -> -inf, negative -> NaN, +inf -> +inf, NaN -> NaN.
void emit_log(KernelEmitter& h, const Expression& e) {
  const Xmm x = h.vin(e, 0), a = h.tmp(0), k = h.tmp(1), c = h.tmp(2), d = h.tmp(3), r = h.tmp(4);
  h.vmulps(c, x, h.cst(8388608.0f));
  h.vmovaps(a, x);
  h.blend_if(a, x, h.cst(FLT_MIN), kLtOq, c, d);
  h.vxorps(k, k, k);
  h.blend_if(k, x, h.cst(FLT_MIN), kLtOq, h.cst(-23.0f), d);
  h.vpsrld(c, a, 23);
  h.vpsubd(c, c, h.cst_bits(127));
  h.vcvtdq2ps(c, c);
  h.vaddps(k, k, c);
  h.vand(a, a, h.cst_bits(0x007fffffu));
  h.vor(a, a, h.cst_bits(0x3f800000u));  // m in [1, 2)
  h.vaddps(c, k, h.cst(1.0f));
  h.blend_if(k, a, h.cst(1.41421356f), kGtOq, c, d);
  h.vmulps(c, a, h.cst(0.5f));
  h.blend_if(a, a, h.cst(1.41421356f), kGtOq, c, d);
  h.vsubps(c, a, h.cst(1.0f));
  h.vaddps(a, a, h.cst(1.0f));
  h.reciprocal(d, a, r);
  h.vmulps(c, c, d);  // s
  h.vmulps(a, c, c);
  h.vmovups(d, h.cst(2.0f / 9));
  for (float q : {2.0f / 7, 2.0f / 5, 2.0f / 3, 2.0f}) h.vfmadd213ps(d, a, h.cst(q));
  h.vmulps(d, d, c);
  h.vfmadd231ps(d, k, h.cst(0.693147180559945f));
  h.blend_if(d, x, h.cst(0.0f), kEqOq, h.cst(-INFINITY), a);
  h.blend_if(d, x, h.cst(0.0f), kLtOq, h.cst(NAN), a);
  h.blend_if(d, x, h.cst(INFINITY), kEqOq, h.cst(INFINITY), a);
  h.blend_if(d, x, x, kUnordQ, x, a);
  h.vmovaps(h.vout(e), d);
}

void emit_reciprocal(KernelEmitter& h, const Expression& e) {
  const Xmm t = h.tmp(0);
  h.vmovups(t, h.cst(1.0f));
  h.vdivps(h.vout(e), t, h.vin(e, 0));
}

}  // namespace

void register_composite_emitters(std::map<std::string, EmitFn>& m) {
  m["Elu"] = emit_elu;
  m["Softplus"] = emit_softplus;
  m["Mish"] = emit_mish;
  m["Gelu"] = emit_gelu;
  m["HardSigmoid"] = emit_hard_sigmoid;
  m["HardSwish"] = emit_hard_swish;
  m["Log"] = emit_log;
  m["Reciprocal"] = emit_reciprocal;
}

}  // namespace kiln::cpu::x64
