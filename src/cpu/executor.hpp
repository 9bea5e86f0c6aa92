#pragma once
// The fast executor. For each distinct set of input shapes it compiles a plan once:
// the ir::Graph is cloned, specialised to those shapes (constant subexpressions folded,
// every shape static) and optimised by the ir passes (for a model whose input shapes vary,
// a copy of its template, on which the ir passes and snippets tokenization ran once:
// compile_pipeline.hpp, plan_ir_stages). Plans are cached by input shapes,
// so repeating shapes cost nothing extra; the cache keeps at most `plan_capacity` plans
// (property kiln_plan_cache_capacity) and drops the least recently used one beyond that,
// with every thread's graphs of it, so a stream of ever new shapes runs in bounded memory.
// A graph whose shapes depend on data (a NonZero's count, NonMaxSuppression's boxes) is cut
// where they first do (transforms/split_at_data_dependent.hpp): the nodes before the cut run
// as a plan of their own on the fast path, the cut's nodes on the reference kernels, and the
// nodes after it through an executor of their own, planned for the shapes the cut produced
// (and cut again there if need be).
//
// Threads: run() may be called from any number of threads at once (the stream workers
// of a compiled model, or the callers' own threads with 0 streams). Every thread runs on
// cpu::Graphs of its own, one per plan, built by that thread on its first run of the
// plan and destroyed by that thread (oneDNN's library scratchpad is per thread); a
// thread's graphs share one arena for their intermediate buffers (one runs at a time),
// grown to the largest plan's need, while plans and packed weights (WeightsCache) are
// shared by all threads. A thread's graphs are destroyed when the Executor is destroyed on that thread,
// else by the thread itself on its next run() of any Executor or when it exits; a thread
// drops its graphs of evicted plans on its next run() of this Executor.
#include <kiln/tensor.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "cpu/compile_pipeline.hpp"
#include "cpu/fusion_decisions.hpp"
#include "cpu/graph.hpp"
#include "cpu/until_hot_chooser.hpp"
#include "cpu/weights_cache.hpp"
#include "runtime/reference_executor.hpp"
#include "transforms/pass_log.hpp"

namespace kiln::cpu {

struct CachedPlan;  // model_cache.hpp

class Executor {
 public:
  // `options.log` and `options.weights` are ignored: every plan keeps its own log, and
  // the executor its own weights cache. `options.shapes_vary` is set when an input of `graph`
  // has a dynamic dim (see kHotRuns).
  static constexpr size_t kDefaultPlanCapacity = 64;
  // `weights`: a weights cache to share (the executor of a tail after a cut shares its
  // model's: the tail's weights are the model's constants, packed once); null: its own.
  explicit Executor(std::shared_ptr<const ir::Graph> graph, GraphOptions options = {},
                    size_t plan_capacity = kDefaultPlanCapacity, std::shared_ptr<WeightsCache> weights = nullptr);
  // An executor whose plan for `cached.shapes` comes from the model cache (model_cache.hpp):
  // stages 0-3 are not run again and the weights cache starts with `cached.packed`. `graph`
  // is the model (or, when the model was not read, the cached graph itself): other shapes
  // plan from it as usual, but run on the reference executor only if `graph` was read.
  Executor(std::shared_ptr<const ir::Graph> graph, GraphOptions options, size_t plan_capacity,
           const CachedPlan& cached, bool graph_is_model);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // `profile`: see Graph::run (rows from the reference executor when the plan falls back).
  // Thread-safe (see above).
  // `buffers`: the caller's output buffers, kept from run to run (Graph::run; the reference
  // executor's runs leave them alone).
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, std::vector<ProfilingInfo>* profile = nullptr,
                          std::vector<Tensor>* buffers = nullptr);

  // Compiles ahead of the first run (compile_model for static shapes): makes the plan for
  // `shapes` and builds the calling thread's graph of it, so a run() of these shapes on this
  // thread only runs. Throws kiln::Error as run() would; a no-op for data-dependent shapes
  // (they run on the reference executor).
  void prepare(const std::vector<Shape>& shapes);

  struct Plan {
    std::shared_ptr<ir::Graph> graph;   // specialised copy (owns what cpu::Graphs point into)
    bool fast = false;                  // shapes are static: runs on cpu::Graphs
    // Shapes depend on data: `graph` is the head (null when no node precedes the cut) and
    // runs as a fast plan's; the cut and the tail run after it (see run_split).
    struct Split {
      std::unique_ptr<runtime::ReferenceExecutor> cut;
      std::shared_ptr<Executor> tail;  // null: nothing follows the cut
      std::vector<std::pair<std::string, Tensor>> feeds;  // constants of the plan the tail reads or the model outputs
    };
    std::shared_ptr<const Split> split;
    bool runs_graph() const { return (fast || split) && graph; }  // has cpu::Graphs
    std::string fallback_reason;        // !fast: why
    bool refused = false;               // !fast and not runnable at all (fallback_reason says why)
    transforms::PassLog log;            // what the ir passes and the CPU optimizer passes did
    // A plan of the template: the entries before `log`'s (the model's and the template's
    // stages), shared by all its plans instead of copied into each; plan_for() and inspect()
    // put them in front of `log` (join_log). Null: `log` is whole.
    std::shared_ptr<const transforms::PassLog> log_head;
    // A cpu::Graph for inspection (tools, tests), built by plan_for() on the calling
    // thread (of the head when the shapes depend on data); null when the plan runs on the
    // reference executor. run() does not use it.
    std::unique_ptr<Graph> cpu;
    bool cpu_logged = false;            // the CPU passes' entries are in `log`
    size_t ir_log_entries = 0;          // of `log`: stages 0-3's (the CPU passes' follow)
    uint64_t last_used = 0;             // LRU clock (mutex_)
    // Set when the cache drops the plan: threads then drop their graphs of it.
    std::shared_ptr<std::atomic<bool>> evicted = std::make_shared<std::atomic<bool>>(false);
  };
  // The plan for these input shapes (compiled on first use), with its inspection graph.
  // For tools and tests on one thread; the plan stays valid for the executor's lifetime
  // even when the cache drops it.
  const Plan& plan_for(const std::vector<Shape>& shapes);
  // The plan for these input shapes and a cpu::Graph of it built now on the calling thread
  // (null when the plan runs on the reference executor), neither kept by the executor beyond
  // its plan cache: what CompiledModel::get_runtime_model describes. (plan_for keeps every
  // plan it returns: a service asking for the runtime model of each new shape grew by a plan
  // and a graph, about 390 KiB for BERT-6, per shape.)
  struct Inspection {
    std::shared_ptr<const Plan> plan;
    std::unique_ptr<Graph> cpu;
  };
  Inspection inspect(const std::vector<Shape>& shapes);
  // The plan made for these shapes, without building anything (null when there is none):
  // what the model cache writes.
  std::shared_ptr<const Plan> find_plan(const std::vector<Shape>& shapes) const;
  size_t cached_plans() const;
  const ir::Graph& graph() const { return *graph_; }  // the model it runs (after stage 0)
  size_t plan_capacity() const { return capacity_; }
  size_t graphs_built() const { return graphs_built_.load(); }  // cpu::Graphs built by run() on all threads
  // Models whose input shapes vary build a plan's graphs with primitives that are quick to
  // create (GraphOptions::shapes_vary); a thread's graph that has run this many times and
  // holds such primitives is built again with oneDNN's first choices (hot_rebuilds()).
  static constexpr size_t kHotRuns = 16;
  size_t hot_rebuilds() const { return hot_rebuilds_.load(); }
  // kiln_convolutions_until_hot = auto, bf16 mode, input shapes that vary, convolutions in the
  // model: what the executor measured and chose (UntilHotChooser::describe); "" otherwise.
  std::string until_hot_choice() const;
  const UntilHotChooser* until_hot_chooser() const { return measure_until_hot_ ? &until_hot_ : nullptr; }
  // run()s that found their input shapes' plan cached / had to make it.
  size_t plan_hits() const { return plan_hits_.load(); }
  size_t plan_misses() const { return plan_misses_.load(); }
  // Milliseconds run()s spent compiling: a new input shape's plan (stages 1-3) and the runtime
  // graphs their threads built for plans (stages 4-8, hot rebuilds included), summed over
  // threads. What a first-seen shape pays besides its inference (kiln_plan_compile_ms).
  double plan_compile_ms() const { return static_cast<double>(plan_compile_ns_.load()) / 1e6; }
  const WeightsCache& weights() const { return *weights_; }
  // The fusion answers its plans share when the input shapes vary (fusion_decisions.hpp).
  const FusionDecisions& fusion_decisions() const { return fusion_decisions_; }
  // The bytes of the calling thread's arena for this executor (0 before its first fast run).
  size_t thread_arena_bytes() const;
  // That arena (null before the thread's first graph of this executor).
  const Arena* thread_arena() const;
  // The bytes of every live thread's arena for this executor (the intermediate tensors).
  size_t arena_bytes() const;
  size_t shared_constants() const;  // distinct folded constants the plans share now
  // Input shapes vary: whether plans are made from the symbolic template (compile_pipeline.hpp:
  // stage 2 ran once) and, when not, why. Made with the first plan; before it, false and "".
  bool uses_ir_template() const;
  std::string ir_template_reason() const;
  // With the template: whether its snippets tokenization (stage 3) was made once, at the first
  // shapes, for every plan, and when not, why (each plan then tokenizes its own shapes).
  bool tokenizes_once() const;
  std::string tokenize_once_reason() const;

 private:
  // plan_compile_ms() += the time since `start`
  void add_compile_time(std::chrono::steady_clock::time_point start) {
    plan_compile_ns_.fetch_add(static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count()));
  }
  // mutex_ held; `hit` (may be null): whether the plan was cached
  std::shared_ptr<Plan> plan_locked(const std::vector<Shape>& shapes, bool* hit = nullptr);
  // mutex_ held: constants the plan's passes computed (folded weights) that equal one an
  // earlier plan computed share its storage, so packed weights are found by address and
  // kept once, however many shapes come (see constant_pool_).
  void share_folded_constants(ir::Graph& g);
  void init_options();  // the constructors' common part: options_ as the plans take them
  // The storage of `g`'s constants goes into model_constants_: every plan has them already, so
  // share_folded_constants leaves them alone (the model's, the template's).
  void remember_constants(const ir::Graph& g);
  // mutex_ held: stages 1-3 of a new plan, from the template when there is one (made now on
  // first use), else from the model; the plan's log gets what they did.
  IrStagesResult plan_ir_stages(const std::vector<Shape>& shapes, Plan& plan);
  Arena* calling_thread_arena() const;  // thread_arena(), to populate
  // mutex_ held: `r` left shapes that depend on data: the plan becomes a head, a cut and a
  // tail (Plan::split); false when the graph cannot be cut (the reference executor runs it)
  bool plan_split(const IrStagesResult& r, Plan& plan);
  std::vector<Tensor> run_split(const std::shared_ptr<Plan>& plan, const std::vector<Shape>& shapes,
                                const std::vector<Tensor>& inputs, std::vector<ProfilingInfo>* profile);
  // The calling thread's graph of `plan` runs `inputs` (thread_graph, then Graph::run); a new
  // shape's graph with kiln_convolutions_until_hot = auto is measured (until_hot_).
  std::vector<Tensor> run_measured(const std::shared_ptr<Plan>& plan, const std::vector<Shape>& shapes,
                                   const std::vector<Tensor>& inputs, std::vector<ProfilingInfo>* profile,
                                   std::vector<Tensor>* buffers);
  // mutex_ not held; `arena`: the calling thread's for this executor (null: the graph's own);
  // `hot`: the shape is frequent, take the fastest implementations however long they take to create
  // `f32_until_hot` (not hot, kiln_convolutions_until_hot = auto): this new shape's convolutions
  // compute in f32 (else bf16)
  // `logged`: the CPU passes write what they did into the plan's log, if it has no account yet
  // (plan_for and inspect, whose callers read it); the graphs run() builds leave it (the passes
  // then format no message: a variable-shape stream builds a graph for every new shape).
  std::unique_ptr<Graph> build_graph(Plan& plan, std::shared_ptr<Arena> arena = nullptr, bool hot = false,
                                     bool f32_until_hot = false, bool logged = true);
  // A new shape's graph built with kiln_convolutions_until_hot = auto, to be measured in its first run.
  struct UntilHotSample {
    bool taken = false;  // thread_graph built one
    bool f32 = false;
    double build_ms = 0, elements = 0;
  };
  // The calling thread's graph of `plan` (built now if the thread has none, or rebuilt with
  // the fastest implementations once the shape is hot); `count_run`: this is a run of it.
  // `sample` (may be null: nothing is measured): set when a graph to measure was built.
  Graph& thread_graph(const std::shared_ptr<Plan>& plan, const std::vector<Shape>& shapes, bool count_run,
                      UntilHotSample* sample = nullptr);

  transforms::PassLog model_log_;  // what stage 0 did to the model (every plan's log starts with it)
  // options_.shapes_vary: stages 1-2 on symbolic shapes, made with the first plan (mutex_)
  std::optional<IrTemplate> template_;
  transforms::PassLog template_log_;  // model_log_, then what the template's stages did
  std::shared_ptr<const transforms::PassLog> template_log_head_;  // a copy of it, made as it changes: Plan::log_head
  static void join_log(Plan& plan);   // log_head's entries into log (mutex_)
  bool template_checked_ = false;     // compared with the per-shape stages (plan_ir_stages)
  std::shared_ptr<const ir::Graph> graph_;
  std::string value_without_fast_path_;  // a value of graph_ no plan has buffers for, or ""
  GraphOptions options_;
  std::unique_ptr<runtime::ReferenceExecutor> reference_;  // null: the model was not read (cached plan)
  std::shared_ptr<WeightsCache> weights_;
  FusionDecisions fusion_decisions_;  // shared by the plans when options_.shapes_vary
  std::map<std::vector<Shape>, std::shared_ptr<Plan>> plans_;
  // The tails after a cut (Plan::Split) the plans hold, by the cut's node names (the model's
  // tail) or by transforms::tail_key (a plan's own): shared by the plans that cut alike (mutex_)
  std::map<std::string, std::weak_ptr<Executor>> tails_;
  size_t capacity_;
  uint64_t clock_ = 0;                                  // LRU clock (mutex_)
  std::atomic<uint64_t> evictions_{0};                  // threads rescan their graphs when it moves
  std::vector<std::shared_ptr<Plan>> inspected_;        // plans plan_for() returned (kept alive)
  std::vector<std::weak_ptr<Arena>> arenas_;            // every thread's arena for this executor
  // Folded constants of the plans, by a hash of their type and shape; an entry only the pool holds
  // (its plans and packed weights are gone) is dropped when the next plan is made.
  std::unordered_multimap<size_t, Tensor> constant_pool_;
  std::unordered_set<const void*> model_constants_;     // the storage of graph_'s own constants
  mutable std::mutex mutex_;
  uint64_t id_;                                // key of this executor's graphs in each thread
  std::shared_ptr<std::atomic<bool>> alive_;   // false once destroyed: threads drop its graphs
  std::atomic<size_t> graphs_built_{0}, hot_rebuilds_{0};
  std::atomic<size_t> cold_runs_{0};  // runs of graphs that were not hot rebuilds
  bool measure_until_hot_ = false;    // kiln_convolutions_until_hot = auto applies (init_options)
  UntilHotChooser until_hot_;
  std::atomic<size_t> plan_hits_{0}, plan_misses_{0};
  std::atomic<uint64_t> plan_compile_ns_{0};  // plan_compile_ms()
};

}  // namespace kiln::cpu
