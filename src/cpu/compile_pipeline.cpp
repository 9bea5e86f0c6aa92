#include "cpu/compile_pipeline.hpp"

#include <unistd.h>

#include <algorithm>

#include "core/strings.hpp"
#include "cpu/graph_optimizer.hpp"
#include "cpu/weights_cache.hpp"
#include "ir/op_registry.hpp"
#include "snippets/subgraph_op.hpp"
#include "transforms/specialize_shapes.hpp"
#include "transforms/specialize_symbolic.hpp"

namespace kiln::cpu {

uint64_t max_tensor_bytes(const GraphOptions& options) {
  if (options.max_tensor_bytes) return options.max_tensor_bytes;
  static const uint64_t physical = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : uint64_t(1) << 40;
  }();
  return physical;
}

namespace {

// ir::validate_node on every node (throws kiln::Error naming the first that fails).
void validate_nodes(const ir::Graph& g) {
  for (const ir::Node* n : g.nodes()) ir::validate_node(*n);
}

std::string gib(long double bytes) { return cat(static_cast<double>(bytes / (1ull << 30)), " GiB"); }

// Stage 1's guard: every tensor of the specialised graph fits the limit. Checked before any
// memory is planned or allocated, so a crafted shape gets an error naming its node.
void check_tensor_bytes(const ir::Graph& g, uint64_t limit) {
  for (const ir::Node* n : g.nodes())
    for (const ir::Value* o : n->outputs()) {
      if (!o || !o->type.shape.is_static() || o->type.dtype == DType::undefined) continue;
      long double bytes = static_cast<long double>(dtype_size(o->type.dtype));
      for (const ir::Dim& d : o->type.shape.dims) bytes *= static_cast<long double>(d.value);  // static
      if (bytes > static_cast<long double>(limit))
        throw Error(cat(n->describe(), ": its output '", o->name(), "' ", shape_to_string(o->type.shape.to_shape()), " ",
                        dtype_name(o->type.dtype), " would take ", gib(bytes),
                        ", more than kiln_max_tensor_bytes = ", limit, " (", gib(limit),
                        "; the machine's memory unless set)"));
    }
}

}  // namespace

IrStagesResult run_ir_stages(const ir::Graph& model, const std::vector<Shape>& input_shapes,
                             const GraphOptions& options, transforms::PassLog* log) {
  IrStagesResult r;
  r.graph = model.clone();
  transforms::SpecializeOptions so;
  so.keep_weight_dequantize = qdq_to_qlinear_runs(options.disabled_passes);
  const transforms::SpecializeResult s = transforms::specialize_shapes(*r.graph, input_shapes, so);  // 1
  r.all_static = s.all_static;
  r.first_dynamic = s.first_dynamic;
  if (!r.all_static) return r;
  run_static_ir_stages(*r.graph, options, log);
  return r;
}

void run_static_ir_stages(ir::Graph& g, const GraphOptions& options, transforms::PassLog* log) {
  check_tensor_bytes(g, max_tensor_bytes(options));
  // 2, 3 (weights are constants by now)
  run_ir_passes(g, options.disabled_passes, log, options.user_patterns.get(), options.snippets_mode,
                fusion_target(options));
}

IrTemplate run_ir_template_stages(const ir::Graph& model, const GraphOptions& options, transforms::PassLog* log) {
  IrTemplate t;
  if (options.disabled_passes.count(transforms::kSymbolicShapes)) {
    t.reason = cat("the pass ", transforms::kSymbolicShapes, " is disabled");
    return t;
  }
  const std::string where = model.name.empty() ? "graph" : model.name;
  std::shared_ptr<ir::Graph> g = model.clone();
  transforms::SpecializeOptions so;
  so.keep_weight_dequantize = qdq_to_qlinear_runs(options.disabled_passes);
  transforms::PassLog passes;  // the template's account, kept only when it is made
  try {
    const transforms::SymbolicSpecializeResult s = transforms::specialize_symbolic(*g, so);  // 1, symbolic
    t.reason = s.reason;
    if (s.ok) {
      passes.applied(transforms::kSymbolicShapes, where,
                     cat("fusions decided once for every input shape: ", s.folded_nodes, " nodes folded, ",
                         s.static_reshapes, " computed Reshape targets made constant, ", s.named_dims, " dims named"));
      run_ir_fusions(*g, options.disabled_passes, &passes, options.user_patterns.get());  // 2
      validate_nodes(*g);  // once: its copies are not validated again (instantiate_ir_template)
    }
  } catch (const Error& e) {
    // something of the model that only specialised shapes make well defined (the per-shape
    // stages will name it if it is wrong at every shape)
    t.reason = e.what();
  }
  if (!t.reason.empty()) {
    if (log) log->skipped(transforms::kSymbolicShapes, where, t.reason);
    return t;
  }
  if (log) log->entries.insert(log->entries.end(), passes.entries.begin(), passes.entries.end());
  t.graph = std::move(g);
  return t;
}

IrStagesResult instantiate_ir_template(const IrTemplate& t, const std::vector<Shape>& input_shapes,
                                       const GraphOptions& options, transforms::PassLog* log) {
  IrStagesResult r;
  // (stage 1 infers every computed value's shape: the template's symbolic ones are not copied)
  r.graph = (t.tokenized ? *t.tokenized : *t.graph).clone(ir::Graph::Shapes::inputs_and_constants);
  transforms::SpecializeOptions so;
  so.nodes_validated = true;  // when the template was made
  const transforms::SpecializeResult s = transforms::specialize_shapes(*r.graph, input_shapes, so);  // 1
  r.all_static = s.all_static;
  r.first_dynamic = s.first_dynamic;
  if (!r.all_static) return r;
  check_tensor_bytes(*r.graph, max_tensor_bytes(options));
  if (!t.tokenized)
    run_tokenization(*r.graph, options.disabled_passes, log, options.snippets_mode, fusion_target(options));  // 3
  return r;
}

namespace {

// What tokenize_ir_template compares: every node's op, name and (a Subgraph's) fused ops.
std::vector<std::string> node_signature(const ir::Graph& g) {
  std::vector<std::string> sig;
  sig.reserve(g.num_nodes());
  for (const ir::Node* n : g.nodes()) {
    std::string s = cat(n->domain(), ":", n->op_type(), " '", n->name(), "'");
    if (n->has_attr(snippets::kFusedAttr))
      for (const std::string& op : n->attr_strings(snippets::kFusedAttr)) s += cat(" ", op);
    sig.push_back(std::move(s));
  }
  std::sort(sig.begin(), sig.end());
  return sig;
}

}  // namespace

void tokenize_ir_template(IrTemplate& t, const std::vector<Shape>& first, const ir::Graph& first_instance,
                          const GraphOptions& options, transforms::PassLog* log) {
  if (!t.graph || t.tokenized) return;
  const std::string where = t.graph->name.empty() ? "graph" : t.graph->name;
  if (options.disabled_passes.count(kTemplateTokenization)) {
    t.tokenize_reason = cat("the pass ", kTemplateTokenization, " is disabled");
    if (log) log->skipped(kTemplateTokenization, where, t.tokenize_reason);
    return;
  }
  transforms::PassLog passes;  // the template's tokenization, kept only when the template is
  std::shared_ptr<ir::Graph> tok = t.graph->clone();
  try {
    std::shared_ptr<ir::Graph> at_first = t.graph->clone();
    if (!transforms::specialize_shapes(*at_first, first).all_static)
      t.tokenize_reason = "the first input shapes leave shapes that depend on data";
    else
      run_tokenization(*tok, options.disabled_passes, &passes, options.snippets_mode, fusion_target(options),
                       at_first.get());  // 3, MarkSkipped's answers at `first`
    if (t.tokenize_reason.empty()) {
      for (const ir::Node* n : tok->nodes())  // its Subgraphs, once (the rest was validated with the template)
        if (snippets::is_subgraph(*n)) ir::validate_node(*n);
      std::shared_ptr<ir::Graph> check = tok->clone();
      transforms::specialize_shapes(*check, first);
      const std::vector<std::string> got = node_signature(*check), want = node_signature(first_instance);
      if (got != want) {
        auto [a, b] = std::mismatch(got.begin(), got.end(), want.begin(), want.end());
        t.tokenize_reason = cat("at the first input shapes the template's Subgraphs differ from that shape's: ",
                                a == got.end() ? std::string("-") : *a, " where that shape has ",
                                b == want.end() ? std::string("-") : *b);
      }
    }
  } catch (const Error& e) {
    t.tokenize_reason = e.what();
  }
  if (!t.tokenize_reason.empty()) {
    if (log) log->skipped(kTemplateTokenization, where, cat("tokenized per input shape: ", t.tokenize_reason));
    return;
  }
  size_t subgraphs = 0;
  for (const ir::Node* n : tok->nodes()) subgraphs += snippets::is_subgraph(*n);
  if (log) {
    log->entries.insert(log->entries.end(), passes.entries.begin(), passes.entries.end());
    log->applied(kTemplateTokenization, where,
                 cat("snippets tokenization decided once for every input shape: ", subgraphs, " Subgraphs"));
  }
  t.tokenized = std::move(tok);
}

void run_runtime_stages(Graph& g, const GraphOptions& options) {
  g.lower(options);                                       // 4
  if (options.bf16 && options.shapes_vary && options.convolutions_until_hot == GraphOptions::UntilHot::f32)
    g.convolutions_in_f32_until_hot(options.log);  // 6 (kiln_convolutions_until_hot), before the fusions
  optimize_graph(g, options);                             // 5
  g.absorbed_.clear();  // the passes are done with the nodes they fused away
  if (options.bf16) g.keep_bf16_between_convolutions();  // 6
  WeightsCache::Scope weights(options.weights);           // Convolution / FullyConnected pack through it
  g.prepare_all(options.release_packed_sources);         // 7
  g.max_arena_bytes_ = max_tensor_bytes(options);        // (kiln_max_tensor_bytes, checked before allocating)
  g.plan_memory();                                        // 8
}

}  // namespace kiln::cpu
