#include "cpu/executor.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "core/heap_headroom.hpp"
#include "core/strings.hpp"
#include "cpu/compile_pipeline.hpp"
#include "cpu/headroom_faulting.hpp"
#include "cpu/model_cache.hpp"
#include "transforms/compute_fp16_in_f32.hpp"
#include "transforms/split_at_data_dependent.hpp"
#include "transforms/specialize_symbolic.hpp"

namespace kiln::cpu {

namespace {

// A cpu::Graph this thread built for one plan, and that plan's eviction flag.
struct ThreadGraph {
  std::shared_ptr<std::atomic<bool>> evicted;
  std::unique_ptr<Graph> graph;
  size_t runs = 0;  // of `graph`
  bool hot = false;  // `graph` is the hot rebuild
};

// A new plan's objects (stage 1's ir copy, then the runtime graph of the thread that runs it)
// are allocated on that thread and kept with the plan: heap room for them first, in a few large
// steps (core/heap_headroom.hpp). A plan keeps 0.3-0.7 MiB (mobilenet_v3_small, EfficientNet-B0);
// making room took a new shape of those 0.81 -> 0.71 and 1.86 -> 1.73 ms (stages 1-8, medians
// of 10 and 6 interleaved runs of 60 shapes), 88 and 161 mprotect calls a plan down to 8 and 17.
constexpr size_t kPlanHeadroom = size_t{1} << 20;
// Set by plan_locked's room, taken by the graph this thread builds next (no second reservation).
thread_local bool t_plan_headroom = false;

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// The cpu::Graphs this thread built for one Executor, one per plan.
struct ThreadGraphs {
  std::shared_ptr<std::atomic<bool>> alive;  // the Executor's flag
  std::shared_ptr<Arena> arena = std::make_shared<Arena>();  // shared by the graphs below (one runs at a time)
  std::map<std::vector<Shape>, ThreadGraph> graphs;
  uint64_t evictions_seen = 0;               // the Executor's evictions_ when last scanned
  void drop_evicted() {
    for (auto it = graphs.begin(); it != graphs.end();)
      it = it->second.evicted && it->second.evicted->load() ? graphs.erase(it) : std::next(it);
  }
};

// Every thread's graphs, by executor id. Destroyed with the thread, on the thread.
thread_local bool t_registry_alive = false;  // trivially destructible: readable while thread_locals go away
struct ThreadRegistry {
  std::unordered_map<uint64_t, ThreadGraphs> by_executor;
  ThreadRegistry() { t_registry_alive = true; }
  // Graphs are destroyed outside the map: a graph may own executors of its own (an If's
  // branches), whose destructors erase their entries from it.
  ~ThreadRegistry() {
    while (!by_executor.empty()) {
      auto node = by_executor.extract(by_executor.begin());
    }
    t_registry_alive = false;
  }
  // Drops the graphs of executors destroyed on other threads.
  void prune() {
    std::vector<uint64_t> dead;
    for (auto& [id, graphs] : by_executor)
      if (!graphs.alive->load()) dead.push_back(id);
    for (uint64_t id : dead) {
      auto node = by_executor.extract(id);
    }
  }
};
thread_local ThreadRegistry t_registry;
thread_local bool t_registry_touched = false;  // t_registry was constructed on this thread

ThreadRegistry* registry() {
  if (t_registry_touched && !t_registry_alive) return nullptr;  // the thread is exiting
  t_registry_touched = true;
  return &t_registry;
}

std::atomic<uint64_t> g_next_executor_id{1};

// A value the runtime graph has no buffers for (string tensors, sequences, optionals), or "".
std::string value_without_fast_path(const ir::Graph& g) {
  auto unfit = [](const ir::Value* v) { return v && (v->type.dtype == DType::string || v->type.kind != ValueKind::tensor); };
  for (const ir::Value* v : g.inputs())
    if (unfit(v)) return v->name();
  for (const ir::Node* n : g.nodes())
    for (const ir::Value* v : n->outputs())
      if (unfit(v)) return v->name();
  return "";
}

// A value of an 8- / 4-bit type left after the IR passes (constant folding turns weights
// stored that way into floats), or "": the CPU nodes do not take them.
std::string narrow_value(const ir::Graph& g) {
  for (const ir::Value* v : g.inputs())
    if (is_narrow(v->type.dtype)) return v->name();
  for (const ir::Node* n : g.nodes())
    for (const ir::Value* v : n->outputs())
      if (v && is_narrow(v->type.dtype)) return v->name();
  return "";
}

// The model the executor runs: `graph`, or for a model stored in fp16 a copy that computes in
// f32 (stage 0 of compile_pipeline.hpp, once per model); `log` gets what it did.
std::shared_ptr<const ir::Graph> model_to_run(std::shared_ptr<const ir::Graph> graph, const GraphOptions& options,
                                              transforms::PassLog* log) {
  if (options.disabled_passes.count(transforms::kComputeFp16InF32) || !transforms::has_fp16_values(*graph))
    return graph;
  std::shared_ptr<ir::Graph> g = graph->clone();
  if (transforms::compute_fp16_in_f32(*g, log) == 0) return graph;
  return g;
}

}  // namespace

Executor::Executor(std::shared_ptr<const ir::Graph> graph, GraphOptions options, size_t plan_capacity,
                   std::shared_ptr<WeightsCache> weights)
    : graph_(model_to_run(graph, options, &model_log_)),
      options_(std::move(options)),
      reference_(std::make_unique<runtime::ReferenceExecutor>(graph_)),
      weights_(weights ? std::move(weights) : std::make_shared<WeightsCache>()),
      capacity_(std::max<size_t>(plan_capacity, 1)),
      id_(g_next_executor_id.fetch_add(1)),
      alive_(std::make_shared<std::atomic<bool>>(true)) {
  reference_->set_max_tensor_bytes(max_tensor_bytes(options_));  // shapes known only at run time
  init_options();
}

Executor::Executor(std::shared_ptr<const ir::Graph> graph, GraphOptions options, size_t plan_capacity,
                   const CachedPlan& cached, bool graph_is_model)
    : graph_(graph_is_model ? model_to_run(graph, options, &model_log_) : std::move(graph)),
      options_(std::move(options)),
      weights_(std::make_shared<WeightsCache>()),
      capacity_(std::max<size_t>(plan_capacity, 1)),
      id_(g_next_executor_id.fetch_add(1)),
      alive_(std::make_shared<std::atomic<bool>>(true)) {
  options_.release_packed_sources = false;  // the cached weights live in the cache's file mapping
  if (graph_is_model) {
    reference_ = std::make_unique<runtime::ReferenceExecutor>(graph_);
    reference_->set_max_tensor_bytes(max_tensor_bytes(options_));
  }
  init_options();
  for (const CachedPlan::Packed& p : cached.packed) weights_->seed(p.source, p.key, p.desc, p.packed);
  auto plan = std::make_shared<Plan>();
  plan->graph = cached.graph;
  plan->fast = true;
  plan->log = cached.log;
  plan->ir_log_entries = plan->log.entries.size();
  plan->last_used = ++clock_;
  plans_[cached.shapes] = std::move(plan);
}

void Executor::init_options() {
  options_.log = nullptr;
  options_.weights = nullptr;
  options_.arena = nullptr;
  for (const ir::Value* in : graph_->inputs())
    if (!in->type.shape.is_static()) options_.shapes_vary = true;
  // one plan only (the static shapes'): no later plan will need the originals packed weights replace
  options_.release_packed_sources = options_.release_packed_sources && !options_.shapes_vary;
  remember_constants(*graph_);
  value_without_fast_path_ = value_without_fast_path(*graph_);  // the model's, so every plan's
  if (options_.convolutions_until_hot == GraphOptions::UntilHot::measure) {
    // only a bf16 model whose shapes vary and that has convolutions has anything to choose
    const auto& nodes = graph_->nodes();
    measure_until_hot_ = options_.bf16 && options_.shapes_vary &&
                         std::any_of(nodes.begin(), nodes.end(), [](const ir::Node* n) {
                           return n->op_type() == "Conv" && n->is_onnx_domain();
                         });
    // (options_ keep `measure`: a tail's executor after a cut measures its own; build_graph
    // gives each graph bf16 or f32)
  }
}

void Executor::remember_constants(const ir::Graph& g) {
  for (const ir::Node* n : g.nodes())
    for (const ir::Value* v : n->inputs())
      if (v && v->is_constant()) model_constants_.insert(v->constant().raw());
}

void Executor::share_folded_constants(ir::Graph& g) {
  constexpr size_t kMinBytes = 4096;  // small ones cost more to hash than they weigh
  for (auto it = constant_pool_.begin(); it != constant_pool_.end();)
    it = it->second.use_count() == 1 ? constant_pool_.erase(it) : std::next(it);
  std::unordered_set<ir::Value*> seen;
  for (ir::Node* n : g.nodes()) {
    for (ir::Value* v : n->inputs()) {
      if (!v || !v->is_constant()) continue;
      const Tensor& t = v->constant();
      // the model's own constants are shared by every plan already; wrapped memory is not ours
      if (t.byte_size() < kMinBytes || t.use_count() == 0 || model_constants_.count(t.raw())) continue;
      if (!seen.insert(v).second) continue;
      // keyed by type and shape, compared byte for byte only with those alike: a folded
      // constant whose shape varies with the input (a position table sliced to the length)
      // is never read twice
      size_t h = std::hash<int>()(static_cast<int>(t.dtype()));
      for (int64_t d : t.shape()) h = h * 1000003u ^ std::hash<int64_t>()(d);
      bool shared = false;
      for (auto [it, end] = constant_pool_.equal_range(h); it != end && !shared; ++it) {
        const Tensor& p = it->second;
        if (p.dtype() != t.dtype() || p.shape() != t.shape() || std::memcmp(p.raw(), t.raw(), t.byte_size()) != 0)
          continue;
        if (p.raw() != t.raw()) v->set_constant(p);  // `t` is gone from here on
        shared = true;
      }
      if (!shared) constant_pool_.emplace(h, t);
    }
  }
}

size_t Executor::shared_constants() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return constant_pool_.size();
}

Executor::~Executor() {
  alive_->store(false);
  // this thread's graphs go now (destroyed out of the map: see ~ThreadRegistry); other threads
  // drop theirs on their next run() or exit
  if (t_registry_touched && t_registry_alive) {
    auto node = t_registry.by_executor.extract(id_);
  }
}

std::shared_ptr<Executor::Plan> Executor::plan_locked(const std::vector<Shape>& shapes, bool* hit) {
  auto it = plans_.find(shapes);
  if (hit) *hit = it != plans_.end();
  if (it != plans_.end()) {
    it->second->last_used = ++clock_;
    return it->second;
  }
  // weights given back: a new plan would read zeros. Refused, and not kept: the one plan stays
  if (options_.release_packed_sources && !plans_.empty() && weights_->released_bytes() > 0) {
    auto refused = std::make_shared<Plan>();
    refused->refused = true;
    refused->fallback_reason =
        "the compiled model took the model over and gave back the original bytes of the weights it packed for "
        "its static input shapes; compile the model again (keeping your own reference to it) to plan other shapes";
    return refused;
  }
  // full: drop the least recently used plan (threads drop their graphs of it on their next run)
  while (plans_.size() >= capacity_) {
    auto lru = std::min_element(plans_.begin(), plans_.end(),
                                [](const auto& a, const auto& b) { return a.second->last_used < b.second->last_used; });
    lru->second->evicted->store(true);
    plans_.erase(lru);
    evictions_.fetch_add(1);
  }
  auto plan = std::make_shared<Plan>();
  plan->last_used = ++clock_;
  if (!template_ || !template_->graph) plan->log = model_log_;  // a template's plans share theirs (log_head)
  if (const std::string& v = value_without_fast_path_; !v.empty()) {
    plan->fallback_reason = "'" + v + "' holds strings, a sequence or an optional, which run on the reference kernels";
    return plans_[shapes] = std::move(plan);
  }
  if (!reference_) {  // a cached executor of a model not read: only the cached shapes run
    plan->fallback_reason = "the model cache holds this model for other input shapes";
    return plans_[shapes] = std::move(plan);
  }
  reserve_heap_headroom(kPlanHeadroom);
  IrStagesResult r;
  if (hit)  // at an inference (compile_model's builds keep the whole team for their own work):
            // the room's pages faulted in beside stages 1-3, which make no oneDNN primitives
    run_while_faulting_in_headroom([&] { r = plan_ir_stages(shapes, *plan); });
  else
    r = plan_ir_stages(shapes, *plan);
  plan->graph = r.graph;
  if (r.all_static) {
    share_folded_constants(*plan->graph);
    if (const std::string v = narrow_value(*plan->graph); !v.empty()) {
      plan->fallback_reason = "'" + v + "' holds an 8- or 4-bit type, which runs on the reference kernels";
    } else {
      plan->fast = true;
    }
  } else if (!plan_split(r, *plan) && plan->fallback_reason.empty()) {
    plan->fallback_reason = "the shape of '" + r.first_dynamic + "' depends on data";
  }
  plan->ir_log_entries = (plan->log_head ? plan->log_head->entries.size() : 0) + plan->log.entries.size();
  t_plan_headroom = plan->runs_graph();  // room left for the graph this thread builds of it next
  return plans_[shapes] = std::move(plan);
}

void Executor::join_log(Plan& plan) {
  if (!plan.log_head) return;
  std::vector<transforms::PassLog::Entry> entries = plan.log_head->entries;
  entries.insert(entries.end(), plan.log.entries.begin(), plan.log.entries.end());
  plan.log.entries = std::move(entries);
  plan.log_head.reset();
}

bool Executor::plan_split(const IrStagesResult& r, Plan& plan) {
  if (options_.disabled_passes.count(transforms::kSplitAtDataDependentShapes)) return false;
  if (options_.cuts_before >= GraphOptions::kMaxCuts) {  // a chain of cuts so long only a crafted model has it
    plan.fallback_reason = cat("the shape of '", r.first_dynamic, "' depends on data, after ", options_.cuts_before,
                               " cuts at such shapes before it (at most ", GraphOptions::kMaxCuts, ")");
    return false;
  }
  std::optional<transforms::DataSplit> s = transforms::split_at_data_dependent_shapes(*r.graph, graph_.get());
  if (!s) return false;
  auto split = std::make_shared<Plan::Split>();
  const size_t head_nodes = s->head->num_nodes();  // before the head's fusions
  if (head_nodes > 0) {
    run_static_ir_stages(*s->head, options_, &plan.log);  // 2-3, as a static plan's
    share_folded_constants(*s->head);
    if (!narrow_value(*s->head).empty()) return false;
    plan.graph = s->head;
  } else {
    plan.graph = nullptr;
  }
  // a constant the head reads may be given back once packed (release_packed_sources): the
  // parts after it keep a copy of their own
  std::unordered_set<const void*> head_constants;
  for (const ir::Node* n : s->head->nodes())
    for (const ir::Value* v : n->inputs())
      if (v && v->is_constant()) head_constants.insert(v->constant().raw());
  for (ir::Graph* part : {s->cut.get(), s->tail.get()})
    for (const ir::Node* n : part ? part->nodes() : std::vector<ir::Node*>{})
      for (ir::Value* v : n->inputs())
        if (v && v->is_constant() && head_constants.count(v->constant().raw())) v->set_constant(v->constant().clone());
  split->cut = std::make_unique<runtime::ReferenceExecutor>(s->cut);
  split->cut->set_max_tensor_bytes(max_tensor_bytes(options_));
  split->feeds = std::move(s->feeds);
  if (s->tail) {
    // the model's tail is the same graph for every plan cut there, and a tail of this plan's
    // own graph the same as another plan's where their keys are: one executor keeps its plans
    // (held by the plans: a tail no plan holds any more goes, with its plans)
    for (auto it = tails_.begin(); it != tails_.end();) it = it->second.expired() ? tails_.erase(it) : std::next(it);
    const std::string key = s->tail_from_model ? "model " + s->cut_key : transforms::tail_key(*s->tail);
    std::weak_ptr<Executor>& slot = tails_[key];
    std::shared_ptr<Executor> shared = slot.lock();
    if (!shared) {
      GraphOptions o = options_;
      o.shapes_vary = false;  // the tail's executor sets it: its inputs have unknown dims
      o.cuts_before = options_.cuts_before + 1;
      shared = std::make_shared<Executor>(s->tail, o, capacity_, weights_);
      slot = shared;
    }
    split->tail = std::move(shared);
  }
  plan.split = std::move(split);
  plan.fallback_reason = cat("the shape of '", s->first_dynamic, "' depends on data (", s->cut_node, "): ", head_nodes,
                             " nodes before it run on the fast path, ", s->cut_nodes, " on the reference kernels, and ",
                             s->tail_nodes, " after it are planned for the shapes each inference gives them");
  plan.log.applied(transforms::kSplitAtDataDependentShapes, r.graph->name.empty() ? "graph" : r.graph->name,
                   plan.fallback_reason);
  return true;
}

std::vector<Tensor> Executor::run_split(const std::shared_ptr<Plan>& plan, const std::vector<Shape>& shapes,
                                        const std::vector<Tensor>& inputs, std::vector<ProfilingInfo>* profile) {
  const Plan::Split& split = *plan->split;
  std::unordered_map<std::string, Tensor> values;  // by name: the model's inputs, then each part's outputs
  const auto& gin = graph_->inputs();
  for (size_t i = 0; i < gin.size(); ++i) values[gin[i]->name()] = inputs[i];
  for (const auto& [name, t] : split.feeds) values[name] = t;
  std::vector<ProfilingInfo> rows, part_rows;
  auto gather = [&](const ir::Graph& part) {
    std::vector<Tensor> in;
    in.reserve(part.inputs().size());
    for (const ir::Value* v : part.inputs()) {
      auto it = values.find(v->name());
      KILN_CHECK(it != values.end(), cat("graph '", graph_->name, "': no value '", v->name(), "' for ", part.name));
      in.push_back(it->second);
    }
    return in;
  };
  auto keep = [&](const ir::Graph& part, std::vector<Tensor> out) {
    for (size_t i = 0; i < out.size(); ++i) values[part.outputs()[i]->name()] = std::move(out[i]);
    if (profile) rows.insert(rows.end(), part_rows.begin(), part_rows.end());
  };
  std::vector<ProfilingInfo>* prof = profile ? &part_rows : nullptr;
  if (plan->graph) keep(*plan->graph, run_measured(plan, shapes, inputs, prof, nullptr));
  keep(split.cut->graph(), split.cut->run(gather(split.cut->graph()), nullptr, prof));
  if (split.tail) {
    const ir::Graph& tail = *split.tail->graph_;
    keep(tail, split.tail->run(gather(tail), prof));
  }
  std::vector<Tensor> out;
  out.reserve(graph_->outputs().size());
  for (const ir::Value* v : graph_->outputs()) {
    auto it = values.find(v->name());
    if (it == values.end() && v->is_constant()) {
      out.push_back(v->constant());
      continue;
    }
    KILN_CHECK(it != values.end(), cat("graph '", graph_->name, "': no part computed the output '", v->name(), "'"));
    out.push_back(it->second);
  }
  if (profile) *profile = std::move(rows);
  return out;
}

IrStagesResult Executor::plan_ir_stages(const std::vector<Shape>& shapes, Plan& plan) {
  if (options_.shapes_vary && !template_) {
    template_log_ = model_log_;
    template_ = run_ir_template_stages(*graph_, options_, &template_log_);
    template_log_head_ = std::make_shared<const transforms::PassLog>(template_log_);
    if (template_->graph) remember_constants(*template_->graph);  // weights it folded are every plan's
  }
  if (template_ && template_->graph) {
    // every plan's log starts with the template's: one shared copy (a copy per plan was
    // about 300 allocations a new shape for mobilenet_v3_small)
    plan.log = {};
    plan.log_head = template_log_head_;
    std::optional<IrStagesResult> r;
    try {
      r = instantiate_ir_template(*template_, shapes, options_, &plan.log);
      if (!r->all_static) r.reset();
    } catch (const Error&) {
      // e.g. a -1 the template's Reshape cannot resolve for an empty dim: the model says what holds
    }
    if (r && !template_checked_) {
      template_checked_ = true;
      // The template must fuse what the per-shape stages fuse. A model whose dims are fixed
      // inside behind inputs declared dynamic (constant Reshape targets of one shape) does not:
      // on symbols its shapes disagree where at that shape they are equal. Asked once, on the
      // first shapes the template takes; such a model keeps the per-shape stages.
      transforms::PassLog per_shape_log = model_log_;
      IrStagesResult p = run_ir_stages(*graph_, shapes, options_, &per_shape_log);
      if (p.all_static && p.graph->num_nodes() < r->graph->num_nodes()) {
        template_->reason = cat("at the first input shapes the per-shape stages leave ", p.graph->num_nodes(),
                                " nodes and the template ", r->graph->num_nodes(),
                                ": the model fuses less on symbolic shapes (dims fixed inside it?)");
        template_->graph.reset();
        per_shape_log.skipped(transforms::kSymbolicShapes, graph_->name.empty() ? "graph" : graph_->name,
                              template_->reason);
        plan.log = per_shape_log;
        plan.log_head.reset();
        return p;
      }
      // stage 3 once from now on, where the template's Subgraphs are these shapes' own
      tokenize_ir_template(*template_, shapes, *r->graph, options_, &template_log_);
      template_log_head_ = std::make_shared<const transforms::PassLog>(template_log_);  // later plans' head
      if (template_->tokenized) remember_constants(*template_->tokenized);
    }
    if (r) return std::move(*r);
    plan.log = model_log_;
    plan.log_head.reset();
  }
  return run_ir_stages(*graph_, shapes, options_, &plan.log);  // compile_pipeline.hpp, stages 1-3
}

bool Executor::uses_ir_template() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return template_ && template_->graph;
}

bool Executor::tokenizes_once() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return template_ && template_->graph && template_->tokenized;
}

std::string Executor::tokenize_once_reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return template_ ? template_->tokenize_reason : "";
}

std::string Executor::ir_template_reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return template_ ? template_->reason : "";
}

std::unique_ptr<Graph> Executor::build_graph(Plan& plan, std::shared_ptr<Arena> arena, bool hot, bool f32_until_hot,
                                             bool logged) {
  GraphOptions o = options_;
  if (o.convolutions_until_hot == GraphOptions::UntilHot::measure)  // thread_graph measured which
    o.convolutions_until_hot = f32_until_hot && !hot ? GraphOptions::UntilHot::f32 : GraphOptions::UntilHot::bf16;
  o.shape_agnostic = o.shapes_vary;  // kiln's kernels stay in a hot rebuild: they are the fast ones
  if (hot) o.shapes_vary = false;
  o.weights = weights_.get();
  if (options_.shapes_vary) o.fusion_decisions = &fusion_decisions_;  // hot rebuilds too: the same fusions
  o.arena = std::move(arena);
  transforms::PassLog log;
  if (logged) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!plan.cpu_logged) o.log = &log;
  }
  auto g = std::make_unique<Graph>(plan.graph, o);
  std::lock_guard<std::mutex> lock(mutex_);
  if (o.log && !plan.cpu_logged) {  // every graph of a plan is optimised alike: keep one account
    plan.log.entries.insert(plan.log.entries.end(), log.entries.begin(), log.entries.end());
    plan.cpu_logged = true;
  }
  return g;
}

const Executor::Plan& Executor::plan_for(const std::vector<Shape>& shapes) {
  std::shared_ptr<Plan> p;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    p = plan_locked(shapes);
    join_log(*p);
    if (std::find(inspected_.begin(), inspected_.end(), p) == inspected_.end()) inspected_.push_back(p);
    if (!p->runs_graph() || p->cpu) return *p;
  }
  auto g = build_graph(*p);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!p->cpu) p->cpu = std::move(g);
  return *p;
}

Executor::Inspection Executor::inspect(const std::vector<Shape>& shapes) {
  std::shared_ptr<Plan> p;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    p = plan_locked(shapes);
    join_log(*p);
  }
  Inspection out;
  if (p->runs_graph()) out.cpu = build_graph(*p);
  out.plan = std::move(p);
  return out;
}

std::shared_ptr<const Executor::Plan> Executor::find_plan(const std::vector<Shape>& shapes) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = plans_.find(shapes);
  return it == plans_.end() ? nullptr : it->second;
}

Arena* Executor::calling_thread_arena() const {
  if (!t_registry_touched || !t_registry_alive) return nullptr;
  auto it = t_registry.by_executor.find(id_);
  return it == t_registry.by_executor.end() ? nullptr : it->second.arena.get();
}

const Arena* Executor::thread_arena() const { return calling_thread_arena(); }

size_t Executor::thread_arena_bytes() const {
  const Arena* a = thread_arena();
  return a ? a->capacity() : 0;
}

size_t Executor::arena_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t total = 0;
  for (const std::weak_ptr<Arena>& w : arenas_)
    if (std::shared_ptr<Arena> a = w.lock()) total += a->capacity();
  return total;
}

size_t Executor::cached_plans() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return plans_.size();
}

std::vector<Tensor> Executor::run(const std::vector<Tensor>& inputs, std::vector<ProfilingInfo>* profile,
                                  std::vector<Tensor>* buffers) {
  const auto& gin = graph_->inputs();
  KILN_CHECK(inputs.size() == gin.size(),
             "graph '" + graph_->name + "' expects " + std::to_string(gin.size()) + " inputs, got " +
                 std::to_string(inputs.size()));
  std::unordered_map<std::string, int64_t> symbols;
  std::vector<Shape> shapes;
  for (size_t i = 0; i < gin.size(); ++i) {
    runtime::check_input(*gin[i], inputs[i], symbols);
    shapes.push_back(inputs[i].shape());
  }
  std::shared_ptr<Plan> plan;  // held for the run: the cache may drop it meanwhile
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto start = std::chrono::steady_clock::now();  // not the wait for another thread's compile
    bool hit = false;
    plan = plan_locked(shapes, &hit);
    (hit ? plan_hits_ : plan_misses_).fetch_add(1);
    if (!hit) add_compile_time(start);
  }
  if (plan->split) return run_split(plan, shapes, inputs, profile);
  if (!plan->fast) {
    KILN_CHECK(!plan->refused, cat("these input shapes: ", plan->fallback_reason));
    KILN_CHECK(reference_, cat("these input shapes: the model was loaded from the model cache "
                               "for other shapes; compile it again (without cache_dir) to run these"));
    return reference_->run(inputs, nullptr, profile);
  }
  return run_measured(plan, shapes, inputs, profile, buffers);
}

std::vector<Tensor> Executor::run_measured(const std::shared_ptr<Plan>& plan, const std::vector<Shape>& shapes,
                                           const std::vector<Tensor>& inputs, std::vector<ProfilingInfo>* profile,
                                           std::vector<Tensor>* buffers) {
  UntilHotSample sample;
  Graph& g = thread_graph(plan, shapes, /*count_run=*/true, &sample);
  if (!sample.taken) return g.run(inputs, profile, buffers);
  const auto start = std::chrono::steady_clock::now();
  std::vector<Tensor> out = g.run(inputs, profile, buffers);
  until_hot_.record(sample.f32, sample.build_ms, ms_since(start), sample.elements);
  return out;
}

std::string Executor::until_hot_choice() const {
  return measure_until_hot_ ? until_hot_.describe() : "";
}

void Executor::prepare(const std::vector<Shape>& shapes) {
  std::shared_ptr<Plan> plan;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    plan = plan_locked(shapes);
  }
  if (!plan->runs_graph()) return;
  thread_graph(plan, shapes, /*count_run=*/false);
  // ahead of time (compile_model): the arena's pages now, not at the first inference's touch
  if (Arena* arena = calling_thread_arena()) arena->populate();
}

Graph& Executor::thread_graph(const std::shared_ptr<Plan>& plan, const std::vector<Shape>& shapes, bool count_run,
                              UntilHotSample* sample) {
  ThreadRegistry* reg = registry();
  KILN_CHECK(reg, "cpu::Executor::run: called while the thread exits");
  reg->prune();
  ThreadGraphs& mine = reg->by_executor[id_];
  if (!mine.alive) {  // this thread's first graph of this executor
    mine.alive = alive_;
    std::lock_guard<std::mutex> lock(mutex_);
    arenas_.push_back(mine.arena);
  }
  if (const uint64_t e = evictions_.load(); e != mine.evictions_seen) {  // graphs of dropped plans go
    mine.drop_evicted();
    mine.evictions_seen = e;
  }
  ThreadGraph& g = mine.graphs[shapes];
  if (!g.graph || g.evicted != plan->evicted) {  // first run, or the plan was dropped and made again
    g.graph.reset();
    // kiln_convolutions_until_hot = auto: the precision the measurements favour for this shape,
    // measured in turn when the graph runs (only run() counts: prepare() is ahead of time)
    const bool measure = measure_until_hot_ && sample;
    bool f32 = false;
    double elements = 0;
    if (measure) {
      for (const Shape& s : shapes) elements += static_cast<double>(shape_size(s));
      const size_t cold = graphs_built_.load() - hot_rebuilds_.load();
      const double runs = cold ? static_cast<double>(cold_runs_.load()) / static_cast<double>(cold) : 1.0;
      f32 = until_hot_.next_f32(elements, std::min(runs, static_cast<double>(kHotRuns)));
    }
    if (!std::exchange(t_plan_headroom, false)) reserve_heap_headroom(kPlanHeadroom);  // another thread's plan
    const auto start = std::chrono::steady_clock::now();
    g.graph = build_graph(*plan, mine.arena, /*hot=*/false, f32, /*logged=*/false);
    if (measure) *sample = {true, f32, ms_since(start), elements};
    if (count_run) add_compile_time(start);
    g.evicted = plan->evicted;
    g.runs = 0;
    g.hot = false;
    graphs_built_.fetch_add(1);
  } else if (count_run && ++g.runs == kHotRuns && g.graph->quick_nodes() > 0) {
    // a frequent shape: worth a second compile with the implementations that run fastest
    g.graph.reset();
    const auto start = std::chrono::steady_clock::now();
    g.graph = build_graph(*plan, mine.arena, /*hot=*/true, /*f32_until_hot=*/false, /*logged=*/false);
    add_compile_time(start);
    g.hot = true;
    graphs_built_.fetch_add(1);
    hot_rebuilds_.fetch_add(1);
  }
  if (count_run && !g.hot) cold_runs_.fetch_add(1);
  return *g.graph;
}

}  // namespace kiln::cpu
