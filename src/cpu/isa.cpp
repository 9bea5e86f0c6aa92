#include "cpu/isa.hpp"

#include <kiln/error.hpp>

#include <oneapi/dnnl/dnnl.hpp>
#include <xbyak/xbyak_util.h>

#include <cctype>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "core/strings.hpp"

namespace kiln::cpu {

namespace {

struct Level {
  Isa isa;
  const char* name;  // oneDNN's name, lower case; the variable takes it in any case
  dnnl::cpu_isa dnnl;
};

// The values KILN_MAX_CPU_ISA accepts, lowest first (oneDNN's names; "all": no cap).
const std::vector<Level>& levels() {
  using d = dnnl::cpu_isa;
  static const std::vector<Level> l = {
      {Isa::sse41, "sse41", d::sse41},
      {Isa::avx, "avx", d::avx},
      {Isa::avx2, "avx2", d::avx2},
      {Isa::avx2_vnni, "avx2_vnni", d::avx2_vnni},
      {Isa::avx512_core, "avx512_core", d::avx512_core},
      {Isa::avx512_core_vnni, "avx512_core_vnni", d::avx512_core_vnni},
      {Isa::avx512_core_bf16, "avx512_core_bf16", d::avx512_core_bf16},
      {Isa::avx512_core_amx, "avx512_core_amx", d::avx512_core_amx},
  };
  return l;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// This CPU's own ISA, from cpuid (Xbyak), with the features oneDNN requires for each level.
Isa cpu_own_isa() {
  using C = Xbyak::util::Cpu;
  const C cpu;
  const bool avx512_core = cpu.has(C::tAVX512F) && cpu.has(C::tAVX512BW) && cpu.has(C::tAVX512VL) && cpu.has(C::tAVX512DQ);
  if (avx512_core) {
    if (cpu.has(C::tAMX_TILE) && cpu.has(C::tAMX_INT8) && cpu.has(C::tAMX_BF16) && cpu.has(C::tAVX512_BF16))
      return Isa::avx512_core_amx;
    if (cpu.has(C::tAVX512_BF16) && cpu.has(C::tAVX512_VNNI)) return Isa::avx512_core_bf16;
    if (cpu.has(C::tAVX512_VNNI)) return Isa::avx512_core_vnni;
    return Isa::avx512_core;
  }
  if (cpu.has(C::tAVX2) && cpu.has(C::tAVX_VNNI)) return Isa::avx2_vnni;
  if (cpu.has(C::tAVX2)) return Isa::avx2;
  if (cpu.has(C::tAVX)) return Isa::avx;
  if (cpu.has(C::tSSE41)) return Isa::sse41;
  return Isa::below_sse41;
}

// oneDNN's effective ISA on kiln's ladder (its values are bit sets).
Isa from_dnnl(dnnl::cpu_isa i) {
  const auto bits = static_cast<unsigned>(i);
  Isa best = Isa::below_sse41;
  if (bits == 0) return best;
  for (const Level& l : levels()) {
    const auto b = static_cast<unsigned>(l.dnnl);
    if ((bits & b) == b) best = l.isa;
  }
  return best;
}

dnnl::cpu_isa parse(const std::string& variable, const std::string& value) {
  const std::string v = lower(value);
  if (v == "all") return dnnl::cpu_isa::all;
  for (const Level& l : levels())
    if (v == l.name) return l.dnnl;
  throw Error(cat(variable, "='", value, "' is not an instruction set kiln knows; accepted (any case): ",
                  accepted_isa_values()));
}

struct State {
  IsaInfo info;
  std::string error;  // a bad variable: thrown by every call
};

const State& state() {
  static const State s = [] {
    State st;
    try {
      st.info.cpu = cpu_own_isa();
      const char* names[] = {"KILN_MAX_CPU_ISA", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"};
      for (size_t k = 0; k < 3; ++k) {
        const char* v = std::getenv(names[k]);
        if (!v || !*v) continue;
        const dnnl::cpu_isa isa = parse(names[k], v);  // validated also where oneDNN reads it itself
        if (st.info.variable.empty()) {
          st.info.variable = names[k];
          st.info.value = v;
        }
        // oneDNN reads its own variables; KILN_MAX_CPU_ISA goes through its API, which
        // takes precedence over them (and must come before oneDNN's first primitive)
        if (k == 0 && dnnl::set_max_cpu_isa(isa) != dnnl::status::success)
          throw Error(cat("KILN_MAX_CPU_ISA=", v, ": oneDNN was used before kiln could cap its instruction set"));
      }
      st.info.effective = from_dnnl(dnnl::get_effective_cpu_isa());
    } catch (const Error& e) {
      st.error = e.what();
    }
    return st;
  }();
  return s;
}

}  // namespace

const IsaInfo& isa_info() {
  const State& s = state();
  if (!s.error.empty()) throw Error(s.error);
  return s.info;
}

Isa effective_isa() { return isa_info().effective; }

bool isa_at_least(Isa isa) { return static_cast<int>(effective_isa()) >= static_cast<int>(isa); }

std::string isa_name(Isa isa) {
  for (const Level& l : levels())
    if (l.isa == isa) return l.name;
  return "below_sse41";
}

std::string accepted_isa_values() {
  std::vector<std::string> v;
  for (const Level& l : levels()) {
    std::string u = l.name;
    for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    v.push_back(u);
  }
  v.push_back("ALL");
  return join(v, ", ");
}

std::string isa_description() {
  const IsaInfo& i = isa_info();
  if (i.variable.empty() || i.effective == i.cpu) return isa_name(i.effective);
  return cat(isa_name(i.effective), " (capped by ", i.variable, "=", i.value, "; this CPU: ", isa_name(i.cpu), ")");
}

bool bf16_native() { return isa_at_least(Isa::avx512_core_bf16); }

bool bf16_available() { return isa_at_least(Isa::avx512_core); }

}  // namespace kiln::cpu
