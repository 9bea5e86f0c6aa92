#pragma once
// The x64 code generator of the snippets compiler. The CPU layer owns it and hands it to the
// generic compiler (snippets::CompileOptions::target), as OpenVINO's CPU plugin passes its
// generator into the snippets Subgraph (set_generator): the snippets library never names a
// CPU.
#include <memory>
#include <optional>

#include "snippets/target_machine.hpp"

namespace kiln::cpu::x64 {
// The widest snippets target the instruction set in use runs (the CPU's, capped by
// KILN_MAX_CPU_ISA: cpu/isa.hpp): AVX-512, else AVX2, else none (SSE4.1: the ops stay on
// their oneDNN / reference nodes).
std::optional<snippets::Isa> best_isa();
// The x64 target (src/cpu/emitters/x64/) for `isa`; Auto picks best_isa(). The machine's
// check_available() says whether the ISA in use runs it.
std::unique_ptr<snippets::TargetMachine> make_target_machine(snippets::Isa isa = snippets::Isa::Auto);
// The same, shared: one machine per ISA for the whole process (what snippets::CompileOptions
// takes).
std::shared_ptr<const snippets::TargetMachine> shared_target_machine(snippets::Isa isa = snippets::Isa::Auto);
}  // namespace kiln::cpu::x64
