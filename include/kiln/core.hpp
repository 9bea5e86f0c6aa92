#pragma once
// kiln's public C++ API, in the style of OpenVINO 2.0:
//
//   kiln::Core core;
//   auto model = core.read_model("model.onnx");
//   kiln::CompiledModel compiled = core.compile_model(model);
//   kiln::InferRequest req = compiled.create_infer_request();
//   req.set_input_tensor(kiln::Tensor::wrap(kiln::DType::f32, {1, 3, 224, 224}, my_data));
//   req.infer();
//   kiln::Tensor out = req.get_output_tensor();
//
// Every failure a user can cause throws kiln::Error.
#include <kiln/dtype.hpp>
#include <kiln/error.hpp>
#include <kiln/tensor.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

namespace ir {
class Graph;
}

// A model input or output as declared: dims < 0 are dynamic; dim_names holds the
// symbolic name of a dynamic dim ("" if it has none).
struct PortInfo {
  std::string name;
  DType dtype = DType::undefined;
  bool rank_known = true;
  std::vector<int64_t> shape;
  std::vector<std::string> dim_names;
  std::string shape_string() const;  // "[batch,3,224,224]"
};

class Model {
 public:
  explicit Model(std::shared_ptr<ir::Graph> graph);
  const std::vector<PortInfo>& inputs() const { return inputs_; }
  const std::vector<PortInfo>& outputs() const { return outputs_; }
  int opset() const;  // default-domain opset the model imports
  std::string to_string() const;  // readable graph dump
  // Internal graph (for kiln's own tools and tests).
  const std::shared_ptr<ir::Graph>& graph() const { return graph_; }

 private:
  std::shared_ptr<ir::Graph> graph_;
  std::vector<PortInfo> inputs_, outputs_;
};

// Compile properties: key -> value, both strings.
using AnyMap = std::map<std::string, std::string>;

class InferRequest;

// One row of InferRequest::get_profiling_info(): a runtime node of the last inference
// (compile property enable_profiling / PERF_COUNT must be on).
struct ProfilingInfo {
  enum class Status { not_run, optimized_out, executed };
  Status status = Status::executed;
  std::string node_name;  // the runtime node (a fused node is named after its first ir node)
  std::string node_type;  // runtime node kind: Convolution, Eltwise, Reorder, Reference, ...
  std::string exec_type;  // implementation and precision, e.g. "brgconv_avx512_core_f32", "ref_any_f32"
  double real_time_us = 0;  // wall time of the node
  double cpu_time_us = 0;   // process CPU time (all threads) spent during the node
  std::string fused_into;   // OPTIMIZED_OUT rows: the runtime node this layer was fused into
};
const char* status_name(ProfilingInfo::Status s);  // "EXECUTED", "NOT_RUN", "OPTIMIZED_OUT"

class CompiledModel {
 public:
  CompiledModel() = default;
  InferRequest create_infer_request() const;
  const std::vector<PortInfo>& inputs() const;
  const std::vector<PortInfo>& outputs() const;
  struct Impl;

 private:
  friend class Core;
  std::shared_ptr<Impl> impl_;
};

class InferRequest {
 public:
  InferRequest() = default;
  // Inputs by position, or by name; the tensor may wrap user memory (no copy is made).
  void set_input_tensor(size_t index, const Tensor& t);
  void set_input_tensor(const Tensor& t);  // the model must have exactly one input
  void set_tensor(const std::string& name, const Tensor& t);
  void infer();
  Tensor get_output_tensor(size_t index = 0) const;
  Tensor get_tensor(const std::string& name) const;  // an output by name
  // Per-node times of the last infer(); throws unless the model was compiled with
  // enable_profiling = YES.
  std::vector<ProfilingInfo> get_profiling_info() const;
  struct Impl;

 private:
  friend class CompiledModel;
  std::shared_ptr<Impl> impl_;
};

class Core {
 public:
  // Reads an ONNX model file (external data is resolved next to it).
  std::shared_ptr<Model> read_model(const std::string& path) const;
  // Reads an ONNX model from bytes; external data resolves in `base_dir`.
  std::shared_ptr<Model> read_model_from_memory(const std::string& bytes, const std::string& base_dir = ".") const;
  CompiledModel compile_model(const std::shared_ptr<Model>& model, const AnyMap& properties = {}) const;
  CompiledModel compile_model(const std::string& path, const AnyMap& properties = {}) const;
};

}  // namespace kiln
