#pragma once
// cpu::Graph: the runtime graph built from an ir::Graph whose shapes are all static
// (see transforms::specialize_shapes). One runtime node per ir node — a oneDNN-backed
// node where one supports it, else a Reference node running the spine's kernel — plus
// Reorder nodes where a consumer needs another layout than its producer made. All
// intermediate tensors live at offsets planned by lifetime in one arena, which graphs
// running on one thread may share (GraphOptions::arena); nothing is allocated during
// execute() except by Reference nodes' kernels.
#include <kiln/profiling.hpp>
#include <kiln/tensor.hpp>

#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "cpu/arena.hpp"
#include "cpu/fusion_decisions.hpp"
#include "cpu/node.hpp"
#include "ir/graph.hpp"
#include "snippets/target_machine.hpp"

namespace kiln::transforms {
struct PassLog;
}
namespace kiln::pattern {
struct PatternConfig;
}

namespace kiln::cpu {

class WeightsCache;

// Property snippets_mode: tokenize (enable), also the nodes MarkSkipped leaves to the CPU
// optimizer's post-op fusions (ignore_callback), or not at all (disable).
enum class SnippetsMode { enable, ignore_callback, disable };

struct GraphOptions {
  // Passes of the CPU graph optimizer not to run, by name, or "all-fusions" for all of them.
  std::set<std::string> disabled_passes;
  transforms::PassLog* log = nullptr;  // what the passes did and why not (may be null)
  // Packed weights shared with other graphs of the same model (e.g. one graph per stream);
  // null: Convolution / FullyConnected nodes pack their own copy. Used during construction only.
  WeightsCache* weights = nullptr;
  // Pattern configs from the user's files (property kiln_pattern_files), applied after the
  // shipped library by run_ir_passes; may be null.
  std::shared_ptr<const std::vector<pattern::PatternConfig>> user_patterns = {};
  // inference_precision = bf16. Off unless set: the property's default (bf16 where the CPU
  // runs it natively) is decided by api::parse_properties, not here.
  bool bf16 = false;
  SnippetsMode snippets_mode = SnippetsMode::enable;  // snippets_mode
  snippets::Isa snippets_isa = snippets::Isa::Auto;   // kiln_snippets_isa: the Subgraph kernels' ISA
  // Where the intermediate tensors live during run(): shared with other graphs that run on
  // the same thread (never at the same time); null: the graph has an arena of its own.
  std::shared_ptr<Arena> arena = nullptr;
  // The model has inputs of variable shape, so graphs are built per shape (cpu::Executor sets
  // it): nodes favour primitives that are quick to create (Node::shapes_vary).
  bool shapes_vary = false;
  // cpu::Executor: how many cuts at data-dependent shapes lie before this graph (the executor of
  // a tail after a cut has one more; beyond kMaxCuts a tail runs on the reference executor).
  int cuts_before = 0;
  static constexpr int kMaxCuts = 32;
  // The model's input shapes vary, hot rebuilds included: nodes that have a kernel of kiln's
  // taking its sizes at run time use it (gemm_f32, layer_norm_f32, attention_f32, lstm_f32:
  // nothing made per shape, and as fast as oneDNN's or faster) (Node::shape_agnostic).
  bool shape_agnostic = false;
  // kiln_convolutions_until_hot: with bf16 and shapes_vary, the precision of a new shape's
  // convolutions until the shape is hot. f32: Graph::convolutions_in_f32_until_hot. measure
  // (the property's default, auto): cpu::Executor builds each new shape's graph with bf16 or
  // f32 as its measurements say (until_hot_chooser.hpp); a Graph built with it keeps bf16.
  enum class UntilHot { bf16, f32, measure };
  UntilHot convolutions_until_hot = UntilHot::bf16;
  // kiln_max_tensor_bytes: no tensor of a plan, and no plan's intermediate memory, may take
  // more (a crafted shape gets an error naming the node). 0: the machine's physical memory.
  uint64_t max_tensor_bytes = 0;
  // With shapes_vary: the model's fusion answers shared by all its plans (fusion_decisions.hpp).
  FusionDecisions* fusion_decisions = nullptr;
  // The original bytes of a constant whose every reader packed it (through `weights`) are
  // given back to the system as stage 7 goes (release_sources.hpp). Only for an executor that
  // owns its model and will build no graph from it other than this plan's (cpu::Executor).
  bool release_packed_sources = false;
};

// An output of `dtype` and `shape` over `buffer` (bytes, kept by the caller from run to run),
// which is replaced by a larger one (by a quarter at least) when it is too small, and by a new
// one when anyone still holds an output over it: a new input shape's output faults in no fresh
// pages where the last output's buffer is large enough and no one kept it (a segmentation
// model's output is megabytes). The output holds the buffer while anyone holds the output.
Tensor output_in_buffer(Tensor& buffer, DType dtype, const Shape& shape);

class Graph {
 public:
  // `g` must have static shapes everywhere; it must outlive this object. Runs stages 4-8
  // of the compile pipeline (cpu/compile_pipeline.hpp): builds the runtime nodes, runs the
  // CPU graph optimizer, prepares primitives and layouts and plans memory.
  // Threads: a Graph holds oneDNN primitives, whose library-managed scratchpad belongs
  // to the thread that created them; build, run and destroy a Graph on one thread (the
  // cpu::Executor keeps one Graph per thread and plan for that reason). Graphs on
  // different threads may run at the same time.
  explicit Graph(std::shared_ptr<const ir::Graph> g, const GraphOptions& options = {});
  // run_runtime_stages (compile_pipeline.hpp) runs the stages below in order
  friend void run_runtime_stages(Graph& g, const GraphOptions& options);
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Inputs in graph input order (already checked against the declared types).
  // `profile`, when given, gets one row per runtime node of this run.
  // `buffers` (may be null): the caller's output buffers, one per output, kept from run to run
  // (output_in_buffer): the outputs are written into them.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, std::vector<ProfilingInfo>* profile = nullptr,
                          std::vector<Tensor>* buffers = nullptr);

  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  const std::vector<Edge*>& output_edges() const { return output_edges_; }

  // ---- editing, for the optimizer passes (before primitives are prepared) ----
  // Nodes reading e, in the order they were lowered (O(1): from an index that absorb() and
  // add_input() keep; passes change node inputs only through them).
  std::vector<Node*> consumers(const Edge* e) const;
  // The same list in place, without a copy: valid until the graph's next edit (a reader that
  // edits the graph while it iterates takes consumers()).
  const std::vector<Node*>& readers_of(const Edge* e) const;
  // Appends input `e` to `n` (a sum post-op's operand).
  void add_input(Node* n, Edge* e);
  bool is_graph_output(const Edge* e) const;
  // Position of n in execution order (-1 if absent).
  int position(const Node* n) const;
  // Fuses `absorbed` (which reads host's output 0, its only reader) into `host`: host
  // takes over absorbed's outputs and its place in execution order (so operands the
  // absorbed node reads are computed by then), and records the fused names. `absorbed`
  // leaves the graph but stays valid until the optimizer passes are done.
  void absorb(Node* host, Node* absorbed);
  // Puts `fresh` where `old` runs (a pass that rebuilds a node as another kind), with the inputs
  // and outputs it was given; `old` leaves the graph but stays valid until the passes are done.
  // Returns `fresh`.
  Node* replace(Node* old, std::unique_ptr<Node> fresh);
  // bf16 mode, kiln_convolutions_until_hot = f32, the graph of a new shape (shapes_vary): its
  // convolutions compute in f32 (bf16 = false), as in f32 mode, and count in quick_nodes(), so
  // the graph rebuilt for a hot shape computes them in bf16. Right after lowering: the fusions
  // depend on the precision (and may replace the convolutions: the graph keeps the count).
  // `log` (may be null) gets how many (kConvolutionsInF32UntilHot).
  void convolutions_in_f32_until_hot(transforms::PassLog* log);
  // bf16 mode: marks the convolutions whose output only bf16 convolutions read (bf16_output).
  void keep_bf16_between_convolutions();
  size_t arena_bytes() const { return arena_bytes_; }  // what this graph needs of its arena
  size_t in_place_nodes() const { return in_place_nodes_; }  // nodes writing over a dead input
  size_t concat_in_place_nodes() const { return concat_in_place_nodes_; }  // Concats whose inputs sit in the output
  // Nodes a hot shape's graph makes otherwise: a quicker-to-create implementation
  // (Node::quick_impl), f32 where bf16 is asked for (convolutions_in_f32_until_hot).
  size_t quick_nodes() const;
  // One line per node: name, type, impl, output layouts (for tests and debugging).
  std::string describe() const;

 private:
  Edge* new_edge(const std::string& name, DType dtype, Shape shape);
  void lower(const GraphOptions& options);  // stage 4: nodes and edges from the ir graph
  void prepare_all(bool release_packed_sources);
  void plan_memory();
  void plan_in_place();
  void plan_concat_in_place();
  void bind_views();
  void bind_arena(void* base);  // the planned buffers at their offsets from `base`

  std::shared_ptr<const ir::Graph> ir_;
  uint64_t max_arena_bytes_ = UINT64_MAX;  // kiln_max_tensor_bytes (set by run_runtime_stages)
  std::vector<Edge*> edges_;  // every edge made, in order, in the chunks below
  // Edges are made in chunks of kEdgeChunk (one allocation each, not one an edge: every new
  // input shape's graph makes hundreds) and never move.
  static constexpr size_t kEdgeChunk = 32;
  std::vector<std::unique_ptr<Edge[]>> edge_chunks_;
  std::vector<std::unique_ptr<Node>> nodes_;  // execution order
  std::vector<std::unique_ptr<Node>> absorbed_;  // fused away by absorb(), freed after the passes
  // consumers()' index (Edge::readers): built on first use (stage 5), kept by absorb(),
  // replace() and add_input(); stages that rewire inputs otherwise drop it (readers_built_).
  mutable bool readers_built_ = false;
  std::vector<Edge*> input_edges_, output_edges_;
  std::shared_ptr<Arena> arena_;
  size_t arena_bytes_ = 0;
  void* arena_base_ = nullptr;             // where the planned buffers are bound now
  std::vector<Edge*> planned_;             // the arena's root buffers ...
  std::vector<size_t> planned_offsets_;    // ... and their offsets
  std::vector<Node*> scratch_nodes_;       // nodes with working memory (Node::scratch_bytes) ...
  std::vector<size_t> scratch_offsets_;    // ... and its offsets
  // Per output edge: whether the run can write the output directly into the returned
  // tensor (an arena root of its own, plain, listed once), else it is copied out.
  std::vector<bool> output_direct_;
  size_t in_place_nodes_ = 0;
  size_t concat_in_place_nodes_ = 0;
  size_t f32_until_hot_ = 0;  // convolutions_in_f32_until_hot's convolutions
  // The performance-counter rows without times (names, types, exec types, fused rows), made
  // on the first profiled run, and the row each node times: a profiled run copies them once
  // instead of building strings between one node's timer and the next.
  std::vector<ProfilingInfo> profile_rows_;
  std::vector<size_t> profile_row_of_node_;
};

}  // namespace kiln::cpu
