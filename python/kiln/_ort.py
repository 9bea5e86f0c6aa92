"""The ONNX Runtime style entry point: InferenceSession, SessionOptions and friends, so code
written for ``onnxruntime`` runs on kiln by changing its import. Sessions compute in f32 by
default, as ONNX Runtime's CPU provider does (``SessionOptions.add_session_config_entry(
"kiln.inference_precision", "bf16")`` asks for bf16 where the CPU has it)."""
import enum
import json
import os
import time
import warnings

import numpy as np

from ._kiln import Core, Error

__all__ = [
    "ExecutionMode",
    "GraphOptimizationLevel",
    "InferenceSession",
    "NodeArg",
    "RunOptions",
    "SessionOptions",
    "get_available_providers",
    "get_device",
]

_CPU = "CPUExecutionProvider"

# kiln element type -> ONNX Runtime's type string
_ORT_TYPES = {
    "f32": "float", "f64": "double", "f16": "float16", "bf16": "bfloat16",
    "i8": "int8", "u8": "uint8", "i16": "int16", "u16": "uint16", "i32": "int32", "u32": "uint32",
    "i64": "int64", "u64": "uint64", "bool": "bool", "string": "string",
    "f8e4m3fn": "float8e4m3fn", "f8e4m3fnuz": "float8e4m3fnuz", "f8e5m2": "float8e5m2",
    "f8e5m2fnuz": "float8e5m2fnuz", "u4": "uint4", "i4": "int4", "f4e2m1": "float4e2m1",
}


def get_available_providers():
    """kiln runs on the CPU: ['CPUExecutionProvider']."""
    return [_CPU]


def get_device():
    return "CPU"


class GraphOptimizationLevel(enum.IntEnum):
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class SessionOptions:
    """The fields ONNX Runtime code sets, mapped to kiln's compile properties:
    ``intra_op_num_threads`` -> inference_num_threads (0: all CPUs), ``enable_profiling`` ->
    enable_profiling (``InferenceSession.end_profiling`` writes the trace),
    ``graph_optimization_level = ORT_DISABLE_ALL`` -> kiln_disable_passes=all-fusions.
    ``add_session_config_entry("kiln.<property>", value)`` passes any kiln property
    (docs/settings.md). Fields kiln has no use for (inter_op_num_threads, execution_mode,
    log levels, memory-pattern switches) are accepted and ignored."""

    def __init__(self):
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.enable_profiling = False
        self.profile_file_prefix = "kiln_profile"
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.enable_mem_pattern = True
        self.enable_cpu_mem_arena = True
        self.enable_mem_reuse = True
        self.use_deterministic_compute = False
        self.optimized_model_filepath = ""
        self._config = {}

    def add_session_config_entry(self, key, value):
        self._config[str(key)] = str(value)

    def get_session_config_entry(self, key):
        return self._config[str(key)]

    def _properties(self):
        threads = int(self.intra_op_num_threads or 0)
        if threads < 0:
            raise Error(f"SessionOptions.intra_op_num_threads must be >= 0, got {threads}")
        props = {"inference_precision": "f32", "inference_num_threads": str(threads)}
        if self.enable_profiling:
            props["enable_profiling"] = "YES"
        if int(self.graph_optimization_level) == int(GraphOptimizationLevel.ORT_DISABLE_ALL):
            props["kiln_disable_passes"] = "all-fusions"
        for key, value in self._config.items():
            if key.startswith("kiln."):
                props[key[len("kiln."):]] = value
        return props


class RunOptions:
    """Accepted for compatibility (log levels, tags, terminate); kiln runs every request to
    its end."""

    def __init__(self):
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.run_tag = ""
        self.terminate = False
        self.only_execute_path_to_fetches = False


class NodeArg:
    """A session input or output: ``name``, ``shape`` (ints where fixed, the dim's name or None
    where dynamic) and ``type`` as ONNX Runtime writes it (``tensor(float)``,
    ``seq(tensor(int64))``, ``optional(tensor(float))``)."""

    def __init__(self, port):
        self.name = port.name
        self.shape = port.shape
        element = f"tensor({_ORT_TYPES.get(port.element_type, port.element_type)})"
        self.type = {"tensor": element, "sequence": f"seq({element})", "optional": f"optional({element})"}[port.kind]

    def __repr__(self):
        return f"NodeArg(name='{self.name}', type='{self.type}', shape={self.shape})"


class InferenceSession:
    """ONNX Runtime's InferenceSession on kiln. ``path_or_bytes``: an ONNX file or its bytes.
    ``providers``: kiln runs everything on the CPU; other providers are ignored with a warning,
    as ONNX Runtime does for providers it does not have."""

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, **kwargs):
        self._options = sess_options or SessionOptions()
        for p in providers or []:
            name = p[0] if isinstance(p, (tuple, list)) else p
            if name != _CPU:
                warnings.warn(f"kiln: provider '{name}' is not available; running on {_CPU}", RuntimeWarning,
                              stacklevel=2)
        core = Core()
        self._model = core.read_model(path_or_bytes)  # a path (str / PathLike) or the bytes
        self._compiled = core.compile_model(self._model, self._options._properties())
        self._inputs = [NodeArg(p) for p in self._compiled.inputs]
        self._outputs = [NodeArg(p) for p in self._compiled.outputs]
        self._request = self._compiled.create_infer_request()
        self._profile = []  # chrome-trace events of the runs so far (enable_profiling)
        self._profile_start = time.time()

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_overridable_initializers(self):
        return []

    def get_providers(self):
        return [_CPU]

    def get_provider_options(self):
        return {_CPU: {}}

    def get_session_options(self):
        return self._options

    def set_providers(self, providers=None, provider_options=None):
        pass

    def run(self, output_names, input_feed, run_options=None):
        """Runs once: ``input_feed`` {input name: array}; returns the outputs named (all when
        ``output_names`` is None or empty) as a list of arrays, in that order."""
        if not isinstance(input_feed, dict):
            raise Error(f"InferenceSession.run: input_feed must be a dict of input name -> array, "
                        f"got {type(input_feed).__name__}")
        names = [o.name for o in self._outputs]
        wanted = list(output_names) if output_names else names
        for n in wanted:
            if n not in names:
                raise Error(f"InferenceSession.run: the model has no output '{n}'; its outputs: {', '.join(names)}")
        results = self._request.infer(input_feed)
        if self._options.enable_profiling:
            self._record_profile()
        return [_copy(results[n]) for n in wanted]

    def _record_profile(self):
        for row in self._request.get_profiling_info():
            if row.status != "EXECUTED":
                continue
            self._profile.append({"cat": "Node", "name": row.node_name, "ph": "X", "pid": os.getpid(), "tid": 0,
                                  "ts": row.start_us, "dur": row.real_time_us,
                                  "args": {"op_name": row.node_type, "provider": _CPU, "exec_type": row.exec_type}})

    def end_profiling(self):
        """Writes the runs' per-node times as a Chrome trace (``<profile_file_prefix>_<date>.json``)
        and returns its path; '' when profiling is off."""
        if not self._options.enable_profiling:
            return ""
        path = f"{self._options.profile_file_prefix}_{time.strftime('%Y-%m-%d_%H-%M-%S')}.json"
        with open(path, "w") as f:
            json.dump(self._profile, f)
        self._profile = []
        return path


def _copy(value):
    """Outputs ONNX Runtime hands out are the caller's own: a copy, so a later run of the
    session cannot reach them."""
    if isinstance(value, np.ndarray):
        return np.array(value, copy=True)
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
