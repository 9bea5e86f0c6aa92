#include "cpu/emitters/x64/kernel_emitter.hpp"

#include <kiln/error.hpp>

#include <bit>

#include "core/strings.hpp"

namespace kiln::cpu::x64 {

using namespace Xbyak;
using snippets::lowered::LinearIR;
using snippets::lowered::LoopInfo;

KernelEmitter::KernelEmitter() : CodeGenerator(64 * 1024, Xbyak::AutoGrow) {}

Zmm KernelEmitter::vin(const Expression& e, size_t i) const {
  int r = e.get_input_port_descriptor(i).reg;
  KILN_CHECK(r >= 0 && r < kAllocatableVregs, cat("snippets x64: ", snippets::lowered::expr_name(e), " input ", i, " has no register"));
  return Zmm(r);
}

Zmm KernelEmitter::vout(const Expression& e) const {
  int r = e.get_output_port_descriptor(0).reg;
  KILN_CHECK(r >= 0 && r < kAllocatableVregs, cat("snippets x64: ", snippets::lowered::expr_name(e), " output has no register"));
  return Zmm(r);
}

void KernelEmitter::load_const_bits(const Zmm& z, uint32_t bits) {
  mov(eax, bits);
  vpbroadcastd(z, eax);
}

void KernelEmitter::load_const(const Zmm& z, float v) { load_const_bits(z, std::bit_cast<uint32_t>(v)); }

void KernelEmitter::set_tail_mask(int64_t count) {
  mov(eax, static_cast<uint32_t>((1u << count) - 1));
  kmovw(k1, eax);
}

const Reg64& KernelEmitter::port_ptr(const Expression& mem) const {
  if (mem.type() == "Store") return result_ptr(static_cast<size_t>(mem.op().attr("result")));
  return param_ptr(static_cast<size_t>(mem.op().attr("param")));
}

// Loops: the rows loop (work amount given per call in rsi) and static inner loops (counter
// rdi). A loop that runs once (the tail) has no counter and no jump; its pointer shifts
// are folded into the finalization offsets.
void KernelEmitter::emit_loop_begin(const Expression& e) {
  const size_t id = static_cast<size_t>(e.op().attr("loop"));
  const LoopInfo& l = lir_->loops().at(id);
  if (l.work_amount < 0) {
    L(loop_labels_[id]);
  } else if (l.work_amount != l.increment) {
    mov(rdi, l.work_amount);
    L(loop_labels_[id]);
  }
}

void KernelEmitter::emit_loop_end(const Expression& e) {
  const size_t id = static_cast<size_t>(e.op().attr("loop"));
  const LoopInfo& l = lir_->loops().at(id);
  const bool single = l.work_amount == l.increment;
  std::vector<std::pair<const Reg64*, int64_t>> fin;
  for (const auto* ports : {&l.entry_points, &l.exit_points})
    for (const auto& p : *ports) {
      if (!p.is_incremented) continue;
      const Reg64& r = port_ptr(*p.expr);
      const int64_t step = p.ptr_increment * l.increment * 4;
      if (single) {
        fin.emplace_back(&r, step + p.finalization_offset * 4);
      } else {
        if (step) add(r, static_cast<uint32_t>(step));
        fin.emplace_back(&r, p.finalization_offset * 4);
      }
    }
  if (!single) {
    if (l.work_amount < 0) {
      dec(rsi);
    } else {
      sub(rdi, l.increment);
    }
    jnz(loop_labels_[id], T_NEAR);
  }
  for (const auto& [r, off] : fin)
    if (off) add(*r, static_cast<int32_t>(off));
}

void KernelEmitter::generate(const LinearIR& lir, const std::map<std::string, EmitFn>& emitters) {
  lir_ = &lir;
  size_t n_params = 0, n_results = 0;
  for (const auto& e : lir.expressions()) {
    if (e->type() == "Parameter") ++n_params;
    if (e->type() == "Result") ++n_results;
  }
  const std::vector<Reg64> pool = {rbx, rbp, rcx, rdx, r8, r9, r10, r11, r12, r13, r14, r15};
  KILN_CHECK(n_params + n_results <= pool.size(),
             cat("snippets x64: ", n_params + n_results, " data pointers, at most ", pool.size(), " fit in registers"));
  num_params_ = n_params;
  data_regs_.assign(pool.begin(), pool.begin() + static_cast<std::ptrdiff_t>(n_params + n_results));

  // Prologue: callee-saved registers, data pointers from the argument array (rdi); rows in rsi.
  const std::vector<Reg64> saved = {rbx, rbp, r12, r13, r14, r15};
  for (const auto& r : saved) push(r);
  for (size_t i = 0; i < data_regs_.size(); ++i) mov(data_regs_[i], ptr[rdi + static_cast<int>(i * 8)]);

  for (const auto& e : lir.expressions()) {
    const std::string& t = e->type();
    if (t == "Parameter" || t == "Result") continue;
    if (t == "LoopBegin") {
      emit_loop_begin(*e);
      continue;
    }
    if (t == "LoopEnd") {
      emit_loop_end(*e);
      continue;
    }
    auto it = emitters.find(t);
    KILN_CHECK(it != emitters.end(), cat("snippets x64: no emitter for ", t));
    it->second(*this, *e);
  }

  vzeroupper();
  for (auto it = saved.rbegin(); it != saved.rend(); ++it) pop(*it);
  ret();
  ready();
}

}  // namespace kiln::cpu::x64
