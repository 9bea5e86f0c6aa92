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
// Requests also run asynchronously (start_async / wait / wait_for / set_callback); a
// compiled model runs as many requests at once as it has streams (compile property
// num_streams, see docs/settings.md), each with its own buffers, sharing the weights.
//
// Every failure a user can cause throws kiln::Error.
#include <kiln/dtype.hpp>
#include <kiln/error.hpp>
#include <kiln/profiling.hpp>
#include <kiln/tensor.hpp>

#include <chrono>
#include <exception>
#include <functional>
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
  DType dtype = DType::undefined;  // a sequence's / optional's: of its tensors
  ValueKind kind = ValueKind::tensor;
  ValueKind element_kind = ValueKind::tensor;  // an optional's: tensor or sequence
  bool rank_known = true;
  std::vector<int64_t> shape;
  std::vector<std::string> dim_names;
  std::string shape_string() const;  // "[batch,3,224,224]"
  bool is_static() const;            // a tensor of known rank whose every dim is given
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

// Compile properties: key -> value, both strings. Keys (new name, or the spec's old name
// in parentheses; docs/settings.md says what each does):
//   inference_num_threads (CPU_THREADS_NUM)      integer >= 0; 0 = all CPUs (default)
//   num_streams (CPU_THROUGHPUT_STREAMS)         integer >= 0, AUTO, NUMA; default 1 (or per hint)
//   enable_cpu_pinning (CPU_BIND_THREAD)         YES (default), NO, NUMA
//   performance_mode (PERFORMANCE_HINT)          LATENCY, THROUGHPUT, NONE (default)
//   exclusive_async_requests (EXCLUSIVE_ASYNC_REQUESTS)  YES, NO (default)
//   enable_profiling (PERF_COUNT)                YES, NO (default)
//   kiln_executor                                cpu (default), reference
//   kiln_disable_passes                          optimizer pass names, comma-separated
using AnyMap = std::map<std::string, std::string>;

class InferRequest;

// The runtime graph a compiled model runs for one set of input shapes (OpenVINO's
// get_runtime_model): the nodes after fusion, in execution order.
struct RuntimeNode {
  struct Output {
    std::string name;
    Shape shape;
    std::string layout;  // memory format, e.g. "nchw", "nChw16c"
    DType precision = DType::f32;
  };
  std::string name;       // the runtime node (a fused node is named after its first ONNX node)
  std::string type;       // runtime node kind: Convolution, Eltwise, Subgraph, Reorder, ...
  std::string exec_type;  // implementation and precision, as the performance counters name it
  std::string original;   // the ONNX node it was made from ("" for inserted nodes: Reorders, ...)
  std::vector<std::string> fused;   // ONNX nodes fused into it (post-ops, sums, snippets bodies)
  std::vector<std::string> inputs;  // tensors it reads (weights and other constants left out)
  std::vector<Output> outputs;
};
// One decision of the optimizer: a fusion or rewrite it applied, or one it did not and the
// first condition that stopped it.
struct FusionDecision {
  std::string pass;     // e.g. "FuseConvolutionAndSimpleOperation"
  std::string where;    // the nodes involved, e.g. "conv_7 -> add_9"
  std::string message;  // applied: what happened; not applied: the first failed condition
  bool applied = false;
};
struct RuntimeModel {
  std::vector<RuntimeNode> nodes;  // in execution order
  size_t arena_bytes = 0;          // one request's intermediate tensors, planned in one block
  size_t in_place_nodes = 0;       // nodes that write their output over an input no one reads after
  std::vector<FusionDecision> fusions;  // every pass's decisions, in the order they were made
  // Non-empty when these shapes have no runtime graph: why (kiln_executor = reference, or
  // shapes that depend on the data); the model then runs node by node on the reference
  // executor and `nodes` is empty.
  std::string reference_reason;
  // Non-empty when these shapes leave a shape that depends on the data (a NonZero's count):
  // `nodes` are then the runtime graph of the nodes before it, and this says what runs after
  // (the cut's nodes on the reference kernels, the rest planned for the shapes they produce).
  std::string data_dependent;
};


class CompiledModel {
 public:
  CompiledModel() = default;
  // Any number of requests; each has its own inputs, outputs and intermediate buffers.
  InferRequest create_infer_request() const;
  const std::vector<PortInfo>& inputs() const;
  const std::vector<PortInfo>& outputs() const;
  // The effective value of a property, by new or old key name: what the model runs with
  // (e.g. num_streams -> the number AUTO or a hint chose; inference_num_threads -> the
  // threads of all streams together). Also the read-only keys
  // optimal_number_of_infer_requests (OPTIMAL_NUMBER_OF_INFER_REQUESTS: enough requests
  // to keep every stream busy), kiln_threads_per_stream, kiln_stream_layout (streams,
  // threads and pinning in words: "2 streams x 1 thread, not pinned") and kiln_cpu_isa (as
  // Core::get_property). Unknown key: kiln::Error.
  std::string get_property(const std::string& key) const;
  // The runtime graph the model's requests run for these input shapes (empty: the shapes the
  // model declares, all static), with the optimizer's decisions. The plan is the one
  // inference uses (made now when these shapes have not run yet, and kept only as long as the
  // plan cache keeps it: asking for many shapes costs no memory beyond kiln_plan_cache_capacity
  // plans). kiln::Error for shapes the model does not accept or a dynamic model without shapes.
  RuntimeModel get_runtime_model(const std::vector<Shape>& input_shapes = {}) const;
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
  // Runs the request and waits for it (on a stream of the compiled model; with 0 streams
  // on the calling thread). Errors of the inference throw kiln::Error here.
  void infer();
  // Queues the request for the next free stream and returns; the inputs set so far are
  // what it reads (set_input_tensor on a busy request throws). With 0 streams the
  // inference runs on the calling thread before start_async returns. Throws kiln::Error
  // when an input is missing or the request is still busy.
  void start_async();
  // Blocks until the request is idle (its run and its callback are done); an error of
  // that run (or an exception escaping the callback) is thrown here as kiln::Error.
  // Returns at once when the request never ran.
  void wait();
  // Like wait() for at most `timeout`: true when the request is idle, false on timeout.
  bool wait_for(std::chrono::milliseconds timeout);
  // Called once per finished run (success or not: the exception_ptr is null or holds the
  // kiln::Error), on the thread that ran it; the request is idle by then, so the callback
  // may read outputs and start_async() again. It must not wait() for other requests.
  void set_callback(std::function<void(std::exception_ptr)> callback);
  // The last run's output (shares the request's buffer). A tensor you still hold keeps its
  // values; once you drop it the next run writes its output into the same buffer, also for
  // other input shapes while it is large enough (a request keeps, per output, a buffer of its
  // largest output so far, a quarter larger when it had to grow).
  Tensor get_output_tensor(size_t index = 0) const;
  Tensor get_tensor(const std::string& name) const;  // an output by name
  // Per-node times of the last run; throws unless the model was compiled with
  // enable_profiling = YES. With several streams busy, a node's CPU time includes what
  // the other streams did meanwhile (it is the process's CPU time).
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
  // The model stays yours, unchanged: its weights stay resident beside the packed copies
  // the compiled model makes of them.
  CompiledModel compile_model(const std::shared_ptr<Model>& model, const AnyMap& properties = {}) const;
  // Hands the model over (compile_model(std::move(model)), compile_model(core.read_model(p))):
  // when no one else holds it or its graph, a model of static input shapes compiled without
  // cache_dir keeps each weight once: the original bytes of a weight every reader packed
  // are given back as it is packed (read-only property kiln_released_weights_bytes). The
  // compiled model then plans no other input shapes (get_runtime_model of other shapes says
  // why). Held elsewhere, it is compiled as by the overload above.
  CompiledModel compile_model(std::shared_ptr<Model>&& model, const AnyMap& properties = {}) const;
  // Reads the file and compiles it, handing the model over as above (without cache_dir).
  CompiledModel compile_model(const std::string& path, const AnyMap& properties = {}) const;
  // What this machine runs: "kiln_cpu_isa" (the instruction set kiln uses: the CPU's own,
  // capped by the environment variable KILN_MAX_CPU_ISA, e.g. "avx2 (capped by
  // KILN_MAX_CPU_ISA=AVX2; this CPU: avx512_core_bf16)"), "OPTIMIZATION_CAPABILITIES"
  // ("FP32", or "FP32 BF16" where inference_precision=bf16 runs). Unknown key (or a bad
  // KILN_MAX_CPU_ISA): kiln::Error.
  std::string get_property(const std::string& key) const;
};

}  // namespace kiln
