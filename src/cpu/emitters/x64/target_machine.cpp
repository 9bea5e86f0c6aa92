#include <kiln/error.hpp>

#include <xbyak/xbyak_util.h>

#include "cpu/emitters/x64/kernel_emitter.hpp"
#include "snippets/target_machine.hpp"

namespace kiln::cpu::x64 {

namespace {

class X64Code : public snippets::CompiledCode {
 public:
  explicit X64Code(std::unique_ptr<KernelEmitter> k) : k_(std::move(k)) {}
  snippets::KernelFn fn() const override { return k_->getCode<snippets::KernelFn>(); }

 private:
  std::unique_ptr<KernelEmitter> k_;
};

class X64TargetMachine : public snippets::TargetMachine {
 public:
  X64TargetMachine() {
    register_memory_emitters(jitters_);
    register_arith_emitters(jitters_);
    register_activation_emitters(jitters_);
    register_transcendental_emitters(jitters_);
  }
  std::string name() const override { return "x64 avx512_core"; }
  void check_available() const override {
    static const bool ok = Xbyak::util::Cpu().has(Xbyak::util::Cpu::tAVX512F);
    KILN_CHECK(ok, "snippets: the x64 generator needs AVX-512 (avx512f), which this CPU does not have");
  }
  bool is_supported(const std::string& op_type) const override { return jitters_.count(op_type) != 0; }
  int num_vector_regs() const override { return kAllocatableVregs; }
  int max_data_pointers() const override { return 12; }
  std::unique_ptr<snippets::CompiledCode> generate(const snippets::lowered::LinearIR& lir) const override {
    auto k = std::make_unique<KernelEmitter>();
    k->generate(lir, jitters_);
    return std::make_unique<X64Code>(std::move(k));
  }

 private:
  std::map<std::string, EmitFn> jitters_;
};

}  // namespace

std::unique_ptr<snippets::TargetMachine> make_target_machine() { return std::make_unique<X64TargetMachine>(); }

}  // namespace kiln::cpu::x64
