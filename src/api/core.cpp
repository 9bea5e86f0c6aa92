#include <kiln/core.hpp>

#include <omp.h>

#include <algorithm>
#include <condition_variable>
#include <iostream>
#include <latch>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "api/compile_cache.hpp"
#include "api/properties.hpp"
#include "api/runtime_model.hpp"
#include "core/probe_dims.hpp"
#include "core/strings.hpp"
#include "cpu/compile_pipeline.hpp"
#include "cpu/executor.hpp"
#include "cpu/model_cache.hpp"
#include "cpu/stream_executor.hpp"
#include "frontend/onnx/external_data.hpp"
#include "frontend/onnx/onnx_frontend.hpp"
#include "ir/graph.hpp"
#include "ir/op_registry.hpp"
#include "ir/printer.hpp"
#include "runtime/reference_executor.hpp"

namespace kiln {

// ---------------- PortInfo / Model ----------------

std::string PortInfo::shape_string() const {
  if (!rank_known) return "[...]";
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += i ? "," : "";
    if (shape[i] >= 0) s += std::to_string(shape[i]);
    else s += dim_names[i].empty() ? "?" : dim_names[i];
  }
  return s + "]";
}

bool PortInfo::is_static() const {
  return kind == ValueKind::tensor && rank_known && std::all_of(shape.begin(), shape.end(), [](int64_t d) { return d >= 0; });
}

static PortInfo port_of(const ir::Value& v) {
  PortInfo p;
  p.name = v.name();
  p.dtype = v.type.dtype;
  p.kind = v.type.kind;
  p.element_kind = v.type.elem_kind;
  p.rank_known = v.type.shape.rank_known;
  for (const ir::Dim& d : v.type.shape.dims) {
    p.shape.push_back(d.is_static() ? d.value : -1);
    p.dim_names.push_back(d.symbol);
  }
  return p;
}

Model::Model(std::shared_ptr<ir::Graph> graph) : graph_(std::move(graph)) {
  for (const ir::Value* v : graph_->inputs()) inputs_.push_back(port_of(*v));
  for (const ir::Value* v : graph_->outputs()) outputs_.push_back(port_of(*v));
}

int Model::opset() const { return graph_->opset_for(""); }
std::string Model::to_string() const { return ir::graph_to_string(*graph_); }

// ---------------- Core ----------------

// Validates every node against the op registry and infers static types.
static std::shared_ptr<Model> make_model(std::shared_ptr<ir::Graph> g) {
  ir::infer_shapes(*g);
  return std::make_shared<Model>(std::move(g));
}

// Anything reading, compiling or running a model throws, as a kiln::Error (the API's promise:
// every failure is one): running out of memory says so and, when given, while `doing` what;
// anything else kiln did not expect is an internal error.
static std::exception_ptr as_kiln_error(std::exception_ptr e, const char* doing = nullptr) {
  try {
    std::rethrow_exception(e);
  } catch (const Error&) {
    return e;
  } catch (const std::bad_alloc&) {
    return std::make_exception_ptr(Error(doing ? cat("out of memory while ", doing) : std::string("out of memory")));
  } catch (const std::exception& x) {
    return std::make_exception_ptr(Error(cat("internal error: ", x.what())));
  } catch (...) {
    return std::make_exception_ptr(Error("internal error: unknown exception"));
  }
}

// Runs `f`; what escapes it leaves as_kiln_error made it.
template <class F>
static auto as_kiln_errors(const char* doing, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (...) {
    std::rethrow_exception(as_kiln_error(std::current_exception(), doing));
  }
}

std::shared_ptr<Model> Core::read_model(const std::string& path) const {
  return as_kiln_errors("reading the model", [&] { return make_model(frontend::load_onnx_file(path)); });
}

std::shared_ptr<Model> Core::read_model_from_memory(const std::string& bytes, const std::string& base_dir) const {
  return as_kiln_errors("reading the model", [&] { return make_model(frontend::load_onnx_bytes(bytes, base_dir)); });
}

struct CompiledModel::Impl {
  std::shared_ptr<Model> model;
  api::Settings settings;
  cpu::StreamLayout layout;
  std::unique_ptr<cpu::Executor> fast;                    // "kiln_executor" = "cpu" (default)
  std::unique_ptr<runtime::ReferenceExecutor> reference;  // "kiln_executor" = "reference"
  // Declared last, so destroyed first: the workers finish (and drop their graphs) while
  // the executors still exist. Null with 0 streams.
  std::unique_ptr<cpu::StreamExecutor> streams;
  std::string cache_status = "off";  // kiln_model_cache: what the model cache did
};

struct InferRequest::Impl {
  std::shared_ptr<CompiledModel::Impl> compiled;
  // under `mutex`:
  mutable std::mutex mutex;
  std::condition_variable idle;
  std::function<void(std::exception_ptr)> callback;
  std::vector<Tensor> inputs;
  bool busy = false;           // queued or running
  int callbacks_running = 0;   // callbacks of finished runs still running
  bool ran = false;            // a run has finished: outputs / error / profile are of it
  std::exception_ptr error;    // of the last run (a kiln::Error)
  std::vector<Tensor> outputs;
  std::vector<ProfilingInfo> profile;  // of the last run (enable_profiling)
  // The outputs' buffers, kept from run to run (cpu::output_in_buffer); only execute() touches
  // them, while the request is busy.
  std::vector<Tensor> output_buffers;
};

namespace {

// The request whose callback this thread is running (its wait() must not wait for itself).
thread_local const InferRequest::Impl* t_in_callback_of = nullptr;

// Runs one request to the end: inference, state, callback. Never throws.
void execute(const std::shared_ptr<InferRequest::Impl>& self, const std::vector<Tensor>& inputs) {
  auto& c = *self->compiled;
  std::vector<Tensor> outputs;
  std::vector<ProfilingInfo> profile;
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(self->mutex);
    self->outputs.clear();  // the request's hold on the last outputs: their buffers are reused unless the user holds them
  }
  try {
    if (!c.streams) omp_set_num_threads(c.layout.threads_per_stream);  // the caller's team (0 streams)
    std::unique_lock<std::mutex> exclusive;
    if (c.settings.exclusive) exclusive = std::unique_lock<std::mutex>(cpu::exclusive_requests_mutex());
    auto* prof = c.settings.profiling ? &profile : nullptr;
    outputs = c.reference ? c.reference->run(inputs, nullptr, prof) : c.fast->run(inputs, prof, &self->output_buffers);
  } catch (...) {
    error = as_kiln_error(std::current_exception());
  }
  // This thread takes and drops its references to the error only under the request's
  // mutex, so the waiting thread that reads it never races with this one freeing it.
  std::function<void(std::exception_ptr)> callback;
  std::exception_ptr callback_error;
  {
    std::lock_guard<std::mutex> lock(self->mutex);
    self->outputs = std::move(outputs);
    self->profile = std::move(profile);
    self->error = std::move(error);
    self->ran = true;
    self->busy = false;
    callback = self->callback;
    if (callback) {
      ++self->callbacks_running;
      callback_error = self->error;
    }
  }
  if (callback) {
    std::exception_ptr thrown;
    const InferRequest::Impl* outer = t_in_callback_of;
    t_in_callback_of = self.get();
    try {
      callback(callback_error);
    } catch (...) {
      thrown = as_kiln_error(std::current_exception());
    }
    t_in_callback_of = outer;
    std::lock_guard<std::mutex> lock(self->mutex);
    callback_error = nullptr;
    if (thrown && !self->busy) self->error = std::move(thrown);
    thrown = nullptr;
    --self->callbacks_running;
  }
  self->idle.notify_all();
}

bool is_idle(const InferRequest::Impl& r) {
  return !r.busy && (r.callbacks_running == 0 || t_in_callback_of == &r);
}

}  // namespace

// The shapes every input declares, when all are static tensors (else none: the plans are
// made when shapes arrive).
static std::optional<std::vector<Shape>> declared_static_shapes(const Model& m) {
  std::vector<Shape> shapes;
  for (const PortInfo& p : m.inputs()) {
    if (!p.is_static()) return std::nullopt;
    shapes.push_back(p.shape);
  }
  return shapes;
}

// A model whose input shapes vary: shapes to compile it at ahead of its first inference, so
// that what no shape changes (stages 0-2 of the compile pipeline, the packed weights, each
// stream's arena and first runtime graph) is done by compile_model, as ONNX Runtime does it
// in its session's creation, and the first inference costs what any new shape costs (BERT-6
// with its 40 MiB of weights: 30-40 ms less). Each dynamic dim takes `probe_dim`
// (core/probe_dims.hpp, which the CLI's default shapes take too): an image's height and width
// 224, so that the kernels chosen by the size of a feature map (Winograd, the taps kernel), and
// the weights they pack, are a real image's (DeepLabV3's first image packed 15 ms of weights for
// them when the probe was 64x64). A symbol has one value everywhere (compile_ahead falls back to
// all 64s where the model does not take 224). None when an input is not a tensor of known rank,
// or when an input would hold more than kProbeMaxElements even with every dim but the batch at 64.
static std::optional<std::vector<Shape>> probe_shapes(const Model& m, bool image_sizes = true) {
  std::unordered_map<std::string, int64_t> symbols;
  std::vector<Shape> shapes;
  for (const ir::Value* in : m.graph()->inputs()) {
    const ir::PartialShape& ps = in->type.shape;
    if (in->type.kind != ValueKind::tensor || !ps.rank_known) return std::nullopt;
    Shape s;
    for (size_t i = 0; i < ps.rank(); ++i) {
      const ir::Dim& d = ps.dims[i];
      const int64_t guess = probe_dim(ps.rank(), i, image_sizes);
      s.push_back(d.is_static() ? d.value : d.is_symbolic() ? symbols.try_emplace(d.symbol, guess).first->second : guess);
    }
    if (exceeds_probe_elements(s)) return image_sizes ? probe_shapes(m, false) : std::nullopt;
    shapes.push_back(std::move(s));
  }
  return shapes;
}

// Builds the plan for `shapes` and every stream's runtime graph of it, on the stream's thread.
static void compile_ahead_at(CompiledModel::Impl& c, const std::vector<Shape>& shapes) {
  if (!c.streams) {
    c.fast->prepare(shapes);
    return;
  }
  const auto n = static_cast<std::ptrdiff_t>(c.streams->streams());
  std::latch started(n), done(n);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  for (std::ptrdiff_t i = 0; i < n; ++i)
    c.streams->submit([&, i] {
      started.arrive_and_wait();
      try {
        c.fast->prepare(shapes);
      } catch (...) {
        errors[static_cast<size_t>(i)] = std::current_exception();
      }
      done.count_down();
    });
  done.wait();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

// compile_model compiles (OpenVINO's contract): for a model of static shapes, the plan and
// every stream's runtime graph (primitives, packed weights, kernels) are built now, on the
// threads that will run them, so the first inference only runs and compile errors surface
// here. One task per stream: each waits until all have started, so every worker takes one.
// A model whose shapes vary is compiled the same way at probe_shapes, where the model takes
// them: an error there (a dim the model needs to be a multiple of something) only means the
// work is left to the first inference.
static void compile_ahead(CompiledModel::Impl& c) {
  if (const std::optional<std::vector<Shape>> shapes = declared_static_shapes(*c.model)) {
    compile_ahead_at(c, *shapes);
  } else if (const std::optional<std::vector<Shape>> probe = probe_shapes(*c.model)) {
    try {
      compile_ahead_at(c, *probe);
    } catch (...) {  // the first inference of a shape the model takes meets what fails here, if anything
      // an image size the model does not take (a multiple of 64, say): the 64s it took before
      const std::optional<std::vector<Shape>> plain = probe_shapes(*c.model, /*image_sizes=*/false);
      if (plain && *plain != *probe) {
        try {
          compile_ahead_at(c, *plain);
        } catch (...) {
        }
      }
    }
  }
}

// The compiled model around `make_fast`'s executor (or the reference executor), with its
// streams, compiled ahead.
using CompiledImpl = std::shared_ptr<CompiledModel::Impl>;
static CompiledImpl assemble(std::shared_ptr<Model> model, const api::Settings& s, const cpu::StreamLayout& layout,
                             const std::function<std::unique_ptr<cpu::Executor>()>& make_fast) {
  auto cm = std::make_shared<CompiledModel::Impl>();
  auto& c = *cm;
  c.model = std::move(model);
  c.settings = s;
  c.layout = layout;
  // oneDNN's primitive cache is the process's: the last compile_model that sets it decides
  if (s.runtime_cache_capacity >= 0) dnnl::set_primitive_cache_capacity(s.runtime_cache_capacity);
  if (s.reference) {
    c.reference = std::make_unique<runtime::ReferenceExecutor>(c.model->graph());
    c.reference->set_max_tensor_bytes(cpu::max_tensor_bytes(s.graph));
  } else {
    c.fast = make_fast();
  }
  if (c.layout.streams > 0) c.streams = std::make_unique<cpu::StreamExecutor>(c.layout);
  if (c.fast) compile_ahead(c);
  return cm;
}

// `owned`: the model was handed over (no one else holds it): the executor may give back the
// weights' original bytes once packed (GraphOptions::release_packed_sources).
static std::unique_ptr<cpu::Executor> plain_executor(const Model& model, const api::Settings& s, bool owned = false) {
  cpu::GraphOptions options = s.graph;
  options.release_packed_sources = owned && s.cache_dir.empty();
  return std::make_unique<cpu::Executor>(model.graph(), options, s.plan_capacity);
}

// compile_model with cache_dir set: the model's compiled form from the cache when it holds
// one for this key, else compiled and written there. `model` is null when compile_model was
// given a path (the model is then read only on a miss).
static CompiledImpl compile_through_cache(std::shared_ptr<Model> model, const std::string& path, const api::Settings& s,
                                          const cpu::StreamLayout& layout) {
  cpu::ModelCache cache(s.cache_dir);
  const std::string key =
      api::cache_key(s, layout, model ? cpu::hash_graph(*model->graph()) : "file " + cache.file_digest(path));
  const std::string file = cache.path_for(key);
  std::string why;
  if (std::optional<cpu::CachedPlan> cached = cache.load(key, &why)) {
    const std::string prefix = cpu::CachedPlan::kExternalNote;
    for (const auto& [name, value] : cached->notes)  // external data files: unchanged?
      if (name.rfind(prefix, 0) == 0) {
        const std::string ext = name.substr(prefix.size());
        std::string now;
        try {
          now = cache.file_digest(ext);
        } catch (const Error&) {
        }
        if (now != value) why = cat("the external data file '", ext, "' changed");
      }
    if (why.empty()) {
      const bool read = model != nullptr;
      if (!model) model = std::make_shared<Model>(cached->graph);
      CompiledImpl cm = assemble(model, s, layout, [&] {
        return std::make_unique<cpu::Executor>(model->graph(), s.graph, s.plan_capacity, *cached, read);
      });
      cm->cache_status = cat("hit: ", file);
      return cm;
    }
  }
  if (!why.empty()) std::cerr << "kiln: model cache: ignoring '" << file << "': " << why << "; compiling the model\n";
  std::vector<std::string> external;
  if (!model) {
    frontend::ExternalFilesRecorder recorder;
    model = make_model(frontend::load_onnx_file(path));
    external = recorder.files;
  }
  CompiledImpl cm = assemble(model, s, layout, [&] { return plain_executor(*model, s); });
  auto& c = *cm;
  const std::optional<std::vector<Shape>> shapes = declared_static_shapes(*model);
  std::shared_ptr<const cpu::Executor::Plan> plan = shapes ? c.fast->find_plan(*shapes) : nullptr;
  if (!shapes) {
    c.cache_status = "not written: the model's input shapes are dynamic (each shape compiles at its first inference)";
  } else if (plan && plan->split) {
    c.cache_status = cat("not written: ", plan->fallback_reason);
  } else if (!plan || !plan->fast) {
    c.cache_status = cat("not written: the model runs on the reference executor (",
                         plan ? plan->fallback_reason : std::string("no plan"), ")");
  } else {
    cpu::CachedPlan cp;
    cp.shapes = *shapes;
    cp.graph = plan->graph;
    cp.log.entries.assign(plan->log.entries.begin(),
                          plan->log.entries.begin() + static_cast<std::ptrdiff_t>(plan->ir_log_entries));
    try {
      for (const std::string& ext : external)
        cp.notes.emplace_back(cpu::CachedPlan::kExternalNote + ext, cache.file_digest(ext));
      cache.save(key, cp, c.fast->weights());
      c.cache_status = cat(why.empty() ? "written: " : "written again: ", file);
    } catch (const Error& e) {
      c.cache_status = cat("not written: ", e.what());
      std::cerr << "kiln: model cache: " << e.what() << "\n";
    }
  }
  return cm;
}

// compile_model's two model overloads; `owned`: the model was handed over and no one else holds it
static CompiledImpl compile_model_impl(const std::shared_ptr<Model>& model, const AnyMap& properties, bool owned) {
  return as_kiln_errors("compiling the model", [&] {
    KILN_CHECK(model, "compile_model: null model");
    api::Settings s = api::parse_properties(properties);
    const cpu::StreamLayout layout = cpu::resolve_streams(s.streams, cpu::CpuTopology::detect());
    return !s.cache_dir.empty() && !s.reference
               ? compile_through_cache(model, "", s, layout)
               : assemble(model, s, layout, [&] { return plain_executor(*model, s, owned); });
  });
}

CompiledModel Core::compile_model(const std::shared_ptr<Model>& model, const AnyMap& properties) const {
  CompiledModel cm;
  cm.impl_ = compile_model_impl(model, properties, false);
  return cm;
}

CompiledModel Core::compile_model(std::shared_ptr<Model>&& model, const AnyMap& properties) const {
  const std::shared_ptr<Model> mine = std::move(model);
  const bool owned = mine && mine.use_count() == 1 && mine->graph() && mine->graph().use_count() == 1;
  CompiledModel cm;
  cm.impl_ = compile_model_impl(mine, properties, owned);
  return cm;
}

CompiledModel Core::compile_model(const std::string& path, const AnyMap& properties) const {
  const api::Settings s = as_kiln_errors("compiling the model", [&] { return api::parse_properties(properties); });
  if (s.cache_dir.empty() || s.reference) return compile_model(read_model(path), properties);
  CompiledModel cm;
  cm.impl_ = as_kiln_errors("compiling the model", [&] {
    return compile_through_cache(nullptr, path, s, cpu::resolve_streams(s.streams, cpu::CpuTopology::detect()));
  });
  return cm;
}

std::string Core::get_property(const std::string& key) const { return api::device_property(key); }

// ---------------- CompiledModel ----------------

static const CompiledModel::Impl& need(const std::shared_ptr<CompiledModel::Impl>& p) {
  KILN_CHECK(p, "CompiledModel is empty (default-constructed)");
  return *p;
}

InferRequest CompiledModel::create_infer_request() const {
  need(impl_);
  InferRequest r;
  r.impl_ = std::make_shared<InferRequest::Impl>();
  r.impl_->compiled = impl_;
  r.impl_->inputs.resize(impl_->model->inputs().size());
  return r;
}

const std::vector<PortInfo>& CompiledModel::inputs() const { return need(impl_).model->inputs(); }
const std::vector<PortInfo>& CompiledModel::outputs() const { return need(impl_).model->outputs(); }

std::string CompiledModel::get_property(const std::string& key) const {
  const auto& c = need(impl_);
  const std::string k = api::canonical_key(key, /*read_only=*/true);
  // the plan cache's counters: the executor's state, not a setting (0 on the reference executor)
  if (k == "kiln_plan_cache_size") return std::to_string(c.fast ? c.fast->cached_plans() : 0);
  if (k == "kiln_plan_cache_hits") return std::to_string(c.fast ? c.fast->plan_hits() : 0);
  if (k == "kiln_plan_cache_misses") return std::to_string(c.fast ? c.fast->plan_misses() : 0);
  if (k == "kiln_plan_compile_ms") return cat(c.fast ? c.fast->plan_compile_ms() : 0.0);
  // kiln_convolutions_until_hot = auto: what was measured and chosen ("" when there is nothing to choose)
  if (k == "kiln_convolutions_until_hot_choice") return c.fast ? c.fast->until_hot_choice() : "";
  if (k == "kiln_model_cache") return c.cache_status;
  if (k == "kiln_weights_bytes") return std::to_string(c.fast ? c.fast->weights().bytes() : 0);
  if (k == "kiln_released_weights_bytes") return std::to_string(c.fast ? c.fast->weights().released_bytes() : 0);
  if (k == "kiln_arena_bytes") return std::to_string(c.fast ? c.fast->arena_bytes() : 0);
  return api::effective_value(k, c.settings, c.layout);
}

RuntimeModel CompiledModel::get_runtime_model(const std::vector<Shape>& input_shapes) const {
  const auto& c = need(impl_);
  std::vector<Shape> shapes = input_shapes;
  const std::vector<PortInfo>& ports = c.model->inputs();
  if (shapes.empty()) {
    for (const PortInfo& p : ports) {
      KILN_CHECK(p.is_static(),
                 cat("get_runtime_model: input '", p.name, "' has the dynamic shape ", p.shape_string(),
                     "; pass the input shapes"));
      shapes.push_back(p.shape);
    }
  }
  KILN_CHECK(shapes.size() == ports.size(),
             cat("get_runtime_model: ", shapes.size(), " input shapes for a model with ", ports.size(), " inputs"));
  RuntimeModel m;
  if (!c.fast) {
    m.reference_reason = "kiln_executor = reference";
    return m;
  }
  const cpu::Executor::Inspection seen =
      as_kiln_errors("compiling the model", [&]() { return c.fast->inspect(shapes); });
  const cpu::Executor::Plan& plan = *seen.plan;
  if (seen.cpu) m = api::describe_runtime_graph(*seen.cpu);
  else m.reference_reason = plan.fallback_reason;
  if (plan.split) m.data_dependent = plan.fallback_reason;
  for (const auto& e : plan.log.entries) m.fusions.push_back({e.pass, e.where, e.message, e.applied});
  return m;
}

// ---------------- InferRequest ----------------

static InferRequest::Impl& need(const std::shared_ptr<InferRequest::Impl>& p) {
  KILN_CHECK(p, "InferRequest is empty (default-constructed)");
  return *p;
}

static void check_not_busy(const InferRequest::Impl& r, const char* what) {
  KILN_CHECK(!r.busy, cat(what, ": the request is busy (queued or running); wait() for it first"));
}

void InferRequest::set_input_tensor(size_t index, const Tensor& t) {
  auto& r = need(impl_);
  std::lock_guard<std::mutex> lock(r.mutex);
  check_not_busy(r, "set_input_tensor");
  KILN_CHECK(index < r.inputs.size(),
             cat("set_input_tensor: index ", index, " out of range, the model has ", r.inputs.size(), " inputs"));
  r.inputs[index] = t;
}

void InferRequest::set_input_tensor(const Tensor& t) {
  auto& r = need(impl_);
  std::lock_guard<std::mutex> lock(r.mutex);
  check_not_busy(r, "set_input_tensor");
  KILN_CHECK(r.inputs.size() == 1,
             cat("set_input_tensor(tensor): the model has ", r.inputs.size(), " inputs; give an index or a name"));
  r.inputs[0] = t;
}

void InferRequest::set_tensor(const std::string& name, const Tensor& t) {
  auto& r = need(impl_);
  std::lock_guard<std::mutex> lock(r.mutex);
  check_not_busy(r, "set_tensor");
  const auto& ins = r.compiled->model->inputs();
  std::vector<std::string> names;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (ins[i].name == name) {
      r.inputs[i] = t;
      return;
    }
    names.push_back(ins[i].name);
  }
  throw Error(cat("set_tensor: the model has no input named '", name, "' (inputs: ", join(names, ", "), ")"));
}

void InferRequest::start_async() {
  auto& r = need(impl_);
  std::vector<Tensor> inputs;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    check_not_busy(r, "start_async");
    const auto& ins = r.compiled->model->inputs();
    for (size_t i = 0; i < ins.size(); ++i)
      KILN_CHECK(r.inputs[i].defined(), cat("infer: input '", ins[i].name, "' was not set"));
    inputs = r.inputs;  // the run reads these (copies share the data)
    r.busy = true;
    r.error = nullptr;
  }
  std::shared_ptr<Impl> self = impl_;
  if (cpu::StreamExecutor* streams = r.compiled->streams.get())
    streams->submit([self, inputs = std::move(inputs)] { execute(self, inputs); });
  else
    execute(self, inputs);
}

void InferRequest::wait() {
  auto& r = need(impl_);
  std::unique_lock<std::mutex> lock(r.mutex);
  r.idle.wait(lock, [&] { return is_idle(r); });
  if (r.error) std::rethrow_exception(r.error);
}

bool InferRequest::wait_for(std::chrono::milliseconds timeout) {
  auto& r = need(impl_);
  std::unique_lock<std::mutex> lock(r.mutex);
  if (!r.idle.wait_for(lock, timeout, [&] { return is_idle(r); })) return false;
  if (r.error) std::rethrow_exception(r.error);
  return true;
}

void InferRequest::set_callback(std::function<void(std::exception_ptr)> callback) {
  auto& r = need(impl_);
  std::lock_guard<std::mutex> lock(r.mutex);
  r.callback = std::move(callback);
}

void InferRequest::infer() {
  start_async();
  wait();
}

std::vector<ProfilingInfo> InferRequest::get_profiling_info() const {
  auto& r = need(impl_);
  std::lock_guard<std::mutex> lock(r.mutex);
  KILN_CHECK(r.compiled->settings.profiling,
             "get_profiling_info: profiling is off; compile the model with enable_profiling = YES (PERF_COUNT)");
  check_not_busy(r, "get_profiling_info");
  KILN_CHECK(r.ran, "get_profiling_info: infer() has not run yet");
  return r.profile;
}

Tensor InferRequest::get_output_tensor(size_t index) const {
  auto& r = need(impl_);
  std::lock_guard<std::mutex> lock(r.mutex);
  check_not_busy(r, "get_output_tensor");
  KILN_CHECK(r.ran, "get_output_tensor: infer() has not run yet");
  if (r.error) {  // the last run failed: no outputs
    std::string why;
    try {
      std::rethrow_exception(r.error);
    } catch (const std::exception& e) {
      why = e.what();
    }
    throw Error(cat("get_output_tensor: infer() has not run successfully; the last run failed: ", why));
  }
  KILN_CHECK(index < r.outputs.size(),
             cat("get_output_tensor: index ", index, " out of range, the model has ", r.outputs.size(), " outputs"));
  return r.outputs[index];
}

Tensor InferRequest::get_tensor(const std::string& name) const {
  const auto& outs = need(impl_).compiled->model->outputs();
  std::vector<std::string> names;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i].name == name) return get_output_tensor(i);
    names.push_back(outs[i].name);
  }
  throw Error(cat("get_tensor: the model has no output named '", name, "' (outputs: ", join(names, ", "), ")"));
}

}  // namespace kiln
