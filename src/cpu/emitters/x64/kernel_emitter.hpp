#pragma once
// x64 (AVX-512) code emission for a prepared Linear IR. KernelEmitter owns the Xbyak code
// buffer, maps the abstract data pointers to general-purpose registers, writes the
// prologue / epilogue and the loops, and calls the per-op emitters of the TargetMachine.
#include <xbyak/xbyak.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "snippets/lowered/linear_ir.hpp"

namespace kiln::cpu::x64 {

using snippets::lowered::Expression;
class KernelEmitter;
using EmitFn = std::function<void(KernelEmitter&, const Expression&)>;

// Vector registers zmm0..zmm25 are allocated to values; zmm26..zmm31 are emitter scratch.
inline constexpr int kAllocatableVregs = 26;
inline constexpr int kScratchVregs = 6;

class KernelEmitter : public Xbyak::CodeGenerator {
 public:
  KernelEmitter();
  void generate(const snippets::lowered::LinearIR& lir, const std::map<std::string, EmitFn>& emitters);

  // Helpers for emitters.
  Xbyak::Zmm vin(const Expression& e, size_t i) const;
  Xbyak::Zmm vout(const Expression& e) const;
  static Xbyak::Zmm tmp(int i) { return Xbyak::Zmm(kAllocatableVregs + i); }
  void load_const(const Xbyak::Zmm& z, float v);
  void load_const_bits(const Xbyak::Zmm& z, uint32_t bits);
  const Xbyak::Reg64& param_ptr(size_t i) const { return data_regs_.at(i); }
  const Xbyak::Reg64& result_ptr(size_t i) const { return data_regs_.at(num_params_ + i); }
  // Sets k1 to the low `count` lanes.
  void set_tail_mask(int64_t count);

 private:
  void emit_loop_begin(const Expression& e);
  void emit_loop_end(const Expression& e);
  const Xbyak::Reg64& port_ptr(const Expression& mem) const;
  const snippets::lowered::LinearIR* lir_ = nullptr;
  std::vector<Xbyak::Reg64> data_regs_;
  size_t num_params_ = 0;
  std::map<size_t, Xbyak::Label> loop_labels_;
};

// Emitter families (one file each).
void register_memory_emitters(std::map<std::string, EmitFn>& m);
void register_arith_emitters(std::map<std::string, EmitFn>& m);
void register_activation_emitters(std::map<std::string, EmitFn>& m);
void register_transcendental_emitters(std::map<std::string, EmitFn>& m);

}  // namespace kiln::cpu::x64
