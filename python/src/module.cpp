// kiln's Python extension (_kiln): the C++ API of <kiln/core.hpp> for numpy users, in the
// shape of OpenVINO's Python API (Core / Model / CompiledModel / InferRequest).
// python/kiln/__init__.py re-exports it and adds AsyncInferQueue and the ONNX Runtime style
// InferenceSession; docs/python.md documents both.
//
// Memory: an input array that is C-contiguous, aligned and of the input's dtype becomes the
// request's input without a copy (the tensor keeps the array alive); an output array is a view
// of the request's output tensor and keeps that tensor alive (kiln then writes the next run's
// output elsewhere). The GIL is released while kiln reads, compiles or runs a model.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <kiln/core.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace py = pybind11;

namespace kiln::python {
namespace {

std::string str_of(const py::handle& h) { return py::str(h).cast<std::string>(); }

// ---------------- dtypes ----------------

py::dtype numpy_dtype(DType t) {
  switch (t) {
    case DType::f32: return py::dtype::of<float>();
    case DType::f64: return py::dtype::of<double>();
    case DType::f16: return py::dtype("float16");
    case DType::i8: return py::dtype::of<int8_t>();
    case DType::u8: return py::dtype::of<uint8_t>();
    case DType::i16: return py::dtype::of<int16_t>();
    case DType::u16: return py::dtype::of<uint16_t>();
    case DType::i32: return py::dtype::of<int32_t>();
    case DType::u32: return py::dtype::of<uint32_t>();
    case DType::i64: return py::dtype::of<int64_t>();
    case DType::u64: return py::dtype::of<uint64_t>();
    case DType::boolean: return py::dtype::of<bool>();
    case DType::string: return py::dtype("O");
    case DType::bf16: return py::dtype::of<float>();  // numpy has no bfloat16: values come as float32
    default: throw Error(std::string("kiln: numpy has no type for ") + dtype_name(t) + " tensors");
  }
}

// The kiln type of a numpy dtype; kiln::Error for one kiln has no tensors of.
DType kiln_dtype(const py::dtype& d) {
  const char kind = d.kind();
  const auto size = d.itemsize();
  if (kind == 'f' && size == 4) return DType::f32;
  if (kind == 'f' && size == 8) return DType::f64;
  if (kind == 'f' && size == 2) return DType::f16;
  if (kind == 'i' || kind == 'u') {
    const bool s = kind == 'i';
    switch (size) {
      case 1: return s ? DType::i8 : DType::u8;
      case 2: return s ? DType::i16 : DType::u16;
      case 4: return s ? DType::i32 : DType::u32;
      case 8: return s ? DType::i64 : DType::u64;
      default: break;
    }
  }
  if (kind == 'b') return DType::boolean;
  if (kind == 'U' || kind == 'S' || kind == 'O') return DType::string;
  throw Error("kiln: numpy arrays of dtype " + str_of(d) + " have no kiln tensor type");
}

// A Python object kept alive by C++ owners on any thread: dropped under the GIL.
std::shared_ptr<void> keep_alive(py::object o) {
  return std::shared_ptr<void>(new py::object(std::move(o)), [](void* p) {
    if (!Py_IsInitialized()) return;  // the interpreter is gone: nothing left to release
    py::gil_scoped_acquire gil;
    delete static_cast<py::object*>(p);
  });
}

// ---------------- arrays <-> tensors ----------------

// `value` as a tensor of type `want` (undefined: the array's own type). A C-contiguous,
// aligned array of that type in native byte order is used without a copy; another is
// converted (a copy, as numpy.asarray(value, dtype) makes).
Tensor to_tensor(const py::handle& value, DType want, const std::string& what) {
  py::array arr;
  try {
    arr = py::array::ensure(value);
  } catch (const py::error_already_set&) {
  }
  if (!arr)
    throw Error("kiln: " + what + ": expected a numpy array (or what numpy.asarray takes), got " +
                str_of(py::type::of(value).attr("__name__")));
  const DType have = kiln_dtype(arr.dtype());
  if (want == DType::undefined) want = have;
  Shape shape(arr.shape(), arr.shape() + arr.ndim());
  if (want == DType::string || have == DType::string) {
    if (want != have)
      throw Error("kiln: " + what + ": a " + dtype_name(want) + " input cannot take an array of " + str_of(arr.dtype()));
    Tensor t(DType::string, shape);
    py::list flat = arr.attr("ravel")().attr("tolist")();
    auto* out = t.data<std::string>();
    for (size_t i = 0; i < flat.size(); ++i) {
      py::handle item = flat[i];
      out[i] = py::isinstance<py::bytes>(item) ? item.cast<std::string>() : str_of(item);
    }
    return t;
  }
  if (want == DType::bf16) {  // numpy has no bfloat16: from float values, rounded to nearest even
    py::array_t<float, py::array::c_style | py::array::forcecast> f(arr);
    Tensor t(DType::bf16, shape);
    auto* out = t.data<bfloat16>();
    const float* in = f.data();
    for (int64_t i = 0; i < t.size(); ++i) out[i] = bfloat16(in[i]);
    return t;
  }
  if (is_narrow(want))
    throw Error("kiln: " + what + " is of type " + dtype_name(want) + ", which numpy arrays cannot give");
  if (have != want) arr = arr.attr("astype")(numpy_dtype(want));
  if (!arr.dtype().attr("isnative").cast<bool>()) arr = arr.attr("astype")(arr.dtype().attr("newbyteorder")("="));
  if (!(arr.flags() & py::array::c_style) || !(arr.flags() & py::detail::npy_api::NPY_ARRAY_ALIGNED_))
    arr = py::array::ensure(arr.attr("copy")(), py::array::c_style);
  void* data = const_cast<void*>(arr.data());
  return Tensor::adopt(want, shape, keep_alive(arr), data);
}

// The numpy value of an output: an array viewing the tensor (which it keeps alive), a list for
// a sequence, None or the value for an optional.
py::object to_python(const Tensor& t) {
  if (!t.defined()) return py::none();
  if (t.kind() == ValueKind::sequence) {
    py::list out;
    for (const Tensor& item : t.items()) out.append(to_python(item));
    return out;
  }
  if (t.kind() == ValueKind::optional) return t.items().empty() ? py::none() : to_python(t.items()[0]);
  const std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  if (t.dtype() == DType::string) {
    py::list flat;
    const auto* s = t.data<std::string>();
    for (int64_t i = 0; i < t.size(); ++i) flat.append(py::str(s[i]));
    return py::module_::import("numpy").attr("array")(flat, py::arg("dtype") = "O").attr("reshape")(py::tuple(py::cast(shape)));
  }
  if (t.dtype() == DType::bf16) {  // no numpy bfloat16: float32 values
    py::array_t<float> out(shape);
    const auto* b = t.data<bfloat16>();
    float* f = out.mutable_data();
    for (int64_t i = 0; i < t.size(); ++i) f[i] = static_cast<float>(b[i]);
    return out;
  }
  auto* keep = new Tensor(t);
  py::capsule owner(keep, [](void* p) { delete static_cast<Tensor*>(p); });
  return py::array(numpy_dtype(t.dtype()), shape, const_cast<void*>(t.raw()), owner);
}

// ---------------- properties ----------------

std::string property_value(const py::handle& v) {
  if (py::isinstance<py::bool_>(v)) return v.cast<bool>() ? "YES" : "NO";
  return str_of(v);
}

AnyMap to_properties(const py::object& props) {
  AnyMap out;
  if (props.is_none()) return out;
  if (!py::isinstance<py::dict>(props)) throw Error("kiln: properties must be a dict of key -> value");
  for (auto [k, v] : props.cast<py::dict>()) out[str_of(k)] = property_value(v);
  return out;
}

// ---------------- requests ----------------

// A request with the Python side of its state: the inputs it reads (their arrays stay alive
// while it may run) and its callback.
struct Request {
  InferRequest req;
  std::vector<PortInfo> inputs, outputs;
  std::vector<Tensor> set_inputs;  // by input position (undefined: not set through Python)

  ~Request() {
    py::gil_scoped_release release;  // a running request finishes (and may call back) first
    req = InferRequest();
  }

  size_t input_index(const py::handle& key) const {
    if (py::isinstance<py::int_>(key)) {
      const auto i = key.cast<long long>();
      if (i < 0 || static_cast<size_t>(i) >= inputs.size())
        throw Error("kiln: input index " + std::to_string(i) + " out of range; the model has " +
                    std::to_string(inputs.size()) + " inputs");
      return static_cast<size_t>(i);
    }
    const std::string name = str_of(key);
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].name == name) return i;
    std::string names;
    for (const PortInfo& p : inputs) names += (names.empty() ? "" : ", ") + p.name;
    throw Error("kiln: the model has no input '" + name + "'; its inputs: " + names);
  }

  // A tensor input takes an array; a sequence input a list of arrays; an optional one None or
  // its value.
  Tensor value_for(const PortInfo& port, const py::handle& value, ValueKind kind) const {
    const std::string what = "input '" + port.name + "'";
    if (kind == ValueKind::sequence) {
      if (!py::isinstance<py::list>(value) && !py::isinstance<py::tuple>(value))
        throw Error("kiln: " + what + " is a sequence: pass a list of arrays");
      std::vector<Tensor> items;
      for (py::handle item : value.cast<py::sequence>()) items.push_back(to_tensor(item, port.dtype, what));
      return Tensor::sequence(port.dtype, std::move(items));
    }
    if (kind == ValueKind::optional) {
      if (value.is_none()) return Tensor::optional(port.dtype, std::nullopt, port.element_kind);
      return Tensor::optional(port.dtype, value_for(port, value, port.element_kind), port.element_kind);
    }
    return to_tensor(value, port.dtype, what);
  }

  void set_input(size_t i, const py::handle& value) {
    Tensor t = value_for(inputs[i], value, inputs[i].kind);
    req.set_input_tensor(i, t);
    if (set_inputs.size() < inputs.size()) set_inputs.resize(inputs.size());
    set_inputs[i] = t;
  }

  // inputs: a dict (name or index -> array), a list / tuple (by position), or one array.
  void set_inputs_from(const py::object& values) {
    if (values.is_none()) return;
    if (py::isinstance<py::dict>(values)) {
      for (auto [k, v] : values.cast<py::dict>()) set_input(input_index(k), v);
    } else if (py::isinstance<py::list>(values) || py::isinstance<py::tuple>(values)) {
      py::sequence seq = values.cast<py::sequence>();
      if (seq.size() != inputs.size())
        throw Error("kiln: " + std::to_string(seq.size()) + " inputs given, the model has " + std::to_string(inputs.size()));
      for (size_t i = 0; i < seq.size(); ++i) set_input(i, seq[i]);
    } else {
      if (inputs.size() != 1)
        throw Error("kiln: one array given, the model has " + std::to_string(inputs.size()) +
                    " inputs: pass a dict of name -> array");
      set_input(0, values);
    }
  }

  py::dict results() const {
    py::dict out;
    for (size_t i = 0; i < outputs.size(); ++i) out[py::str(outputs[i].name)] = to_python(req.get_output_tensor(i));
    return out;
  }

  py::dict infer(const py::object& values) {
    set_inputs_from(values);
    {
      py::gil_scoped_release release;
      req.infer();
    }
    return results();
  }

  void start_async(const py::object& values) {
    set_inputs_from(values);
    py::gil_scoped_release release;
    req.start_async();
  }

  // callback(userdata) after every run, on the thread that ran it; an exception it raises
  // reaches wait() as kiln.Error.
  void set_callback(py::object fn, py::object userdata) {
    if (fn.is_none()) {
      req.set_callback(nullptr);
      return;
    }
    auto f = keep_alive(std::move(fn));
    auto u = keep_alive(std::move(userdata));
    req.set_callback([f, u](std::exception_ptr) {
      py::gil_scoped_acquire gil;
      try {
        (*static_cast<py::object*>(f.get()))(*static_cast<py::object*>(u.get()));
      } catch (py::error_already_set& e) {
        throw Error(std::string("kiln: the request's callback raised ") + e.what());
      }
    });
  }
};

// ---------------- models ----------------

struct Compiled {
  std::shared_ptr<CompiledModel> cm;
  std::shared_ptr<Request> default_request;  // for compiled(inputs)

  ~Compiled() {
    default_request.reset();
    py::gil_scoped_release release;  // the streams finish (and may call back) first
    cm.reset();
  }
  std::shared_ptr<Request> create_request() const {
    auto r = std::make_shared<Request>();
    r->req = cm->create_infer_request();
    r->inputs = cm->inputs();
    r->outputs = cm->outputs();
    return r;
  }
};

py::object shape_of(const PortInfo& p) {
  if (!p.rank_known) return py::none();
  py::list dims;
  for (size_t i = 0; i < p.shape.size(); ++i) {
    if (p.shape[i] >= 0) dims.append(p.shape[i]);
    else if (i < p.dim_names.size() && !p.dim_names[i].empty()) dims.append(p.dim_names[i]);
    else dims.append(py::none());
  }
  return dims;
}

const char* kind_name(ValueKind k) {
  return k == ValueKind::tensor ? "tensor" : k == ValueKind::sequence ? "sequence" : "optional";
}

std::shared_ptr<Model> read_model(const Core& core, const py::object& source) {
  if (py::isinstance<py::bytes>(source)) {
    const std::string bytes = source.cast<std::string>();
    py::gil_scoped_release release;
    return core.read_model_from_memory(bytes);
  }
  const std::string path = str_of(py::module_::import("os").attr("fspath")(source));
  py::gil_scoped_release release;
  return core.read_model(path);
}

}  // namespace
}  // namespace kiln::python

using namespace kiln;
using namespace kiln::python;

PYBIND11_MODULE(_kiln, m) {
  m.doc() = "kiln: a CPU inference engine for ONNX models (C++ core; see docs/python.md)";
  static py::exception<Error> error(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      error(e.what());
    }
  });
  m.attr("__version__") = KILN_VERSION;

  py::class_<PortInfo>(m, "Port", "A model input or output as declared.")
      .def_readonly("name", &PortInfo::name)
      .def_property_readonly("element_type", [](const PortInfo& p) { return std::string(dtype_name(p.dtype)); },
                             "kiln's name of the element type: f32, i64, ...")
      .def_property_readonly("dtype", [](const PortInfo& p) -> py::object {
            try {
              return numpy_dtype(p.dtype);
            } catch (const Error&) {
              return py::none();
            }
          }, "The numpy dtype of its arrays (None where numpy has none)")
      .def_property_readonly("kind", [](const PortInfo& p) { return std::string(kind_name(p.kind)); },
                             "tensor, sequence or optional")
      .def_property_readonly("shape", &shape_of,
                             "Dims as a list: an int where fixed, the dim's name (str) or None where dynamic; None when the rank is unknown")
      .def("__repr__", [](const PortInfo& p) {
        return "<Port '" + p.name + "' " + dtype_name(p.dtype) + " " + p.shape_string() + ">";
      });

  py::class_<ProfilingInfo>(m, "ProfilingInfo", "One runtime node of the last inference (enable_profiling).")
      .def_property_readonly("status", [](const ProfilingInfo& r) { return std::string(status_name(r.status)); })
      .def_readonly("node_name", &ProfilingInfo::node_name)
      .def_readonly("node_type", &ProfilingInfo::node_type)
      .def_readonly("exec_type", &ProfilingInfo::exec_type)
      .def_readonly("real_time_us", &ProfilingInfo::real_time_us)
      .def_readonly("cpu_time_us", &ProfilingInfo::cpu_time_us)
      .def_readonly("start_us", &ProfilingInfo::start_us)
      .def_readonly("fused_into", &ProfilingInfo::fused_into)
      .def("__repr__", [](const ProfilingInfo& r) {
        return "<ProfilingInfo " + r.node_name + " " + status_name(r.status) + " " + r.node_type + " " + r.exec_type + ">";
      });

  py::class_<Model, std::shared_ptr<Model>>(m, "Model", "A model read from an ONNX file (Core.read_model).")
      .def_property_readonly("inputs", &Model::inputs)
      .def_property_readonly("outputs", &Model::outputs)
      .def_property_readonly("opset", &Model::opset, "The default-domain opset the model imports")
      .def("__str__", &Model::to_string);

  py::class_<Request, std::shared_ptr<Request>>(m, "InferRequest",
                                                "One inference's inputs, outputs and buffers; runs alone or on a stream.")
      .def("infer", &Request::infer, py::arg("inputs") = py::none(),
           "Sets the inputs (dict name -> array, a list by position, or one array), runs, and returns {output name: array}")
      .def("start_async", &Request::start_async, py::arg("inputs") = py::none(),
           "Sets the inputs and queues the request on the next free stream; returns at once")
      .def("wait", [](Request& r) {
            py::gil_scoped_release release;
            r.req.wait();
          }, "Waits until the request is idle; raises the run's kiln.Error")
      .def("wait_for", [](Request& r, double timeout_ms) {
            py::gil_scoped_release release;
            return r.req.wait_for(std::chrono::milliseconds(static_cast<long long>(timeout_ms)));
          }, py::arg("timeout_ms"), "Like wait() for at most timeout_ms: True when idle")
      .def("set_callback", &Request::set_callback, py::arg("callback"), py::arg("userdata") = py::none(),
           "callback(userdata) after every run, on the thread that ran it (None removes it)")
      .def("set_input_tensor", [](Request& r, const py::object& key, const py::object& value) {
            r.set_input(r.input_index(key), value);
          }, py::arg("key"), py::arg("value"), "One input by name or position")
      .def("get_input_tensor", [](const Request& r, const py::object& key) {
            const size_t i = r.input_index(key);
            if (i >= r.set_inputs.size() || !r.set_inputs[i].defined())
              throw Error("kiln: input '" + r.inputs[i].name + "' has not been set");
            return to_python(r.set_inputs[i]);
          }, py::arg("key"), "The input as the request reads it (a view of the array given, when no copy was needed)")
      .def("get_output_tensor", [](const Request& r, size_t i) { return to_python(r.req.get_output_tensor(i)); },
           py::arg("index") = 0, "The last run's output (a view that keeps the output alive)")
      .def("get_tensor", [](const Request& r, const std::string& name) { return to_python(r.req.get_tensor(name)); },
           py::arg("name"), "The last run's output by name")
      .def_property_readonly("results", &Request::results, "The last run's outputs: {name: array}")
      .def_property_readonly("inputs", [](const Request& r) { return r.inputs; })
      .def_property_readonly("outputs", [](const Request& r) { return r.outputs; })
      .def("get_profiling_info", [](const Request& r) { return r.req.get_profiling_info(); },
           "Per-node counters of the last run (compile with enable_profiling=YES)");

  py::class_<Compiled, std::shared_ptr<Compiled>>(m, "CompiledModel", "A model compiled for this CPU (Core.compile_model).")
      .def("create_infer_request", &Compiled::create_request)
      .def_property_readonly("inputs", [](const Compiled& c) { return c.cm->inputs(); })
      .def_property_readonly("outputs", [](const Compiled& c) { return c.cm->outputs(); })
      .def("get_property", [](const Compiled& c, const std::string& key) { return c.cm->get_property(key); }, py::arg("key"),
           "The effective value of a property (docs/settings.md), as a string")
      .def("__call__", [](Compiled& c, const py::object& inputs) {
            if (!c.default_request) c.default_request = c.create_request();
            return c.default_request->infer(inputs);
          }, py::arg("inputs") = py::none(), "Runs one inference on the model's own request: {output name: array}")
      .def("get_runtime_model", [](const Compiled& c, const std::vector<Shape>& shapes) {
            RuntimeModel rm;
            {
              py::gil_scoped_release release;
              rm = c.cm->get_runtime_model(shapes);
            }
            py::list nodes;
            for (const RuntimeNode& n : rm.nodes) {
              py::list outs;
              for (const RuntimeNode::Output& o : n.outputs)
                outs.append(py::dict(py::arg("name") = o.name, py::arg("shape") = o.shape, py::arg("layout") = o.layout,
                                     py::arg("precision") = std::string(dtype_name(o.precision))));
              nodes.append(py::dict(py::arg("name") = n.name, py::arg("type") = n.type, py::arg("exec_type") = n.exec_type,
                                    py::arg("original") = n.original, py::arg("fused") = n.fused,
                                    py::arg("inputs") = n.inputs, py::arg("outputs") = outs));
            }
            return py::dict(py::arg("nodes") = nodes, py::arg("arena_bytes") = rm.arena_bytes,
                            py::arg("reference_reason") = rm.reference_reason);
          }, py::arg("input_shapes") = std::vector<Shape>{},
           "The runtime graph for these input shapes: {'nodes': [...], 'arena_bytes', 'reference_reason'}");

  py::class_<Core>(m, "Core", "Reads and compiles models.")
      .def(py::init<>())
      .def("read_model", &read_model, py::arg("model"), "An ONNX model from a path or from bytes")
      .def("compile_model", [](const Core& core, const py::object& model, const py::object& device_or_properties,
                               const py::object& properties) {
            // OpenVINO's form compile_model(model, "CPU", config) as well as compile_model(model, config)
            py::object props_arg = device_or_properties;
            if (py::isinstance<py::str>(device_or_properties)) {
              const std::string device = device_or_properties.cast<std::string>();
              if (device != "CPU")
                throw Error("kiln: compile_model: device '" + device + "': kiln runs on the CPU; pass \"CPU\" or no device");
              props_arg = properties;
            } else if (!properties.is_none()) {
              throw Error("kiln: compile_model: properties given twice (as the second argument and as `properties`)");
            }
            std::shared_ptr<Model> mdl = py::isinstance<Model>(model) ? model.cast<std::shared_ptr<Model>>() : read_model(core, model);
            const AnyMap props = to_properties(props_arg);
            auto c = std::make_shared<Compiled>();
            {
              py::gil_scoped_release release;
              // handed over: a model read here (a path, bytes) is no one else's, so it keeps each weight
              // once; a Model object the caller holds is seen as shared and left whole (Core::compile_model)
              c->cm = std::make_shared<CompiledModel>(core.compile_model(std::move(mdl), props));
            }
            return c;
          }, py::arg("model"), py::arg("device_name") = py::none(), py::arg("properties") = py::none(),
           "Compiles a Model (or a path / bytes) with properties {key: value} (docs/settings.md): "
           "compile_model(model, properties) or, as OpenVINO, compile_model(model, \"CPU\", properties)")
      .def("get_property", &Core::get_property, py::arg("key"), "kiln_cpu_isa, OPTIMIZATION_CAPABILITIES");
}
