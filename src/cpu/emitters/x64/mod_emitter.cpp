// Mod with fmod=1 on f32: C fmod(a, b), bit-exact for every pair of inputs.
//
// a - trunc(a / b) * b is exact only while the quotient fits the 24-bit significand:
// fmod(3e38, 1.5e-7) needs about 150 quotient bits. Instead r = |a| is reduced modulo
// d = |b| in exact steps, each by a divisor dd = d * 2^k with k >= 0 integral (a multiple
// of d, so reducing modulo dd keeps r mod d):
//
//   k  = max(e(r) - e(d) - 22, 0)      e(): binary exponent, floor(log2), denormals too
//   q  = trunc(r / dd)
//   r  = fma(-q, dd, r)
//   r += dd where r < 0
//
// Why a step is exact: by the choice of k, Q = r / dd < 2^23 (k > 0: dd >= 2^(e(r) - 22)
// and r < 2^(e(r) + 1); k = 0: e(r) - e(d) <= 22). So n = floor(Q) and n + 1 are floats,
// and the correctly rounded quotient lies in [n, n + 1]: q is n or n + 1 and r - q dd lies
// in (-dd, dd). r (when >= dd) and q dd are integer multiples of ulp(dd) (2^-149 when dd is
// denormal), so r - q dd is a multiple of ulp(dd) smaller than dd in magnitude, i.e. a
// float, and the fma's single rounding returns it exactly. Likewise r + dd in (0, dd).
//
// Why the loop ends: a step with k > 0 leaves r < dd < 2^(e(r) - 21), at least 22
// exponents lower; a step with k = 0 leaves r < d, and repeating it changes nothing
// (q = 0). So the loop runs while some lane has k > 0 (12 times at most, for
// fmod(3e38, 1e-45); not at all when every quotient is below about 2^22), then one step
// with dd = d ends it.
//
// Exponents. AVX-512: vgetexpps (it normalizes denormals; nothing in kiln sets MXCSR.DAZ)
// and vscalefps for dd. AVX2 reads the biased exponent field with integer ops: exact for a
// normal number; a denormal d is m 2^-149 with m (its bits) < 2^23, so its exponent is that
// of float(m) less 149. A denormal r reads as 2^-127, too high, but then d <= r is denormal
// too, e(d) >= -149 gives k = 0 and r / d < 2^-126 / 2^e(d) <= 2^23 all the same. k reaches
// 254 (3e38 by 1e-45) and 2^k is not a float: dd = d 2^min(k, 127) 2^(k - min(k, 127)),
// both products exact (powers of two, no overflow as dd <= r).
//
// Lanes the loop must not see (they get r = 0, d = 1): NaN in either, |a| = inf, b = 0 (all
// NaN out), and |a| < |b| (a out unchanged, also b = inf). The sign of a goes on last, so a
// negative a whose remainder is 0 gives -0 like fmod.
//
// The output register may be an input's (its last use): inputs are read into scratch
// first and read again only before the output is written. Clobbers k3..k6 (AVX-512) and
// eax (the pass counter).
#include <cfloat>
#include <limits>

#include "cpu/emitters/x64/kernel_emitter.hpp"

namespace kiln::cpu::x64 {

using namespace Xbyak;

namespace {

constexpr int kGap = 22;                          // quotients stay below 2^(kGap + 1)
// A pass with k > 0 lowers e(r) - e(d) (at most 127 + 149) by kGap at least, so 12 passes
// always suffice; the cap only keeps a wrong kernel from spinning forever.
constexpr int kMaxWidePasses = 16;
constexpr uint32_t kQuietNan = 0x7fc00000u;
constexpr int kDenormalBias = 149;                // a denormal is m * 2^-149
constexpr uint8_t kNltUq = 0x15, kNgtUq = 0x1A;   // !(a < b), !(a > b); true for NaN
const float kInf = std::numeric_limits<float>::infinity();

// The scratch roles: r and d (the operands, then r the remainder), ed (d's exponent + kGap:
// a float on AVX-512, a biased integer on AVX2), k, dd, q.
struct ModRegs {
  Xmm r, d, ed, k, dd, q;
};

// r = |a|, d = |b| on the lanes to reduce; 0 and 1 elsewhere. AVX-512 leaves k3 = valid
// lanes (result not NaN) and k5 = lanes whose result is a itself.
void load_operands(KernelEmitter& h, const Xmm& a, const Xmm& b, const ModRegs& s) {
  h.vand(s.r, a, h.cst_bits(kAbsMask));
  h.vand(s.d, b, h.cst_bits(kAbsMask));
  if (h.avx512()) {
    h.vcmpps(h.k3, s.r, h.cst(kInf), kLtOq);
    h.vcmpps(h.k3 | h.k3, s.d, h.cst(0.0f), kGtOq);
    h.vcmpps(h.k4 | h.k3, s.r, s.d, kGeOq);
    h.kandnw(h.k5, h.k4, h.k3);
    h.knotw(h.k6, h.k4);
    h.vmovaps(s.r | h.k4 | h.T_z, s.r);
    h.vmovups(s.d | h.k6, h.cst(1.0f));
    return;
  }
  const Xmm m = s.k, t = s.dd;
  h.vcmpps(m, s.r, h.cst(kInf), kLtOq);
  h.vcmpps(t, s.d, h.cst(0.0f), kGtOq);
  h.vandps(m, m, t);
  h.vcmpps(t, s.r, s.d, kGeOq);
  h.vandps(m, m, t);
  h.vandps(s.r, s.r, m);
  h.vandnps(t, m, h.cst(1.0f));
  h.vandps(s.d, s.d, m);
  h.vorps(s.d, s.d, t);
}

// ed = e(d) + kGap (AVX-512: float; AVX2: biased, as an integer), d > 0 finite.
void divisor_exponent(KernelEmitter& h, const ModRegs& s) {
  if (h.avx512()) {
    h.vgetexpps(s.ed, s.d);
    h.vaddps(s.ed, s.ed, h.cst(static_cast<float>(kGap)));
    return;
  }
  const Xmm t = s.k, m = s.dd;
  h.vpsrld(s.ed, s.d, 23);
  h.vcvtdq2ps(t, s.d);  // a denormal's bits are its integral m
  h.vpsrld(t, t, 23);
  h.vpsubd(t, t, h.cst_bits(kDenormalBias));
  h.vcmpps(m, s.d, h.cst(FLT_MIN), kLtOq);
  h.vblendvps(s.ed, s.ed, t, m);
  h.vpaddd(s.ed, s.ed, h.cst_bits(kGap));
}

// k = max(e(r) - e(d) - kGap, 0); jumps to `done` when it is 0 on every lane.
void exponent_gap(KernelEmitter& h, const ModRegs& s, const Label& done) {
  if (h.avx512()) {
    h.vgetexpps(s.k, s.r);  // r = 0: -inf, k = 0
    h.vsubps(s.k, s.k, s.ed);
    h.vmaxps(s.k, s.k, h.cst(0.0f));
    h.vcmpps(h.k6, s.k, h.cst(0.0f), kGtOq);
    h.kortestw(h.k6, h.k6);
  } else {
    h.vpsrld(s.k, s.r, 23);
    h.vpsubd(s.k, s.k, s.ed);
    h.vpmaxsd(s.k, s.k, h.cst_bits(0));
    h.vptest(s.k, s.k);
  }
  h.jz(done, h.T_NEAR);
}

// dd = d * 2^k (k clobbered on AVX2).
void scaled_divisor(KernelEmitter& h, const ModRegs& s) {
  if (h.avx512()) {
    h.vscalefps(s.dd, s.d, s.k);
    return;
  }
  h.vpminsd(s.dd, s.k, h.cst_bits(127));
  h.vpsubd(s.k, s.k, s.dd);
  for (const Xmm& part : {s.dd, s.k}) {  // 2^part as a float, both parts in [0, 127]
    h.vpaddd(part, part, h.cst_bits(127));
    h.vpslld(part, part, 23);
  }
  h.vmulps(s.dd, s.dd, s.d);
  h.vmulps(s.dd, s.dd, s.k);
}

// r = r mod dd, exactly (the header comment).
void reduce(KernelEmitter& h, const Xmm& r, const Xmm& dd, const Xmm& q) {
  h.vdivps(q, r, dd);
  h.vround(q, q, 0x03);
  h.vfnmadd231ps(r, q, dd);
  if (h.avx512()) {
    h.vcmpps(h.k6, r, h.cst(0.0f), kLtOq);
    h.vaddps(r | h.k6, r, dd);
    return;
  }
  h.vcmpps(q, r, h.cst(0.0f), kLtOq);
  h.vandps(q, q, dd);
  h.vaddps(r, r, q);
}

// r = the result: a's sign on r, a itself where |a| < |b|, NaN where invalid.
void finish(KernelEmitter& h, const Xmm& a, const Xmm& b, const ModRegs& s) {
  const Xmm t = s.d;
  h.vand(t, a, h.cst_bits(kSignBit));
  h.vor(s.r, s.r, t);
  if (h.avx512()) {
    h.vmovaps(s.r | h.k5, a);
    h.knotw(h.k6, h.k3);
    h.vmovups(s.r | h.k6, h.cst_bits(kQuietNan));
    return;
  }
  const Xmm ra = s.ed, rb = s.k, m = s.dd;
  h.vandps(ra, a, h.cst_bits(kAbsMask));
  h.vandps(rb, b, h.cst_bits(kAbsMask));
  h.vcmpps(m, ra, rb, kLtOq);
  h.vblendvps(s.r, s.r, a, m);
  h.vcmpps(ra, ra, h.cst(kInf), kNltUq);
  h.vcmpps(rb, rb, h.cst(0.0f), kNgtUq);
  h.vorps(m, ra, rb);
  h.vblendvps(s.r, s.r, h.cst_bits(kQuietNan), m);
}

void emit_mod(KernelEmitter& h, const Expression& e) {
  const Xmm a = h.vin(e, 0), b = h.vin(e, 1);
  const ModRegs s{h.tmp(0), h.tmp(1), h.tmp(2), h.tmp(3), h.tmp(4), h.tmp(5)};
  load_operands(h, a, b, s);
  divisor_exponent(h, s);
  Label wide, last;
  h.mov(h.eax, kMaxWidePasses);
  h.L(wide);  // lanes whose quotient is too wide for one step: 22 more bits per pass
  exponent_gap(h, s, last);
  scaled_divisor(h, s);
  reduce(h, s.r, s.dd, s.q);
  h.dec(h.eax);
  h.jnz(wide, h.T_NEAR);
  h.L(last);
  reduce(h, s.r, s.d, s.q);
  finish(h, a, b, s);
  h.vmovaps(h.vout(e), s.r);
}

}  // namespace

void register_mod_emitters(std::map<std::string, EmitFn>& m) { m["Mod"] = emit_mod; }

}  // namespace kiln::cpu::x64
