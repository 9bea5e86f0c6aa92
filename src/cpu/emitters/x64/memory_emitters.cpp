// Load / Store (full vector or masked tail; of a Parameter, Result or Buffer), BroadcastLoad, BroadcastMove, Scalar, and the
// register spills' stores / loads.
#include "cpu/emitters/x64/kernel_emitter.hpp"

namespace kiln::cpu::x64 {

using namespace Xbyak;

namespace {

// Bytes past the data pointer (UnrollLoops' copies access later vectors).
// (plus a Buffer's region in the scratch: its Loads / Stores share the scratch pointer).
int offset_of(const Expression& e) {
  return static_cast<int>(e.op().attr("offset", 0) + e.op().attr("buffer_offset", 0)) * element_bytes(e);
}

void emit_load(KernelEmitter& h, const Expression& e) {
  const Reg64& p = h.port_ptr(e);
  const Xmm d = h.vout(e);
  const auto& sub = e.get_input_port_descriptor(0).subtensor;
  if (!sub.empty() && sub.back() == 1) {
    h.vmovss(Xmm(d.getIdx()), h.dword[p + offset_of(e)]);
    return;
  }
  h.load_lanes(d, h.ptr[p + offset_of(e)], count_of(h, e), h.tmp(0));
}

// bf16: vcvtneps2bf16 rounds to nearest even (NaN stays NaN) into 16 words, stored whole or,
// in a tail, under a word mask.
void emit_store_bf16(KernelEmitter& h, const Expression& e) {
  const Reg64& p = h.port_ptr(e);
  const Ymm w(h.tmp(0).getIdx());
  h.vcvtneps2bf16(w, Zmm(h.vin(e, 0).getIdx()));
  const int64_t count = count_of(h, e);
  if (count >= h.vlen()) {
    h.vmovdqu16(h.ptr[p + offset_of(e)], w);  // EVEX: the scratch register is above ymm15
    return;
  }
  h.tail_mask(count, h.tmp(1));
  h.vmovdqu16(h.ptr[p + offset_of(e)] | h.k1, w);
}

void emit_store(KernelEmitter& h, const Expression& e) {
  if (e.op().attr("bf16", 0) != 0) return emit_store_bf16(h, e);
  const Reg64& p = h.port_ptr(e);
  h.store_lanes(h.ptr[p + offset_of(e)], h.vin(e, 0), count_of(h, e), h.tmp(0));
}

void emit_broadcast_load(KernelEmitter& h, const Expression& e) {
  h.vbroadcastss(h.vout(e), h.dword[h.param_ptr(static_cast<size_t>(e.op().attr("param"))) + offset_of(e)]);
}

void emit_broadcast_move(KernelEmitter& h, const Expression& e) {
  h.vbroadcastss(h.vout(e), Xmm(h.vin(e, 0).getIdx()));
}

// InsertRegSpills' stack slots, one vector each, at rsp (reserved by the prologue).
int slot_offset(const KernelEmitter& h, const Expression& e) { return static_cast<int>(e.op().attr("slot")) * h.vlen() * 4; }
void emit_spill(KernelEmitter& h, const Expression& e) { h.vmovups(h.ptr[h.rsp + slot_offset(h, e)], h.vin(e, 0)); }
void emit_reload(KernelEmitter& h, const Expression& e) { h.vmovups(h.vout(e), h.ptr[h.rsp + slot_offset(h, e)]); }

void emit_scalar(KernelEmitter& h, const Expression& e) { h.load_const(h.vout(e), static_cast<float>(e.op().attr("value"))); }

}  // namespace

void register_memory_emitters(std::map<std::string, EmitFn>& m) {
  m["Load"] = emit_load;
  m["Store"] = emit_store;
  m["BroadcastLoad"] = emit_broadcast_load;
  m["BroadcastMove"] = emit_broadcast_move;
  m["Scalar"] = emit_scalar;
  m["RegSpillBegin"] = emit_spill;
  m["RegSpillEnd"] = emit_reload;
}

}  // namespace kiln::cpu::x64
