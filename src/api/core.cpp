#include <kiln/core.hpp>

#include <sstream>

#include "core/strings.hpp"
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
  std::unique_ptr<runtime::ReferenceExecutor> executor;
};

struct InferRequest::Impl {
  std::shared_ptr<CompiledModel::Impl> compiled;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
};

static void check_properties(const AnyMap& properties) {
  for (auto& [k, v] : properties)
    throw Error(cat("unknown property '", k, "' (value '", v, "'): this build of kiln accepts no compile properties yet"));
}

CompiledModel Core::compile_model(const std::shared_ptr<Model>& model, const AnyMap& properties) const {
  KILN_CHECK(model, "compile_model: null model");
  check_properties(properties);
  CompiledModel cm;
  cm.impl_ = std::make_shared<CompiledModel::Impl>();
  cm.impl_->model = model;
  cm.impl_->executor = std::make_unique<runtime::ReferenceExecutor>(model->graph());
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
  r.outputs = r.compiled->executor->run(r.inputs);
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
