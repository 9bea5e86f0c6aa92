#pragma once
// The backend interface of the generator: which ops a target can emit, how many vector
// registers it has, and turning a prepared Linear IR into executable code.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "snippets/lowered/linear_ir.hpp"

namespace kiln::snippets {

// The compiled code: fn(data pointers (inputs then outputs, each at its first row), rows).
using KernelFn = void (*)(const void* const* ptrs, int64_t rows);

class CompiledCode {
 public:
  virtual ~CompiledCode() = default;
  virtual KernelFn fn() const = 0;
  // The machine code (for dumps: objdump -D -b binary -mi386:x86-64 FILE).
  virtual const uint8_t* code() const = 0;
  virtual size_t size() const = 0;
};

// The instruction set a kernel is generated for. Auto: the widest this CPU runs.
enum class Isa { Auto, Avx512, Avx2 };
// "auto", "avx512", "avx2"; parse_isa throws kiln::Error listing them.
std::string isa_name(Isa isa);
Isa parse_isa(const std::string& s);

// Segfault-detector mode: before every emitter the kernel stores which expression runs, and
// each loop counts its iterations, here; a SIGSEGV handler reports them (debug builds of a
// kernel only: the stores cost time).
struct DebugState {
  volatile int32_t expr = -1;                  // index into expr_names
  std::vector<int64_t> iterations;             // per loop id (sized before generation)
  std::vector<std::string> expr_names;         // "Load#3 param=0"
  std::vector<std::string> loop_names;         // "loop 1 (inner, 64 per iteration)"
  std::string kernel;                          // the kernel's name
};

class TargetMachine {
 public:
  virtual ~TargetMachine() = default;
  virtual std::string name() const = 0;
  virtual Isa isa() const = 0;
  // f32 lanes per vector register.
  virtual int64_t vector_length() const = 0;
  // Target-specific checks (e.g. the CPU has the ISA); throws kiln::Error when not.
  virtual void check_available() const = 0;
  virtual bool is_supported(const std::string& op_type) const = 0;
  // Vector registers the register allocator may hand out (the rest are emitter scratch).
  virtual int num_vector_regs() const = 0;
  virtual int max_data_pointers() const = 0;
  // Stores of bf16 outputs (f32 rounded to nearest even) on this target and CPU.
  virtual bool supports_bf16_outputs() const = 0;
  // Emits the kernel for a Linear IR after the control-flow passes and register assignment.
  // `debug`: segfault-detector instrumentation into that state (null: none).
  virtual std::unique_ptr<CompiledCode> generate(const lowered::LinearIR& lir, DebugState* debug = nullptr) const = 0;
};

}  // namespace kiln::snippets
