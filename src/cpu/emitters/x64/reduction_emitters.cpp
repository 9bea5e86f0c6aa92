// Reductions along the inner dim (what DecomposeReductions makes of Softmax / LogSoftmax):
// VectorFill starts an accumulator, AccumulateMax / AccumulateSum update it in place once
// per vector (in a tail only the valid lanes, the masked Load's zeros must not count), and
// HorizonMax / HorizonSum fold its lanes into one value, in every lane.
#include "cpu/emitters/x64/kernel_emitter.hpp"

namespace kiln::cpu::x64 {

using namespace Xbyak;

namespace {

void emit_fill(KernelEmitter& h, const Expression& e) { h.load_const(h.vout(e), static_cast<float>(e.op().attr("value"))); }

// The accumulator is input 0 and the output (one register, InitLiveRanges).
template <bool IsMax>
void emit_accumulate(KernelEmitter& h, const Expression& e) {
  const Xmm acc = h.vin(e, 0), x = h.vin(e, 1);
  const int64_t count = count_of(h, e);
  const Xmm t = count >= h.vlen() ? acc : h.tmp(0);
  if (IsMax) h.vmaxps(t, acc, x);
  else h.vaddps(t, acc, x);
  if (count < h.vlen()) h.move_lanes(acc, t, count, h.tmp(1));
}

// Pairwise across halves, then quarters, then within each 128-bit lane: log2(lanes) steps,
// every lane ends with the total.
template <bool IsMax>
void emit_horizon(KernelEmitter& h, const Expression& e) {
  const Xmm d = h.tmp(0), t = h.tmp(1);
  auto op = [&](const Xmm& a, const Xmm& b) {
    if (IsMax) h.vmaxps(a, a, b);
    else h.vaddps(a, a, b);
  };
  h.vmovaps(d, h.vin(e, 0));
  if (h.avx512()) {
    h.vshuff32x4(Zmm(t.getIdx()), Zmm(d.getIdx()), Zmm(d.getIdx()), 0x4E);  // 256-bit halves swapped
    op(d, t);
    h.vshuff32x4(Zmm(t.getIdx()), Zmm(d.getIdx()), Zmm(d.getIdx()), 0xB1);  // 128-bit lanes swapped in pairs
    op(d, t);
  } else {
    h.vperm2f128(Ymm(t.getIdx()), Ymm(d.getIdx()), Ymm(d.getIdx()), 0x01);
    op(d, t);
  }
  h.vshufps(t, d, d, 0x4E);  // 64-bit halves of each 128-bit lane
  op(d, t);
  h.vshufps(t, d, d, 0xB1);  // neighbours
  op(d, t);
  h.vmovaps(h.vout(e), d);
}

}  // namespace

void register_reduction_emitters(std::map<std::string, EmitFn>& m) {
  m["VectorFill"] = emit_fill;
  m["AccumulateMax"] = emit_accumulate<true>;
  m["AccumulateSum"] = emit_accumulate<false>;
  m["HorizonMax"] = emit_horizon<true>;
  m["HorizonSum"] = emit_horizon<false>;
  m["Buffer"] = [](KernelEmitter&, const Expression&) {};  // memory only: its Loads / Stores emit
}

}  // namespace kiln::cpu::x64
