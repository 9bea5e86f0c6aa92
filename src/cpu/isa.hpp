#pragma once
// The one instruction-set setting of kiln. Everything kiln picks or generates for the CPU
// follows the ISA in use: this CPU's own, capped by the environment variable
// KILN_MAX_CPU_ISA (or, when only it is set, oneDNN's ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA).
// The cap reaches oneDNN (dnnl::set_max_cpu_isa, before its first primitive), the snippets
// target (AVX-512, AVX2 or none), whether bf16 runs and whether it is the default, and so
// every fusion and layout choice that asks oneDNN for a kernel.
#include <string>

namespace kiln::cpu {

// The ladder of x86-64 instruction sets kiln distinguishes, each containing the ones below
// it (avx2_vnni, Alder Lake's VEX VNNI, sits between avx2 and avx512_core).
enum class Isa { below_sse41, sse41, avx, avx2, avx2_vnni, avx512_core, avx512_core_vnni, avx512_core_bf16, avx512_core_amx };

struct IsaInfo {
  Isa cpu = Isa::below_sse41;        // what this CPU has (cpuid)
  Isa effective = Isa::below_sse41;  // what kiln uses: `cpu` capped by the variable
  std::string variable;              // the variable that caps it ("KILN_MAX_CPU_ISA"), or empty
  std::string value;                 // its value as given
};

// Reads the variables and applies the cap to oneDNN, once per process. A bad value throws
// kiln::Error naming the variable and the accepted values (and so does every later call).
const IsaInfo& isa_info();

// The ISA in use, and whether it contains `isa`.
Isa effective_isa();
bool isa_at_least(Isa isa);

// "avx512_core_bf16": oneDNN's lower-case name.
std::string isa_name(Isa isa);
// The accepted values of KILN_MAX_CPU_ISA, comma-separated.
std::string accepted_isa_values();
// For people: "avx2 (capped by KILN_MAX_CPU_ISA=AVX2; this CPU: avx512_core_bf16)", or
// just "avx512_core_bf16" when nothing caps it.
std::string isa_description();

// bf16 in oneDNN 2.6: native with avx512_bf16 / AMX-BF16, emulated (slower than f32) on
// any other AVX-512 (avx512_core), and not at all below AVX-512.
bool bf16_native();
bool bf16_available();

}  // namespace kiln::cpu
