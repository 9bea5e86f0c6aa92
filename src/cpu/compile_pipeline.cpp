#include "cpu/compile_pipeline.hpp"

#include "cpu/graph_optimizer.hpp"
#include "cpu/weights_cache.hpp"
#include "transforms/specialize_shapes.hpp"

namespace kiln::cpu {

IrStagesResult run_ir_stages(const ir::Graph& model, const std::vector<Shape>& input_shapes,
                             const GraphOptions& options, transforms::PassLog* log) {
  IrStagesResult r;
  r.graph = model.clone();
  const transforms::SpecializeResult s = transforms::specialize_shapes(*r.graph, input_shapes);  // 1
  r.all_static = s.all_static;
  r.first_dynamic = s.first_dynamic;
  if (!r.all_static) return r;
  // 2, 3 (weights are constants by now)
  run_ir_passes(*r.graph, options.disabled_passes, log, options.user_patterns.get(), options.snippets_mode);
  return r;
}

void run_runtime_stages(Graph& g, const GraphOptions& options) {
  g.lower(options);                                       // 4
  optimize_graph(g, options);                             // 5
  g.absorbed_.clear();  // the passes are done with the nodes they fused away
  if (options.bf16) g.keep_bf16_between_convolutions();  // 6
  WeightsCache::Scope weights(options.weights);           // Convolution / FullyConnected pack through it
  g.prepare_all();                                        // 7
  g.plan_memory();                                        // 8
}

}  // namespace kiln::cpu
