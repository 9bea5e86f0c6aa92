#pragma once
// Snippets generator: compiles an elementwise body graph for concrete input shapes into a
// JIT kernel, through the stages of the design guide (data-flow passes, Linear IR,
// control-flow passes, register assignment, x64 emitters).
#include <kiln/tensor.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "snippets/target_machine.hpp"

namespace kiln::ir {
class Graph;
class Node;
}  // namespace kiln::ir

namespace kiln::snippets {

class CompiledCode;

// Ops this generator can emit (f32), including the ones the data-flow passes create.
bool is_supported(const ir::Node& n);

// The first output dim a reduction op (Softmax, LogSoftmax) of the body reduces over: the
// kernel's inner block is the dims from there on. Throws kiln::Error when the generator
// cannot reduce it (not along the trailing dims, or not over the output's shape).
int64_t reduction_start(const ir::Node& n, const Shape& output);
// The same over all the reductions among `nodes` (-1: none); kiln::Error when they reduce
// from different dims (a kernel has one inner block).
int64_t reduced_from(const std::vector<const ir::Node*>& nodes, const Shape& output);

struct KernelShapes {
  std::vector<Shape> inputs;  // numpy-broadcast to `output`
  Shape output;
};

struct CompileOptions {
  // Mul+Add -> FMA (one rounding instead of two). Off by default: ONNX rounds every op, and
  // the ulp an FMA saves is enough to flip a later quantization's rounding (the
  // DynamicQuantizeLinear of a dynamically quantized model: IS-Net's mask moved by 6e-3
  // against ONNX Runtime with it, 1.5e-7 without). Elementwise chains are memory-bound: the
  // extra instruction costs nothing measurable.
  bool fuse_fma = false;
  // Mul(x, Sigmoid(x)) -> Swish (SiLU in one op, 15% fewer vector operations; the result
  // within a few units of roundoff of the pair's). Off only to compare with the pair.
  bool fuse_swish = true;
  // The code generator (required): the backend that emits the kernel, handed in by whoever
  // owns the CPU (cpu::x64::make_target_machine), so the generic compiler names no CPU.
  std::shared_ptr<const TargetMachine> target;
  // Vectors per inner-loop iteration (UnrollLoops). 0: the largest of 4, 2, 1 whose
  // registers fit.
  int unroll = 0;
  // Debug: write the Linear IR after every control-flow pass to
  // <dump_dir>/<name>_<NN>_<pass>.txt (also set by the environment variable
  // KILN_SNIPPETS_DUMP_DIR when empty here).
  std::string dump_dir;
  std::string name = "kernel";  // for dumps and error messages
  // Debug: instrument the kernel for the segfault detector (src/snippets/segfault_detector.hpp);
  // also on when the environment has KILN_SNIPPETS_SEGFAULT_DETECTOR=1.
  bool segfault_detector = false;
  // AllocateBuffers mode: Buffers with disjoint lifetimes share scratch memory (true) or each
  // has its own (false, for debugging an allocation).
  bool optimize_buffers = true;
  // Store every output as bf16 (rounded to nearest even) instead of f32: where the readers
  // are bf16 convolutions. AVX-512 kernels on CPUs with avx512_bf16 only (else kiln::Error).
  bool bf16_outputs = false;
};

// The 2-D schedule: the output viewed as [rows, inner]; rows split into outer dims.
struct Schedule {
  int64_t inner = 1;
  std::vector<int64_t> outer;                      // collapsed outer dims (product = rows)
  std::vector<std::vector<int64_t>> in_strides;    // per input, per outer dim (elements, 0 = broadcast)
  std::vector<bool> in_inner_broadcast;            // input constant along the inner block
  std::vector<std::vector<int64_t>> lir_in_shapes; // [rows of the last outer dim or 1, inner or 1]
  std::vector<int64_t> lir_in_row_strides;         // per input: elements between rows of the last outer dim (0 = broadcast)
  std::vector<int64_t> lir_out_shape;
  int64_t rows() const;
};
// `inner_from` >= 0: the inner block is exactly the output dims [inner_from, rank) (a
// reduction runs over them); every input must span all of them or none, else kiln::Error.
// `input_perms` (empty, or one per input, empty for none): the kernel reads input i
// transposed, its logical dim k being memory dim perm[k] (a Transpose fused into the kernel);
// the last dim must stay last.
Schedule make_schedule(const KernelShapes& shapes, int64_t inner_from = -1,
                       const std::vector<std::vector<int64_t>>& input_perms = {});

class Kernel {
 public:
  ~Kernel();
  // Computes rows [begin, end) of the output viewed as [rows(), inner]. Thread-safe.
  void run(const std::vector<const float*>& ins, const std::vector<float*>& outs, int64_t begin, int64_t end) const;
  int64_t rows() const { return schedule_.rows(); }
  int64_t inner() const { return schedule_.inner; }
  // Floats of scratch memory one call uses (rows of the Buffers between inner loops).
  int64_t scratch_size() const { return scratch_size_; }
  // Bytes per output element: 4 (f32) or 2 (CompileOptions::bf16_outputs).
  int64_t output_bytes() const { return output_bytes_; }
  // The Linear IR after all passes and the register assignment.
  std::string describe() const { return describe_; }
  // The instruction set the code was generated for ("avx512", "avx2").
  const std::string& isa() const { return isa_; }
  // Instrumented for the segfault detector (its state is shared by the threads running it,
  // so callers run such a kernel on one thread).
  bool debug() const { return debug_ != nullptr; }

 private:
  friend std::unique_ptr<Kernel> compile(const ir::Graph&, const KernelShapes&, const CompileOptions&);
  friend std::shared_ptr<const Kernel> compile_cached_as(const ir::Graph&, const std::string&, const KernelShapes&,
                                                        const CompileOptions&);
  Kernel() = default;
  Schedule schedule_;
  size_t num_outputs_ = 0;
  // The rest depends only on the body, the options and the schedule's [rows, inner] view with
  // its rows as one or several (code_key): kernels of other shapes may share it.
  std::vector<int64_t> buffer_offsets_;  // per buffer data pointer, in the scratch (floats)
  int64_t scratch_size_ = 0;
  int64_t output_bytes_ = 4;
  std::shared_ptr<const CompiledCode> code_;
  std::string describe_;
  std::string isa_;
  std::shared_ptr<DebugState> debug_;
};

// Throws kiln::Error naming the node when something is unsupported.
std::unique_ptr<Kernel> compile(const ir::Graph& body, const KernelShapes& shapes, const CompileOptions& options = {});

// compile() through a process-wide cache keyed by the body (ops, attributes, constants,
// wiring), the shapes and the options that change the code: the same subgraph in several
// places of a model, in several streams' graphs or in several compiled models is compiled
// once while any of them holds it; and one of other shapes with the same [rows, inner]
// schedule but for its row count takes that kernel's machine code (KernelCacheStats::code_shared).
std::shared_ptr<const Kernel> compile_cached(const ir::Graph& body, const KernelShapes& shapes,
                                             const CompileOptions& options = {});
// The same for a body held by a shared_ptr (a Subgraph node's): the body's part of the key is
// computed once while the body lives, not for every new input shape.
std::shared_ptr<const Kernel> compile_cached(const std::shared_ptr<const ir::Graph>& body, const KernelShapes& shapes,
                                             const CompileOptions& options = {});
struct KernelCacheStats {
  size_t hits = 0, misses = 0, live = 0;  // live: kernels some caller still holds
  // misses served with the machine code of a kernel of other shapes: the code takes its rows
  // per call, so shapes whose schedules differ in their row counts only (a sequence length,
  // a batch) share one generated kernel
  size_t code_shared = 0;
};
KernelCacheStats kernel_cache_stats();
// The cache key (exposed for tests): equal for bodies that compile to the same code.
std::string kernel_cache_key(const ir::Graph& body, const KernelShapes& shapes, const CompileOptions& options);

}  // namespace kiln::snippets
