#include <kiln/core.hpp>

#include <sstream>

#include "core/strings.hpp"
#include "frontend/onnx/onnx_frontend.hpp"
#include "ir/graph.hpp"
#include "ir/op_registry.hpp"
#include "ir/printer.hpp"
#include "cpu/executor.hpp"
#include "cpu/graph_optimizer.hpp"

#include <algorithm>
#include "runtime/reference_executor.hpp"

#include <omp.h>

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

static PortInfo port_of(const ir::Value& v) {
  PortInfo p;
  p.name = v.name();
  p.dtype = v.type.dtype;
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

std::shared_ptr<Model> Core::read_model(const std::string& path) const {
  return make_model(frontend::load_onnx_file(path));
}

std::shared_ptr<Model> Core::read_model_from_memory(const std::string& bytes, const std::string& base_dir) const {
  return make_model(frontend::load_onnx_bytes(bytes, base_dir));
}

struct CompiledModel::Impl {
  std::shared_ptr<Model> model;
  int threads = 0;  // 0: all cores
  bool profiling = false;
  std::unique_ptr<cpu::Executor> fast;                  // "kiln_executor" = "cpu" (default)
  std::unique_ptr<runtime::ReferenceExecutor> reference;  // "kiln_executor" = "reference"
};

struct InferRequest::Impl {
  std::shared_ptr<CompiledModel::Impl> compiled;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  std::vector<ProfilingInfo> profile;  // of the last infer() (enable_profiling)
};

namespace {

struct Settings {
  int threads = 0;
  bool reference = false;
  bool profiling = false;
  cpu::GraphOptions graph;
};

const char* const kAcceptedKeys =
    "inference_num_threads (CPU_THREADS_NUM), enable_profiling (PERF_COUNT), kiln_executor, kiln_disable_passes";

bool parse_bool(const std::string& key, const std::string& v) {
  if (v == "YES" || v == "yes" || v == "true" || v == "TRUE" || v == "1") return true;
  if (v == "NO" || v == "no" || v == "false" || v == "FALSE" || v == "0") return false;
  throw Error(cat("property ", key, ": '", v, "' is not one of: YES, NO, true, false, 1, 0"));
}

int parse_int(const std::string& key, const std::string& v, int lo, int hi) {
  size_t used = 0;
  long long x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || v.empty() || x < lo || x > hi)
    throw Error(cat("property ", key, ": '", v, "' is not an integer in [", lo, ", ", hi, "]"));
  return static_cast<int>(x);
}

Settings parse_properties(const AnyMap& properties) {
  Settings s;
  for (auto& [k, v] : properties) {
    if (k == "inference_num_threads" || k == "CPU_THREADS_NUM") {
      s.threads = parse_int(k, v, 0, 4096);
    } else if (k == "enable_profiling" || k == "PERF_COUNT") {
      s.profiling = parse_bool(k, v);
    } else if (k == "kiln_disable_passes") {
      // comma-separated pass names, or all-fusions
      const auto known = cpu::known_pass_names();
      size_t at = 0;
      while (at <= v.size()) {
        size_t comma = v.find(',', at);
        std::string name = v.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        at = comma == std::string::npos ? v.size() + 1 : comma + 1;
        if (name.empty()) continue;
        if (std::find(known.begin(), known.end(), name) == known.end())
          throw Error(cat("property kiln_disable_passes: unknown pass '", name, "'; passes: ", join(known, ", ")));
        s.graph.disabled_passes.insert(name);
      }
    } else if (k == "kiln_executor") {
      if (v != "cpu" && v != "reference")
        throw Error(cat("property kiln_executor: '", v, "' is not one of: cpu, reference"));
      s.reference = v == "reference";
    } else {
      throw Error(cat("unknown property '", k, "'; accepted: ", kAcceptedKeys));
    }
  }
  return s;
}

}  // namespace

CompiledModel Core::compile_model(const std::shared_ptr<Model>& model, const AnyMap& properties) const {
  KILN_CHECK(model, "compile_model: null model");
  Settings s = parse_properties(properties);
  CompiledModel cm;
  cm.impl_ = std::make_shared<CompiledModel::Impl>();
  cm.impl_->model = model;
  cm.impl_->threads = s.threads;
  cm.impl_->profiling = s.profiling;
  if (s.reference) cm.impl_->reference = std::make_unique<runtime::ReferenceExecutor>(model->graph());
  else cm.impl_->fast = std::make_unique<cpu::Executor>(model->graph(), s.graph);
  return cm;
}

CompiledModel Core::compile_model(const std::string& path, const AnyMap& properties) const {
  return compile_model(read_model(path), properties);
}

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

// ---------------- InferRequest ----------------

static InferRequest::Impl& need(const std::shared_ptr<InferRequest::Impl>& p) {
  KILN_CHECK(p, "InferRequest is empty (default-constructed)");
  return *p;
}

void InferRequest::set_input_tensor(size_t index, const Tensor& t) {
  auto& r = need(impl_);
  KILN_CHECK(index < r.inputs.size(),
             cat("set_input_tensor: index ", index, " out of range, the model has ", r.inputs.size(), " inputs"));
  r.inputs[index] = t;
}

void InferRequest::set_input_tensor(const Tensor& t) {
  auto& r = need(impl_);
  KILN_CHECK(r.inputs.size() == 1,
             cat("set_input_tensor(tensor): the model has ", r.inputs.size(), " inputs; give an index or a name"));
  r.inputs[0] = t;
}

void InferRequest::set_tensor(const std::string& name, const Tensor& t) {
  auto& r = need(impl_);
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

void InferRequest::infer() {
  auto& r = need(impl_);
  const auto& ins = r.compiled->model->inputs();
  for (size_t i = 0; i < ins.size(); ++i)
    KILN_CHECK(r.inputs[i].defined(), cat("infer: input '", ins[i].name, "' was not set"));
  auto& c = *r.compiled;
  omp_set_num_threads(c.threads > 0 ? c.threads : omp_get_num_procs());
  auto* prof = c.profiling ? &r.profile : nullptr;
  r.outputs = c.reference ? c.reference->run(r.inputs, nullptr, prof) : c.fast->run(r.inputs, prof);
}

std::vector<ProfilingInfo> InferRequest::get_profiling_info() const {
  auto& r = need(impl_);
  KILN_CHECK(r.compiled->profiling,
             "get_profiling_info: profiling is off; compile the model with enable_profiling = YES (PERF_COUNT)");
  KILN_CHECK(!r.outputs.empty(), "get_profiling_info: infer() has not run yet");
  return r.profile;
}

const char* status_name(ProfilingInfo::Status s) {
  switch (s) {
    case ProfilingInfo::Status::not_run: return "NOT_RUN";
    case ProfilingInfo::Status::optimized_out: return "OPTIMIZED_OUT";
    case ProfilingInfo::Status::executed: return "EXECUTED";
  }
  return "?";
}

Tensor InferRequest::get_output_tensor(size_t index) const {
  auto& r = need(impl_);
  KILN_CHECK(!r.outputs.empty(), "get_output_tensor: infer() has not run yet");
  KILN_CHECK(index < r.outputs.size(),
             cat("get_output_tensor: index ", index, " out of range, the model has ", r.outputs.size(), " outputs"));
  return r.outputs[index];
}

Tensor InferRequest::get_tensor(const std::string& name) const {
  auto& r = need(impl_);
  const auto& outs = r.compiled->model->outputs();
  std::vector<std::string> names;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i].name == name) return get_output_tensor(i);
    names.push_back(outs[i].name);
  }
  throw Error(cat("get_tensor: the model has no output named '", name, "' (outputs: ", join(names, ", "), ")"));
}

}  // namespace kiln
