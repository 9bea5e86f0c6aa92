#pragma once
// x64 code emission for a prepared Linear IR, for AVX-512 (zmm, 16 lanes) or AVX2 (ymm, 8
// lanes). KernelEmitter owns the Xbyak code buffer, maps the abstract data pointers to
// general-purpose registers, writes the prologue / epilogue and the loops, and calls the
// per-op emitters of the TargetMachine. The helpers below hide the ISA differences, so an
// emitter is written once for both: vector registers are Xbyak::Xmm objects carrying the
// zmm / ymm kind, constants live in a table after the code (one full vector per constant,
// read as a memory operand), and compare + select goes through blend_if().
#include <xbyak/xbyak.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "snippets/lowered/linear_ir.hpp"
#include "snippets/target_machine.hpp"

namespace kiln::cpu::x64 {

using snippets::lowered::Expression;
class KernelEmitter;
using EmitFn = std::function<void(KernelEmitter&, const Expression&)>;

// Six vector registers at the top are emitter scratch (tmp(0..5)); the rest are allocated
// to values: zmm0..25 on AVX-512, ymm0..9 on AVX2.
inline constexpr int kScratchVregs = 6;
inline constexpr uint32_t kSignBit = 0x80000000u, kAbsMask = 0x7fffffffu;
// vcmpps predicates (ordered: false when either is NaN, except kNeqUq)
inline constexpr uint8_t kEqOq = 0x00, kLtOq = 0x11, kLeOq = 0x12, kUnordQ = 0x03, kNeqUq = 0x04, kNeqOq = 0x0C,
                         kGeOq = 0x1D, kGtOq = 0x1E;
int allocatable_vregs(snippets::Isa isa);
// Bytes per element of the memory a Load / Store accesses: 2 for a bf16 Store, else 4.
inline int element_bytes(const Expression& mem) { return mem.op().attr("bf16", 0) != 0 ? 2 : 4; }

// A constant operand: a register the prologue loaded it into (the most used constants,
// while registers are free), else its full vector in the constant table.
class Cst {
 public:
  explicit Cst(const Xbyak::Address& a) : mem_(a) {}
  explicit Cst(const Xbyak::Xmm& r) : reg_(r) {}
  operator const Xbyak::Operand&() const {  // NOLINT: used wherever an operand is
    if (mem_) return *mem_;
    return reg_;
  }

 private:
  std::optional<Xbyak::Address> mem_;
  Xbyak::Xmm reg_;
};

class KernelEmitter : public Xbyak::CodeGenerator {
 public:
  explicit KernelEmitter(snippets::Isa isa);  // Avx512 or Avx2
  // Constants to keep in registers (the vectors' lanes, in order of preference): the prologue
  // loads as many as there are registers the values leave free.
  void pin_constants(std::vector<std::vector<uint32_t>> most_used) { pin_wanted_ = std::move(most_used); }
  // After generate(): how often each constant vector was used (to choose what to pin).
  const std::map<std::vector<uint32_t>, size_t>& constant_uses() const { return uses_; }
  // `debug` (may be null): segfault-detector stores of the current expression and loop counts.
  void generate(const snippets::lowered::LinearIR& lir, const std::map<std::string, EmitFn>& emitters,
                snippets::DebugState* debug = nullptr);

  bool avx512() const { return isa_ == snippets::Isa::Avx512; }
  int vlen() const { return avx512() ? 16 : 8; }
  Xbyak::Xmm vreg(int idx) const;  // zmm<idx> or ymm<idx>
  Xbyak::Xmm vin(const Expression& e, size_t i) const;
  Xbyak::Xmm vout(const Expression& e) const;
  Xbyak::Xmm tmp(int i) const;

  // A full vector of `v` (every lane) in the constant table, as a memory operand.
  Cst cst(float v);
  Cst cst_bits(uint32_t bits);
  void load_const(const Xbyak::Xmm& x, float v) { vmovups(x, cst(v)); }
  void load_const_bits(const Xbyak::Xmm& x, uint32_t bits) { vmovups(x, cst_bits(bits)); }

  // Bitwise ops (vpandd / vpand ...).
  void vand(const Xbyak::Xmm& d, const Xbyak::Xmm& a, const Xbyak::Operand& b);
  void vor(const Xbyak::Xmm& d, const Xbyak::Xmm& a, const Xbyak::Operand& b);
  void vxor(const Xbyak::Xmm& d, const Xbyak::Xmm& a, const Xbyak::Operand& b);
  // Round to integral (imm: 0 nearest, 1 floor, 2 ceil, 3 truncate).
  void vround(const Xbyak::Xmm& d, const Xbyak::Xmm& s, uint8_t mode);
  // d = (a <pred> b) ? src : d, per lane (pred: a vcmpps predicate). `mask` is a scratch
  // register AVX2 needs for the comparison (unused on AVX-512, which uses k2).
  void blend_if(const Xbyak::Xmm& d, const Xbyak::Xmm& a, const Xbyak::Operand& b, uint8_t pred,
                const Xbyak::Operand& src, const Xbyak::Xmm& mask);
  // d = (a <pred> b) ? 1.0f : 0.0f per lane (the snippets form of a bool); `mask` scratch.
  void cmp_to_float(const Xbyak::Xmm& d, const Xbyak::Xmm& a, const Xbyak::Operand& b, uint8_t pred, const Xbyak::Xmm& mask);
  // d = 1 / x to about 1e-7 relative (vrcp14ps / vrcpps and one Newton step); d, x, t distinct.
  void reciprocal(const Xbyak::Xmm& d, const Xbyak::Xmm& x, const Xbyak::Xmm& t);
  // d = x * 2^n for integral n (a float vector): vscalefps on AVX-512 (any n); on AVX2 the
  // exponent is built by integer ops, valid for n in [-126, 127]. `t` scratch, distinct.
  void scale_pow2(const Xbyak::Xmm& d, const Xbyak::Xmm& x, const Xbyak::Xmm& n, const Xbyak::Xmm& t);
  // Vector load / store of the low `count` lanes (count < vlen: masked, other lanes read 0);
  // `scratch` holds the AVX2 lane mask.
  void load_lanes(const Xbyak::Xmm& d, const Xbyak::Address& a, int64_t count, const Xbyak::Xmm& scratch);
  void store_lanes(const Xbyak::Address& a, const Xbyak::Xmm& s, int64_t count, const Xbyak::Xmm& scratch);

  // The low `count` lanes: k1 on AVX-512 (also a word mask for 16-bit elements), a lane mask
  // vector in `scratch` on AVX2.
  void tail_mask(int64_t count, const Xbyak::Xmm& scratch);
  // acc = src in the low `count` lanes only (count < vlen: a tail), the other lanes kept;
  // `scratch` holds the AVX2 lane mask.
  void move_lanes(const Xbyak::Xmm& acc, const Xbyak::Xmm& src, int64_t count, const Xbyak::Xmm& scratch);

  const Xbyak::Reg64& param_ptr(size_t i) const { return data_regs_.at(i); }
  const Xbyak::Reg64& result_ptr(size_t i) const { return data_regs_.at(num_params_ + i); }
  const Xbyak::Reg64& buffer_ptr(size_t i) const { return data_regs_.at(num_params_ + num_results_ + i); }
  // The data pointer a Load / BroadcastLoad / Store moves: its Parameter's, Result's or Buffer's.
  const Xbyak::Reg64& port_ptr(const Expression& mem) const;

 private:
  Cst vec_cst(const std::vector<uint32_t>& lanes);
  Xbyak::Address table_entry(const std::vector<uint32_t>& lanes);
  void emit_loop_begin(const Expression& e);
  void emit_loop_end(const Expression& e);
  void emit_constant_table();
  void debug_store(volatile void* where, int64_t value, bool increment);
  snippets::Isa isa_;
  snippets::DebugState* debug_ = nullptr;
  const snippets::lowered::LinearIR* lir_ = nullptr;
  std::vector<Xbyak::Reg64> data_regs_;
  size_t num_params_ = 0, num_results_ = 0;
  std::map<size_t, Xbyak::Label> loop_labels_;
  Xbyak::Label table_;
  std::map<std::vector<uint32_t>, size_t> table_index_;  // lanes -> byte offset
  std::vector<std::vector<uint32_t>> table_entries_;
  std::map<std::vector<uint32_t>, size_t> uses_;
  std::vector<std::vector<uint32_t>> pin_wanted_;
  std::map<std::vector<uint32_t>, int> pinned_;  // lanes -> vector register
};

// dst = e^src (transcendental_emitters.cpp), for the emitters built on it; src and dst
// distinct from each other and from the scratch registers a, b, c. `nonpositive`: src is
// <= 0 or NaN (e.g. -|x|), so no overflow to handle.
void emit_exp_core(KernelEmitter& h, const Xbyak::Xmm& dst, const Xbyak::Xmm& src, const Xbyak::Xmm& a,
                   const Xbyak::Xmm& b, const Xbyak::Xmm& c, bool nonpositive = false);

// r = tanh(a), r = erf(a) for a >= 0 (an |x|), a kept; scratch t0, t1, t2, m.
void emit_abs_tanh_core(KernelEmitter& h, const Xbyak::Xmm& r, const Xbyak::Xmm& a, const Xbyak::Xmm& t0,
                        const Xbyak::Xmm& t1, const Xbyak::Xmm& t2, const Xbyak::Xmm& m);
void emit_abs_erf_core(KernelEmitter& h, const Xbyak::Xmm& r, const Xbyak::Xmm& a, const Xbyak::Xmm& t0,
                       const Xbyak::Xmm& t1, const Xbyak::Xmm& t2, const Xbyak::Xmm& m);

// Emitter families (one file each).
void register_memory_emitters(std::map<std::string, EmitFn>& m);
void register_arith_emitters(std::map<std::string, EmitFn>& m);
void register_activation_emitters(std::map<std::string, EmitFn>& m);
void register_transcendental_emitters(std::map<std::string, EmitFn>& m);
void register_composite_emitters(std::map<std::string, EmitFn>& m);
void register_logic_emitters(std::map<std::string, EmitFn>& m);
void register_mod_emitters(std::map<std::string, EmitFn>& m);
void register_reduction_emitters(std::map<std::string, EmitFn>& m);

// The lanes a Load / Store / reduction step covers: its "count" attribute, a whole vector by default.
inline int64_t count_of(const KernelEmitter& h, const Expression& e) {
  return static_cast<int64_t>(e.op().attr("count", h.vlen()));
}

}  // namespace kiln::cpu::x64
