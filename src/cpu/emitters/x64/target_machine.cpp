#include <kiln/error.hpp>

#include <xbyak/xbyak_util.h>

#include <algorithm>

#include "core/strings.hpp"
#include "cpu/emitters/x64/kernel_emitter.hpp"
#include "cpu/isa.hpp"
#include "cpu/emitters/x64/target_machine.hpp"

namespace kiln::cpu::x64 {

using snippets::Isa;

namespace {

// Does the ISA in use (the CPU's, capped by KILN_MAX_CPU_ISA) run this target? AVX-512
// kernels use avx512f/bw/dq/vl (oneDNN's avx512_core), AVX2 kernels also FMA.
bool isa_runs(Isa isa) {
  if (isa == Isa::Avx512) return isa_at_least(cpu::Isa::avx512_core);
  static const bool fma = Xbyak::util::Cpu().has(Xbyak::util::Cpu::tFMA);
  return isa_at_least(cpu::Isa::avx2) && fma;
}

class X64Code : public snippets::CompiledCode {
 public:
  explicit X64Code(std::unique_ptr<KernelEmitter> k) : k_(std::move(k)) {}
  snippets::KernelFn fn() const override { return k_->getCode<snippets::KernelFn>(); }
  const uint8_t* code() const override { return k_->getCode(); }
  size_t size() const override { return k_->getSize(); }

 private:
  std::unique_ptr<KernelEmitter> k_;
};

class X64TargetMachine : public snippets::TargetMachine {
 public:
  explicit X64TargetMachine(Isa isa) : isa_(isa) {
    register_memory_emitters(jitters_);
    register_arith_emitters(jitters_);
    register_activation_emitters(jitters_);
    register_transcendental_emitters(jitters_);
    register_composite_emitters(jitters_);
    register_logic_emitters(jitters_);
    register_mod_emitters(jitters_);
    register_reduction_emitters(jitters_);
  }
  std::string name() const override { return isa_ == Isa::Avx512 ? "x64 avx512" : "x64 avx2"; }
  Isa isa() const override { return isa_; }
  int64_t vector_length() const override { return isa_ == Isa::Avx512 ? 16 : 8; }
  void check_available() const override {
    KILN_CHECK(isa_runs(isa_), cat("snippets: the ", name(), " generator needs ",
                                   isa_ == Isa::Avx512 ? "AVX-512 (avx512_core)" : "AVX2 and FMA",
                                   ", which the instruction set in use does not have: ", isa_description()));
  }
  bool is_supported(const std::string& op_type) const override { return jitters_.count(op_type) != 0; }
  int num_vector_regs() const override { return allocatable_vregs(isa_); }
  int max_data_pointers() const override { return 12; }
  bool supports_bf16_outputs() const override { return isa_ == Isa::Avx512 && bf16_native(); }
  std::unique_ptr<snippets::CompiledCode> generate(const snippets::lowered::LinearIR& lir,
                                                   snippets::DebugState* debug) const override {
    // A first emission counts how often each constant is used; the real one keeps the most
    // used in the registers the values leave free.
    std::vector<std::vector<uint32_t>> by_use;
    {
      KernelEmitter probe(isa_);
      snippets::DebugState scratch;
      probe.generate(lir, jitters_, debug ? &scratch : nullptr);
      std::vector<std::pair<size_t, std::vector<uint32_t>>> uses;
      for (const auto& [lanes, n] : probe.constant_uses()) uses.emplace_back(n, lanes);
      std::stable_sort(uses.begin(), uses.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
      for (auto& u : uses) by_use.push_back(std::move(u.second));
    }
    auto k = std::make_unique<KernelEmitter>(isa_);
    k->pin_constants(std::move(by_use));
    k->generate(lir, jitters_, debug);
    return std::make_unique<X64Code>(std::move(k));
  }

 private:
  Isa isa_;
  std::map<std::string, EmitFn> jitters_;
};

}  // namespace

std::optional<Isa> best_isa() {
  if (isa_runs(Isa::Avx512)) return Isa::Avx512;
  if (isa_runs(Isa::Avx2)) return Isa::Avx2;
  return std::nullopt;
}

std::unique_ptr<snippets::TargetMachine> make_target_machine(Isa isa) {
  // Auto without a target (an SSE4.1 CPU, or capped there): the AVX2 machine, whose
  // check_available() says why it cannot run
  if (isa == Isa::Auto) isa = best_isa().value_or(Isa::Avx2);
  return std::make_unique<X64TargetMachine>(isa);
}

std::shared_ptr<const snippets::TargetMachine> shared_target_machine(Isa isa) {
  if (isa == Isa::Auto) isa = best_isa().value_or(Isa::Avx2);
  // one machine per ISA for the process: generate() is const and keeps no state
  static const std::shared_ptr<const snippets::TargetMachine> avx512 = make_target_machine(Isa::Avx512);
  static const std::shared_ptr<const snippets::TargetMachine> avx2 = make_target_machine(Isa::Avx2);
  return isa == Isa::Avx512 ? avx512 : avx2;
}

}  // namespace kiln::cpu::x64
