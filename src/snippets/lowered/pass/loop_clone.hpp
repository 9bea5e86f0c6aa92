#pragma once
// Loop utilities shared by the passes that split a loop into several (InsertSpecificIterations,
// UnrollLoops): finding a loop's markers and copying a whole loop after itself.
#include <unordered_map>

#include "snippets/lowered/linear_ir.hpp"

namespace kiln::snippets::lowered::pass {

// The LoopBegin / LoopEnd of loop `id` (lir.end() when absent).
LinearIR::iterator find_loop_marker(LinearIR& lir, OpKind kind, size_t loop);

struct LoopCopy {
  size_t id = 0;                                         // the new loop
  std::unordered_map<const Expression*, Expression*> of;  // original -> copy
};

// Copies loop `id` ([LoopBegin, LoopEnd], inner loops included) right after its LoopEnd as a
// new loop described by `info` (ports: the copies of `id`'s ports, same shifts; set the
// finalization offsets after). The enclosing loops get the copies' ports as well. When
// `count` >= 0 the copied Load / Store access `count` lanes and the vector values are
// `count` wide (a tail).
LoopCopy copy_loop_after(LinearIR& lir, size_t id, LoopInfo info, int64_t count = -1);

}  // namespace kiln::snippets::lowered::pass
