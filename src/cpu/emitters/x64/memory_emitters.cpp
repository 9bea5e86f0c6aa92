// Load / Store (full vector or masked tail), BroadcastLoad, BroadcastMove, Scalar.
#include "cpu/emitters/x64/kernel_emitter.hpp"

namespace kiln::cpu::x64 {

using namespace Xbyak;

namespace {

int64_t count_of(const Expression& e) { return static_cast<int64_t>(e.op().attr("count", 16)); }

void emit_load(KernelEmitter& h, const Expression& e) {
  const Reg64& p = h.param_ptr(static_cast<size_t>(e.op().attr("param")));
  const Zmm d = h.vout(e);
  const auto& sub = e.get_input_port_descriptor(0).subtensor;
  const int64_t n = (!sub.empty() && sub.back() == 1) ? 1 : count_of(e);
  if (n >= 16) {
    h.vmovups(d, h.ptr[p]);
  } else if (n == 1) {
    h.vmovss(Xmm(d.getIdx()), h.dword[p]);
  } else {
    h.set_tail_mask(n);
    h.vmovups(d | h.k1 | h.T_z, h.ptr[p]);
  }
}

void emit_store(KernelEmitter& h, const Expression& e) {
  const Reg64& p = h.result_ptr(static_cast<size_t>(e.op().attr("result")));
  const Zmm s = h.vin(e, 0);
  const int64_t n = count_of(e);
  if (n >= 16) {
    h.vmovups(h.ptr[p], s);
  } else {
    h.set_tail_mask(n);
    h.vmovups(h.ptr[p] | h.k1, s);
  }
}

void emit_broadcast_load(KernelEmitter& h, const Expression& e) {
  h.vbroadcastss(h.vout(e), h.dword[h.param_ptr(static_cast<size_t>(e.op().attr("param")))]);
}

void emit_broadcast_move(KernelEmitter& h, const Expression& e) {
  h.vbroadcastss(h.vout(e), Xmm(h.vin(e, 0).getIdx()));
}

void emit_scalar(KernelEmitter& h, const Expression& e) { h.load_const(h.vout(e), static_cast<float>(e.op().attr("value"))); }

}  // namespace

void register_memory_emitters(std::map<std::string, EmitFn>& m) {
  m["Load"] = emit_load;
  m["Store"] = emit_store;
  m["BroadcastLoad"] = emit_broadcast_load;
  m["BroadcastMove"] = emit_broadcast_move;
  m["Scalar"] = emit_scalar;
}

}  // namespace kiln::cpu::x64
