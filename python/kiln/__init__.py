"""kiln: a CPU inference engine for ONNX models.

Two ways in (docs/python.md):

* OpenVINO style::

      import kiln
      core = kiln.Core()
      compiled = core.compile_model("model.onnx", {"inference_precision": "f32"})
      outputs = compiled.create_infer_request().infer({"input": x})   # {name: ndarray}

* ONNX Runtime style (existing ORT code changes only its import)::

      import kiln as ort
      sess = ort.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])
      y = sess.run(None, {sess.get_inputs()[0].name: x})[0]

Every error a caller can cause raises ``kiln.Error`` (a ``RuntimeError``) with the C++ API's
message.
"""
from ._kiln import (  # noqa: F401  (re-exported)
    Core,
    CompiledModel,
    Error,
    InferRequest,
    Model,
    Port,
    ProfilingInfo,
    __version__,
)
from ._async_queue import AsyncInferQueue  # noqa: F401
from ._ort import (  # noqa: F401
    ExecutionMode,
    GraphOptimizationLevel,
    InferenceSession,
    NodeArg,
    RunOptions,
    SessionOptions,
    get_available_providers,
    get_device,
)

__all__ = [
    "AsyncInferQueue",
    "CompiledModel",
    "Core",
    "Error",
    "ExecutionMode",
    "GraphOptimizationLevel",
    "InferRequest",
    "InferenceSession",
    "Model",
    "NodeArg",
    "Port",
    "ProfilingInfo",
    "RunOptions",
    "SessionOptions",
    "get_available_providers",
    "get_device",
]
