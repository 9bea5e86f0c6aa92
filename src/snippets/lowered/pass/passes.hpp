#pragma once
// Control-flow passes over the Linear IR (one pass a file) and the pipeline that runs them.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "snippets/lowered/linear_ir.hpp"

namespace kiln::snippets::lowered::pass {

// Softmax / LogSoftmax along the inner dim become VectorFill, Accumulate*, Horizon* and
// elementwise ops. Returns how many were decomposed.
size_t decompose_reductions(LinearIR& lir);
// Loop 0: the rows loop, around every computing expression. Vector expressions also get the
// inner loop of their stage (loop 1 + stage): stage 0, or one past the stage whose reduction
// they read. Per-row values (VectorFill, Horizon*, ops on them only) are in the rows loop only.
void mark_loops(LinearIR& lir);
// Orders the expressions so each loop's are contiguous: Parameters and Scalars first, then
// per stage its VectorFills, its inner loop's body and its Horizons, Results last.
void fuse_loops(LinearIR& lir);
// A value computed in one inner loop and read in a later one goes through a Buffer (a row
// of scratch memory) placed after the producer's loop. Returns the Buffers made.
size_t insert_buffers(LinearIR& lir);
// Inserts a Load before every consumer of a Parameter or Buffer and a Store at the end of
// the inner loop computing each Result's or Buffer's value; registers them as entry / exit
// ports of their loops.
void insert_load_store(LinearIR& lir);
// Gives each Buffer a region of the per-call scratch ("offset"; "buffer_offset" on its Loads /
// Stores); all share one data pointer ("ptr" 0, lir.buffer_offsets() = {0}). `optimized`:
// Buffers whose lifetimes (the inner loops from the write to the last read) do not overlap, or
// touch in the loop that reads one and writes the other, share a region. Returns the regions.
size_t allocate_buffers(LinearIR& lir, bool optimized);
// Inserts a BroadcastMove after a Load whose inner dim is 1 while its consumer's is not;
// the Load then reads one element (subtensor [1, 1]).
void insert_broadcast_move(LinearIR& lir);
// Load -> BroadcastMove becomes one BroadcastLoad.
void load_move_broadcast_to_broadcast_load(LinearIR& lir);
// Gives every Load / BroadcastLoad / Store the layout and strides of the Parameter, Result or
// Buffer it accesses; a vector access across non-contiguous lanes is an error. Returns the
// memory expressions visited.
size_t propagate_layout(LinearIR& lir);
// Pointer increments and finalization offsets of every loop port (from the ports' strides).
void init_loops(LinearIR& lir);
// Inserts LoopBegin / LoopEnd around each loop's body.
void insert_loops(LinearIR& lir);
// Splits a loop whose work amount is not a multiple of its increment into the main loop and
// a tail copy (masked Load / Store, "count" = tail); drops an empty main loop.
void insert_specific_iterations(LinearIR& lir);
// Runs lir.unroll_factor() vectors per iteration of each innermost static loop, the body's
// copies interleaved op by op; the remainder runs in a copy of the original loop after it.
void unroll_loops(LinearIR& lir);
// The data pointer a memory expression moves: {0, Parameter index} for a Load /
// BroadcastLoad, {1, Result index} for a Store, {2, buffer pointer} for a Buffer's (its
// "ptr" once allocated, else its "buffer" id).
std::pair<int, int> data_pointer(const Expression& mem);
// Several ports of one loop reading the same data pointer: only the first shifts it.
void clean_repeated_data_pointer_shifts(LinearIR& lir);
// Generator preparation: an abstract register per vector value and its live range.
void init_live_ranges(LinearIR& lir);
// Makes the values fit `num_regs` registers (run before AssignRegisters when they do not):
// Scalars are emitted again where used, other values go to stack slots between their
// definition and next use (RegSpillBegin / RegSpillEnd "slot"). Returns the spills made.
size_t insert_reg_spills(LinearIR& lir, int num_regs);
// Loop pointer shifts: the last inner loop's rewind of a pointer (finalization offset) is
// added to the enclosing loop's increment of that pointer instead (one add, often zero).
void cleanup_loop_offsets(LinearIR& lir);
// A static loop whose work amount is one increment runs its body once: its pointer
// increments become part of its finalization offsets and it is marked evaluate_once (the
// emitter then writes no counter and no jump).
void optimize_loop_single_evaluation(LinearIR& lir);
// Maps abstract registers to physical ones (0 .. num_regs-1), reusing registers whose live
// ranges do not overlap; throws kiln::Error when more are live at once than exist.
void assign_registers(LinearIR& lir, int num_regs);

// An ordered list of named passes; a backend inserts its own before / after a named one.
class PassPipeline {
 public:
  using Pass = std::function<void(LinearIR&)>;
  void add(std::string name, Pass p) { passes_.emplace_back(std::move(name), std::move(p)); }
  void register_before(const std::string& anchor, std::string name, Pass p);
  void register_after(const std::string& anchor, std::string name, Pass p);
  std::vector<std::string> names() const;
  // Runs every pass; `after_each`, when given, sees the IR after each pass (debug dumps).
  void run(LinearIR& lir, const std::function<void(const std::string&, const LinearIR&)>& after_each = {}) const;
  // The control-flow pipeline, in the order of the design guide. `optimize_buffers`: the
  // AllocateBuffers mode.
  static PassPipeline control_flow(bool optimize_buffers = true);

 private:
  size_t index_of(const std::string& name) const;
  std::vector<std::pair<std::string, Pass>> passes_;
};

}  // namespace kiln::snippets::lowered::pass
