#include "cpu/emitters/x64/kernel_emitter.hpp"

#include <kiln/error.hpp>

#include <algorithm>
#include <bit>

#include "core/strings.hpp"

namespace kiln::cpu::x64 {

using namespace Xbyak;
using snippets::Isa;
using snippets::lowered::LinearIR;
using snippets::lowered::LoopInfo;

int allocatable_vregs(Isa isa) { return (isa == Isa::Avx512 ? 32 : 16) - kScratchVregs; }

KernelEmitter::KernelEmitter(Isa isa) : CodeGenerator(64 * 1024, Xbyak::AutoGrow), isa_(isa) {
  KILN_CHECK(isa == Isa::Avx512 || isa == Isa::Avx2, "snippets x64: the kernel emitter needs a concrete ISA");
}

Xmm KernelEmitter::vreg(int idx) const {
  if (avx512()) return Zmm(idx);
  return Ymm(idx);
}

Xmm KernelEmitter::vin(const Expression& e, size_t i) const {
  int r = e.get_input_port_descriptor(i).reg;
  KILN_CHECK(r >= 0 && r < allocatable_vregs(isa_),
             cat("snippets x64: ", snippets::lowered::expr_name(e), " input ", i, " has no register"));
  return vreg(r);
}

Xmm KernelEmitter::vout(const Expression& e) const {
  int r = e.get_output_port_descriptor(0).reg;
  KILN_CHECK(r >= 0 && r < allocatable_vregs(isa_), cat("snippets x64: ", snippets::lowered::expr_name(e), " output has no register"));
  return vreg(r);
}

Xmm KernelEmitter::tmp(int i) const {
  KILN_CHECK(i >= 0 && i < kScratchVregs, cat("snippets x64: scratch register ", i, " does not exist"));
  return vreg(allocatable_vregs(isa_) + i);
}

Cst KernelEmitter::vec_cst(const std::vector<uint32_t>& lanes) {
  ++uses_[lanes];
  auto p = pinned_.find(lanes);
  if (p != pinned_.end()) return Cst(vreg(p->second));
  return Cst(table_entry(lanes));
}

Address KernelEmitter::table_entry(const std::vector<uint32_t>& lanes) {
  auto it = table_index_.find(lanes);
  size_t off;
  if (it != table_index_.end()) {
    off = it->second;
  } else {
    off = table_entries_.size() * static_cast<size_t>(vlen()) * 4;
    table_entries_.push_back(lanes);
    table_index_[lanes] = off;
  }
  return ptr[rip + table_ + static_cast<int>(off)];
}

Cst KernelEmitter::cst_bits(uint32_t bits) { return vec_cst(std::vector<uint32_t>(static_cast<size_t>(vlen()), bits)); }

Cst KernelEmitter::cst(float v) { return cst_bits(std::bit_cast<uint32_t>(v)); }

void KernelEmitter::vand(const Xmm& d, const Xmm& a, const Operand& b) {
  if (avx512()) vpandd(d, a, b);
  else vandps(d, a, b);
}
void KernelEmitter::vor(const Xmm& d, const Xmm& a, const Operand& b) {
  if (avx512()) vpord(d, a, b);
  else vorps(d, a, b);
}
void KernelEmitter::vxor(const Xmm& d, const Xmm& a, const Operand& b) {
  if (avx512()) vpxord(d, a, b);
  else vxorps(d, a, b);
}

void KernelEmitter::vround(const Xmm& d, const Xmm& s, uint8_t mode) {
  if (avx512()) vrndscaleps(d, s, mode | 0x08);  // 0x08: no precision exception
  else vroundps(d, s, mode | 0x08);
}

void KernelEmitter::blend_if(const Xmm& d, const Xmm& a, const Operand& b, uint8_t pred, const Operand& src, const Xmm& mask) {
  if (avx512()) {
    vcmpps(k2, a, b, pred);
    vmovups(d | k2, src);
  } else {
    vcmpps(mask, a, b, pred);
    vblendvps(d, d, src, mask);
  }
}

void KernelEmitter::cmp_to_float(const Xmm& d, const Xmm& a, const Operand& b, uint8_t pred, const Xmm& mask) {
  if (avx512()) {
    vcmpps(k2, a, b, pred);
    vmovups(d | k2 | T_z, cst(1.0f));
  } else {
    vcmpps(mask, a, b, pred);
    vandps(d, mask, cst(1.0f));
  }
}

void KernelEmitter::reciprocal(const Xmm& d, const Xmm& x, const Xmm& t) {
  if (avx512()) vrcp14ps(d, x);
  else vrcpps(d, x);
  // d' = d + d (1 - x d)
  vmovups(t, cst(1.0f));
  vfnmadd231ps(t, x, d);
  vfmadd231ps(d, d, t);
}

void KernelEmitter::scale_pow2(const Xmm& d, const Xmm& x, const Xmm& n, const Xmm& t) {
  if (avx512()) {
    vscalefps(d, x, n);
    return;
  }
  vcvtps2dq(t, n);
  vpaddd(t, t, cst_bits(127));
  vpslld(t, t, 23);
  vmulps(d, x, t);
}

// The low `count` lanes: k1 on AVX-512, a lane mask vector in `scratch` on AVX2.
void KernelEmitter::tail_mask(int64_t count, const Xmm& scratch) {
  if (avx512()) {
    mov(eax, static_cast<uint32_t>((1u << count) - 1));
    kmovw(k1, eax);
    return;
  }
  std::vector<uint32_t> lanes(8, 0);
  for (int64_t i = 0; i < count; ++i) lanes[static_cast<size_t>(i)] = 0xffffffffu;
  vmovups(scratch, vec_cst(lanes));
}

void KernelEmitter::load_lanes(const Xmm& d, const Address& a, int64_t count, const Xmm& scratch) {
  if (count >= vlen()) return vmovups(d, a);
  tail_mask(count, scratch);
  if (avx512()) vmovups(d | k1 | T_z, a);
  else vmaskmovps(d, scratch, a);
}

void KernelEmitter::store_lanes(const Address& a, const Xmm& s, int64_t count, const Xmm& scratch) {
  if (count >= vlen()) return vmovups(a, s);
  tail_mask(count, scratch);
  if (avx512()) vmovups(a | k1, s);
  else vmaskmovps(a, scratch, s);
}

void KernelEmitter::move_lanes(const Xmm& acc, const Xmm& src, int64_t count, const Xmm& scratch) {
  if (count >= vlen()) return vmovaps(acc, src);
  tail_mask(count, scratch);
  if (avx512()) vmovaps(acc | k1, src);
  else vblendvps(acc, acc, src, scratch);
}

const Reg64& KernelEmitter::port_ptr(const Expression& mem) const {
  if (mem.op().has("buffer")) {
    KILN_CHECK(mem.op().has("ptr"), cat("snippets x64: ", snippets::lowered::expr_name(mem), " reads a Buffer without a data pointer (run AllocateBuffers)"));
    return buffer_ptr(static_cast<size_t>(mem.op().attr("ptr")));
  }
  if (mem.kind() == snippets::OpKind::Store) return result_ptr(static_cast<size_t>(mem.op().attr("result")));
  return param_ptr(static_cast<size_t>(mem.op().attr("param")));
}

// Loops: the rows loop (work amount given per call in rsi) and static inner loops (counter
// rdi). A loop that runs once (evaluate_once, e.g. the tail) has no counter and no jump.
// A loop's step of a pointer is ptr_increment x increment elements.
void KernelEmitter::emit_loop_begin(const Expression& e) {
  const size_t id = static_cast<size_t>(e.op().attr("loop"));
  const LoopInfo& l = lir_->loops().at(id);
  if (debug_) debug_store(&debug_->iterations.at(id), -1, false);
  if (l.work_amount < 0) {
    L(loop_labels_[id]);
  } else if (!l.evaluate_once) {
    mov(rdi, l.work_amount);
    L(loop_labels_[id]);
  }
  if (debug_) debug_store(&debug_->iterations.at(id), 0, true);
}

// mov rax, &where; then mov [rax], value (int32 for the expression index, int64 for a loop
// count) or inc qword [rax]. rax is emitter scratch, reloaded by every user.
void KernelEmitter::debug_store(volatile void* where, int64_t value, bool increment) {
  mov(rax, reinterpret_cast<uint64_t>(where));
  if (increment) {
    inc(qword[rax]);
  } else if (where == &debug_->expr) {
    mov(dword[rax], static_cast<uint32_t>(value));
  } else {
    mov(qword[rax], static_cast<int32_t>(value));
  }
}

void KernelEmitter::emit_loop_end(const Expression& e) {
  const size_t id = static_cast<size_t>(e.op().attr("loop"));
  const LoopInfo& l = lir_->loops().at(id);
  const bool once = l.evaluate_once;
  std::vector<std::pair<const Reg64*, int64_t>> fin;
  for (const auto* ports : {&l.entry_points, &l.exit_points})
    for (const auto& p : *ports) {
      if (!p.is_incremented) continue;
      const Reg64& r = port_ptr(*p.expr);
      const int64_t bytes = element_bytes(*p.expr);
      const int64_t step = p.ptr_increment * l.increment * bytes;
      if (step) add(r, static_cast<uint32_t>(step));
      fin.emplace_back(&r, p.finalization_offset * bytes);
    }
  if (!once) {
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

void KernelEmitter::emit_constant_table() {
  align(64);
  L(table_);
  for (const auto& lanes : table_entries_)
    for (uint32_t v : lanes) dd(v);
}

void KernelEmitter::generate(const LinearIR& lir, const std::map<std::string, EmitFn>& emitters, snippets::DebugState* debug) {
  lir_ = &lir;
  debug_ = debug;
  if (debug_) {
    debug_->iterations.assign(lir.loops().size(), -1);
    debug_->expr_names.clear();
    debug_->loop_names.clear();
    for (size_t i = 0; i < lir.loops().size(); ++i) {
      const LoopInfo& l = lir.loops()[i];
      debug_->loop_names.push_back(cat("loop ", i, " (", l.dim_idx == 0 ? "inner" : "rows", l.is_tail ? ", tail" : "",
                                       ", ", l.increment, " per iteration)"));
    }
  }
  KILN_CHECK(lir.vector_length() == vlen(), cat("snippets x64: the Linear IR was prepared for ", lir.vector_length(),
                                                " lanes, the ", avx512() ? "AVX-512" : "AVX2", " target has ", vlen()));
  size_t n_params = 0, n_results = 0;
  for (const auto& e : lir.expressions()) {
    if (e->kind() == snippets::OpKind::Parameter) ++n_params;
    if (e->kind() == snippets::OpKind::Result) ++n_results;
  }
  const std::vector<Reg64> pool = {rbx, rbp, rcx, rdx, r8, r9, r10, r11, r12, r13, r14, r15};
  const size_t n_ptrs = n_params + n_results + lir.buffer_offsets().size();
  KILN_CHECK(n_ptrs <= pool.size(), cat("snippets x64: ", n_ptrs, " data pointers, at most ", pool.size(), " fit in registers"));
  num_params_ = n_params;
  num_results_ = n_results;
  data_regs_.assign(pool.begin(), pool.begin() + static_cast<std::ptrdiff_t>(n_ptrs));

  // Prologue: callee-saved registers, data pointers from the argument array (rdi: inputs,
  // outputs, then buffers); rows in rsi.
  const std::vector<Reg64> saved = {rbx, rbp, r12, r13, r14, r15};
  for (const auto& r : saved) push(r);
  int slots = 0;  // InsertRegSpills' stack slots
  for (const auto& e : lir.expressions())
    if (e->kind() == snippets::OpKind::RegSpillBegin) slots = std::max(slots, static_cast<int>(e->op().attr("slot")) + 1);
  const int frame = slots * vlen() * 4;
  if (frame) sub(rsp, frame);
  for (size_t i = 0; i < data_regs_.size(); ++i) mov(data_regs_[i], ptr[rdi + static_cast<int>(i * 8)]);
  // Constants into the registers the values leave free (above the highest one assigned).
  int highest = -1;
  for (const auto& e : lir.expressions()) {
    for (size_t i = 0; i < e->num_inputs(); ++i) highest = std::max(highest, e->get_input_port_descriptor(i).reg);
    for (size_t i = 0; i < e->num_outputs(); ++i) highest = std::max(highest, e->get_output_port_descriptor(i).reg);
  }
  pinned_.clear();
  for (const auto& lanes : pin_wanted_) {
    const int r = highest + 1 + static_cast<int>(pinned_.size());
    if (r >= allocatable_vregs(isa_)) break;
    vmovups(vreg(r), table_entry(lanes));
    pinned_[lanes] = r;
  }

  for (const auto& e : lir.expressions()) {
    const snippets::OpKind t = e->kind();
    if (t == snippets::OpKind::Parameter || t == snippets::OpKind::Result) continue;
    if (t == snippets::OpKind::LoopBegin) {
      emit_loop_begin(*e);
      continue;
    }
    if (t == snippets::OpKind::LoopEnd) {
      emit_loop_end(*e);
      continue;
    }
    auto it = emitters.find(e->type());
    KILN_CHECK(it != emitters.end(), cat("snippets x64: no emitter for ", e->type()));
    if (debug_) {
      std::string n = snippets::lowered::expr_name(*e);
      for (const auto& [k, v] : e->op().attrs) n += cat(" ", k, "=", v);
      debug_store(&debug_->expr, static_cast<int64_t>(debug_->expr_names.size()), false);
      debug_->expr_names.push_back(n);
    }
    it->second(*this, *e);
  }

  if (debug_) debug_store(&debug_->expr, -1, false);
  if (frame) add(rsp, frame);
  vzeroupper();
  for (auto it = saved.rbegin(); it != saved.rend(); ++it) pop(*it);
  ret();
  emit_constant_table();
  ready();
}

}  // namespace kiln::cpu::x64
