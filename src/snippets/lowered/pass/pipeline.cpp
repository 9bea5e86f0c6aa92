#include <kiln/error.hpp>

#include "core/strings.hpp"
#include "snippets/lowered/pass/passes.hpp"

namespace kiln::snippets::lowered::pass {

size_t PassPipeline::index_of(const std::string& name) const {
  for (size_t i = 0; i < passes_.size(); ++i)
    if (passes_[i].first == name) return i;
  throw Error(cat("snippets pipeline: no pass named '", name, "' (passes: ", join(names(), ", "), ")"));
}

void PassPipeline::register_before(const std::string& anchor, std::string name, Pass p) {
  size_t i = index_of(anchor);
  passes_.insert(passes_.begin() + static_cast<std::ptrdiff_t>(i), {std::move(name), std::move(p)});
}

void PassPipeline::register_after(const std::string& anchor, std::string name, Pass p) {
  size_t i = index_of(anchor);
  passes_.insert(passes_.begin() + static_cast<std::ptrdiff_t>(i + 1), {std::move(name), std::move(p)});
}

std::vector<std::string> PassPipeline::names() const {
  std::vector<std::string> n;
  for (const auto& p : passes_) n.push_back(p.first);
  return n;
}

void PassPipeline::run(LinearIR& lir, const std::function<void(const std::string&, const LinearIR&)>& after_each) const {
  for (const auto& [name, p] : passes_) {
    p(lir);
    if (after_each) after_each(name, lir);
  }
}

PassPipeline PassPipeline::control_flow(bool optimize_buffers) {
  PassPipeline p;
  p.add("DecomposeReductions", [](LinearIR& lir) { decompose_reductions(lir); });
  p.add("MarkLoops", mark_loops);
  p.add("FuseLoops", fuse_loops);
  p.add("InsertBuffers", [](LinearIR& lir) { insert_buffers(lir); });
  p.add("InsertLoadStore", insert_load_store);
  p.add("AllocateBuffers", [optimize_buffers](LinearIR& lir) { allocate_buffers(lir, optimize_buffers); });
  p.add("InsertBroadcastMove", insert_broadcast_move);
  p.add("LoadMoveBroadcastToBroadcastLoad", load_move_broadcast_to_broadcast_load);
  p.add("PropagateLayout", [](LinearIR& lir) { propagate_layout(lir); });
  p.add("InitLoops", init_loops);
  p.add("InsertLoops", insert_loops);
  p.add("InsertSpecificIterations", insert_specific_iterations);
  p.add("UnrollLoops", unroll_loops);
  p.add("CleanRepeatedDataPointerShifts", clean_repeated_data_pointer_shifts);
  p.add("CleanupLoopOffsets", cleanup_loop_offsets);
  p.add("OptimizeLoopSingleEvaluation", optimize_loop_single_evaluation);
  return p;
}

}  // namespace kiln::snippets::lowered::pass
