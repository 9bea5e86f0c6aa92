#pragma once
// The compile pipeline: every stage from a model's ir::Graph to a runnable cpu::Graph, in the
// order they run. Stages 1-3 run once per plan (a set of input shapes) on the plan's copy of
// the model, shared by every thread (cpu::Executor); stages 4-8 once per plan and thread, in
// cpu::Graph's constructor, because a graph's primitives belong to the thread that made them.
// A model whose input shapes vary runs stages 2-3 once, on symbolic shapes (the template,
// below), and only stage 1 of them per plan.
//
//   0. precision    once per model (cpu::Executor): a model stored in fp16 computes in f32
//                   (transforms/compute_fp16_in_f32)
//   1. specialise   the inputs' shapes given, constant subexpressions folded (Shape -> ... ->
//                   Reshape chains, weight transposes), static shapes everywhere
//                   (transforms/specialize_shapes)
//   2. ir passes    transformer patterns, the user's patterns, the model-level fusions: BatchNorm
//                   and Pad folding, identities, QDQ -> FakeQuantize, group convolutions
//                   (run_ir_passes in graph_optimizer.cpp; pattern/, transforms/)
//   3. tokenize     snippets Subgraphs of the elementwise / reduction chains that stage 5 will
//                   not fuse (cpu/mark_skipped by cpu/fusion_rules, snippets/tokenizer), last
//                   of run_ir_passes
//   4. lower        one runtime node per ir node (nodes/node_factory.cpp), an Edge per value
//   5. cpu passes   post-op fusions into convolutions, fully connected and pooling
//                   (cpu_passes() in graph_optimizer.cpp, one file each under passes/)
//   6. precision    with inference_precision=bf16: bf16 kept between convolutions; with
//                   kiln_convolutions_until_hot=f32 a new shape's convolutions compute in f32
//                   until the shape is hot (decided right after stage 4: the fusions depend on
//                   it) (graph_precision.cpp)
//   7. layouts      each node's prepare() in execution order: primitives, output layouts, the
//                   input layout it needs; Reorders inserted where they differ
//   8. memory plan  views, in-place writes, Concat inputs inside their output, lifetimes ->
//                   offsets in the arena, nodes' working memory (memory_planner.cpp)
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cpu/graph.hpp"
#include "ir/graph.hpp"
#include "transforms/pass_log.hpp"

namespace kiln::cpu {

// The limit options.max_tensor_bytes sets (0: the machine's physical memory).
uint64_t max_tensor_bytes(const GraphOptions& options);


struct IrStagesResult {
  std::shared_ptr<ir::Graph> graph;  // the plan's copy of the model after stages 1-3
  bool all_static = false;           // else stages 2-3 did not run: shapes depend on data
  std::string first_dynamic;         // !all_static: a value whose shape depends on data
};

// Stages 1-3 on a copy of `model` for these input shapes. `log` (may be null) gets what the
// passes did and why not.
IrStagesResult run_ir_stages(const ir::Graph& model, const std::vector<Shape>& input_shapes,
                             const GraphOptions& options, transforms::PassLog* log);

// Stages 2-3 (after the check of every tensor's size) on a graph stage 1 left with static
// shapes: run_ir_stages' second half, and what the head of a graph cut at its data-dependent
// shapes gets (transforms/split_at_data_dependent.hpp, cpu::Executor).
void run_static_ir_stages(ir::Graph& g, const GraphOptions& options, transforms::PassLog* log);

// A model whose input shapes vary runs stage 1 on symbolic shapes and stage 2 once, on a copy
// of the model (run_ir_template_stages), then stage 3 once on that template at the first input
// shapes (tokenize_ir_template), and for each set of input shapes stage 1 on a copy of the
// tokenized template (instantiate_ir_template): the fusions and Subgraphs hold for every
// shape, and a new shape costs no pattern matching and no tokenization. `graph` is null when
// the model needs the per-shape stages (control flow, values of unknown rank, SymbolicShapes
// disabled: `reason`).
struct IrTemplate {
  std::shared_ptr<const ir::Graph> graph;      // after stage 2
  std::string reason;
  // After stage 3 too (null: each shape is tokenized on its own, stage 3 per shape; before
  // tokenize_ir_template ran, or `tokenize_reason` says why not).
  std::shared_ptr<const ir::Graph> tokenized;
  std::string tokenize_reason;
};
IrTemplate run_ir_template_stages(const ir::Graph& model, const GraphOptions& options, transforms::PassLog* log);
// Stage 3 once, for every shape: MarkSkipped asks the template specialised to `first` (its
// fusion rules read static shapes) and the tokenizer runs on the template itself. Kept as
// `t.tokenized` only when, at `first`, it gives the very nodes tokenizing at those shapes gave
// (`first_instance`: instantiate_ir_template's graph there, tokenized per shape): the same ops,
// names and fused ops. Else `t.tokenize_reason` names the first difference (a lone broadcasting
// op whose operands are equal at `first` but not on symbols, say) and every shape keeps its
// own stage 3. `log` gets the template's tokenization, or why not.
void tokenize_ir_template(IrTemplate& t, const std::vector<Shape>& first, const ir::Graph& first_instance,
                          const GraphOptions& options, transforms::PassLog* log);
// Stage 1 on a copy of the tokenized template when there is one, else of `graph` followed by
// stage 3.
IrStagesResult instantiate_ir_template(const IrTemplate& t, const std::vector<Shape>& input_shapes,
                                       const GraphOptions& options, transforms::PassLog* log);

// Stages 4-8 on `g` (cpu::Graph's constructor calls it).
void run_runtime_stages(Graph& g, const GraphOptions& options);

}  // namespace kiln::cpu
