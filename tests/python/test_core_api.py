"""The OpenVINO-style API: Core / Model / CompiledModel / InferRequest / AsyncInferQueue."""
import subprocess
import threading

import numpy as np
import pytest

import kiln
from conftest import mlp_reference

F32 = {"inference_precision": "f32"}


def test_model_ports_show_dtypes_and_symbolic_dims(models):
    model = kiln.Core().read_model(models["mlp"])
    (x,), (y,) = model.inputs, model.outputs
    assert (x.name, x.element_type, x.dtype, x.kind, x.shape) == ("x", "f32", np.float32, "tensor", ["batch", 16])
    assert (y.name, y.shape) == ("y", ["batch", 10])
    assert model.opset == 17


def test_infer_matches_numpy_on_every_batch(models):
    compiled = kiln.Core().compile_model(models["mlp"], F32)
    request = compiled.create_infer_request()
    rng = np.random.default_rng(1)
    for batch in (1, 5, 2):
        x = rng.standard_normal((batch, 16)).astype(np.float32)
        out = request.infer({"x": x})
        assert list(out) == ["y"]
        np.testing.assert_allclose(out["y"], mlp_reference(models["mlp_weights"], x), rtol=1e-4, atol=1e-6)
    # by position, one array, the compiled model's own request: the same values
    np.testing.assert_array_equal(request.infer([x])["y"], out["y"])
    np.testing.assert_array_equal(request.infer(x)["y"], out["y"])
    np.testing.assert_array_equal(compiled(x)["y"], out["y"])


def test_results_equal_the_cli_on_the_same_inputs(models, kiln_cli, tmp_path):
    x = np.random.default_rng(2).standard_normal((4, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    subprocess.run([kiln_cli, "run", models["mlp"], "--input", f"x={tmp_path / 'x.npy'}", "--output-dir",
                    str(tmp_path / "out"), "-p", "inference_precision=f32"], check=True, capture_output=True)
    cli = np.load(tmp_path / "out" / "y.npy")
    py = kiln.Core().compile_model(models["mlp"], F32).create_infer_request().infer({"x": x})["y"]
    np.testing.assert_array_equal(py, cli)


def test_a_contiguous_input_of_the_right_type_is_not_copied(models):
    request = kiln.Core().compile_model(models["mlp"], F32).create_infer_request()
    x = np.ones((2, 16), np.float32)
    request.infer({"x": x})
    assert np.shares_memory(request.get_input_tensor("x"), x)
    # another dtype or a strided view is converted: a copy with the values of the array
    x64 = np.ones((2, 16), np.float64)
    request.infer({"x": x64})
    seen = request.get_input_tensor("x")
    assert seen.dtype == np.float32 and not np.shares_memory(seen, x64)
    strided = np.ones((2, 32), np.float32)[:, ::2]
    request.infer({"x": strided})
    assert not np.shares_memory(request.get_input_tensor("x"), strided)
    np.testing.assert_array_equal(request.get_input_tensor("x"), strided)


def test_outputs_stay_valid_after_later_runs(models):
    request = kiln.Core().compile_model(models["mlp"], F32).create_infer_request()
    a = np.full((1, 16), 0.5, np.float32)
    first = request.infer({"x": a})["y"]
    kept = first.copy()
    request.infer({"x": -a})  # a held output is never written over
    np.testing.assert_array_equal(first, kept)


def test_integer_bool_and_string_tensors(models):
    core = kiln.Core()
    out = core.compile_model(models["ints"]).create_infer_request().infer(
        {"a": np.array([1, -5, 3], np.int64), "b": np.array([2, 2, -3], np.int64)})
    np.testing.assert_array_equal(out["s"], [3, -3, 0])
    assert out["s"].dtype == np.int64 and out["c"].dtype == np.float32 and out["flag"].dtype == np.bool_
    np.testing.assert_array_equal(out["flag"], [True, False, False])
    text = core.compile_model(models["text"]).create_infer_request().infer({"t": np.array(["Hello", "KILN"])})
    assert text["u"].tolist() == ["hello", "kiln"]


def test_sequence_inputs_and_outputs_are_lists(models):
    request = kiln.Core().compile_model(models["seq"]).create_infer_request()
    assert [p.kind for p in request.inputs] == ["sequence"]
    a, b = np.ones((1, 2), np.float32), np.full((2, 2), 2.0, np.float32)
    out = request.infer({"xs": [a, b]})
    np.testing.assert_array_equal(out["y"], np.concatenate([a, b]))
    assert isinstance(out["parts"], list) and len(out["parts"]) == 3
    np.testing.assert_array_equal(out["parts"][2], b[1:])
    with pytest.raises(kiln.Error, match="input 'xs' is a sequence: pass a list of arrays"):
        request.infer({"xs": a})


def test_errors_are_kiln_errors_with_the_cpp_messages(models):
    core = kiln.Core()
    with pytest.raises(kiln.Error, match="does not exist|cannot open|No such file"):
        core.read_model("/no/such/model.onnx")
    request = core.compile_model(models["mlp"], F32).create_infer_request()
    with pytest.raises(kiln.Error, match="has no input 'z'; its inputs: x"):
        request.infer({"z": np.zeros((1, 16), np.float32)})
    with pytest.raises(kiln.Error, match=r"dim 1 must be 16"):
        request.infer({"x": np.zeros((1, 5), np.float32)})
    with pytest.raises(kiln.Error, match="unknown property 'bogus'"):
        core.compile_model(models["mlp"], {"bogus": 1})
    with pytest.raises(kiln.Error, match="input 'x': a f32 input cannot take an array of object"):
        request.infer({"x": object()})
    assert issubclass(kiln.Error, RuntimeError)


def test_compile_model_takes_openvinos_device_argument(models):
    core = kiln.Core()
    x = np.random.default_rng(3).standard_normal((1, 16)).astype(np.float32)
    want = core.compile_model(models["mlp"], F32)({"x": x})["y"]
    compiled = core.compile_model(models["mlp"], "CPU", F32)
    assert compiled.get_property("inference_precision") == "f32"
    np.testing.assert_array_equal(compiled({"x": x})["y"], want)
    assert core.compile_model(models["mlp"], "CPU") is not None
    np.testing.assert_array_equal(core.compile_model(models["mlp"], device_name="CPU", properties=F32)({"x": x})["y"], want)
    with pytest.raises(kiln.Error, match="device 'GPU': kiln runs on the CPU"):
        core.compile_model(models["mlp"], "GPU", F32)
    with pytest.raises(kiln.Error, match="properties given twice"):
        core.compile_model(models["mlp"], F32, F32)


def test_properties_and_profiling(models):
    compiled = kiln.Core().compile_model(models["mlp"], {"inference_precision": "f32", "enable_profiling": True,
                                                          "num_streams": 2})
    assert compiled.get_property("num_streams") == "2"
    assert compiled.get_property("enable_profiling") == "YES"
    request = compiled.create_infer_request()
    request.infer({"x": np.ones((2, 16), np.float32)})
    rows = request.get_profiling_info()
    executed = [r for r in rows if r.status == "EXECUTED"]
    assert executed and all(r.real_time_us >= 0 and r.exec_type for r in executed)
    assert {r.node_type for r in executed} >= {"FullyConnected"}
    runtime = compiled.get_runtime_model([[2, 16]])
    assert runtime["reference_reason"] == "" and any(n["type"] == "FullyConnected" for n in runtime["nodes"])


def test_async_requests_callbacks_and_errors(models):
    compiled = kiln.Core().compile_model(models["mlp"], {"inference_precision": "f32", "num_streams": 2})
    request = compiled.create_infer_request()
    seen = []
    request.set_callback(lambda userdata: seen.append((userdata, request.results["y"].shape)), "tag")
    request.start_async({"x": np.ones((3, 16), np.float32)})
    request.wait()
    assert seen == [("tag", (3, 10))]
    assert request.wait_for(1000)
    request.set_callback(None)
    request.start_async({"x": np.ones((3, 7), np.float32)})
    with pytest.raises(kiln.Error, match="dim 1 must be 16"):
        request.wait()
    # a callback that raises: the run's wait() says so
    request.set_callback(lambda _: 1 / 0)
    request.start_async({"x": np.ones((1, 16), np.float32)})
    with pytest.raises(kiln.Error, match="callback raised"):
        request.wait()


def test_async_infer_queue_runs_every_job(models):
    compiled = kiln.Core().compile_model(models["mlp"], {"inference_precision": "f32", "num_streams": 2})
    queue = kiln.AsyncInferQueue(compiled, 3)
    assert len(queue) == 3
    results = {}
    lock = threading.Lock()

    def done(request, i):
        with lock:
            results[i] = request.results["y"].copy()

    queue.set_callback(done)
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((2, 16)).astype(np.float32) for _ in range(12)]
    for i, x in enumerate(xs):
        queue.start_async({"x": x}, i)
    queue.wait_all()
    assert sorted(results) == list(range(12))
    for i, x in enumerate(xs):
        np.testing.assert_allclose(results[i], mlp_reference(models["mlp_weights"], x), rtol=1e-4, atol=1e-6)


def test_the_gil_is_released_while_kiln_runs(models):
    # Two Python threads infer at once, each on its own model running on the calling thread.
    # The per-node start times kiln records (profiling) say when each run was inside kiln: a
    # thread holding the GIL through inference would keep the other out of kiln until it
    # returned, so the two runs could never overlap.
    props = {"inference_precision": "f32", "num_streams": 0, "inference_num_threads": 1, "enable_profiling": True}
    requests = [kiln.Core().compile_model(models["wide"], props).create_infer_request() for _ in range(2)]
    x = np.ones((4096, 512), np.float32)
    for r in requests:
        r.infer({"x": x})
    spans = [[], []]
    barrier = threading.Barrier(2)

    def run(i):
        for _ in range(3):
            barrier.wait()
            requests[i].infer({"x": x})
            rows = [p for p in requests[i].get_profiling_info() if p.status == "EXECUTED"]
            spans[i].append((min(p.start_us for p in rows), max(p.start_us + p.real_time_us for p in rows)))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    overlaps = [(a, b) for a in spans[0] for b in spans[1] if a[0] < b[1] and b[0] < a[1]]
    assert overlaps, f"the runs never overlapped: {spans}"
