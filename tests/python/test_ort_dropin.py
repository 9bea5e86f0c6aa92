"""kiln as a drop-in for ONNX Runtime: a script written for onnxruntime runs with only its
import changed."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kiln
from conftest import mlp_reference

ORT_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(sys.argv[1], sess_options=opts, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    x = np.random.default_rng(0).standard_normal((3, 16)).astype(np.float32)
    (y,) = sess.run(None, {inp.name: x})
    np.save(sys.argv[2], y)
    print(inp.name, inp.type, inp.shape, sess.get_outputs()[0].name, y.shape, sess.get_providers())
""")


def test_an_ort_script_runs_with_only_its_import_changed(models, tmp_path):
    script = tmp_path / "ort_script.py"
    script.write_text(ORT_SCRIPT.replace("import onnxruntime as ort", "import kiln as ort"))
    out = subprocess.run([sys.executable, str(script), models["mlp"], str(tmp_path / "y.npy")], check=True,
                         capture_output=True, text=True, env=dict(os.environ))
    assert out.stdout.strip() == "x tensor(float) ['batch', 16] y (3, 10) ['CPUExecutionProvider']"
    x = np.random.default_rng(0).standard_normal((3, 16)).astype(np.float32)
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), mlp_reference(models["mlp_weights"], x), rtol=1e-4,
                               atol=1e-6)


def test_session_inputs_outputs_and_types(models):
    sess = kiln.InferenceSession(models["ints"])
    assert [(i.name, i.type, i.shape) for i in sess.get_inputs()] == [("a", "tensor(int64)", ["n"]),
                                                                      ("b", "tensor(int64)", ["n"])]
    assert [o.type for o in sess.get_outputs()] == ["tensor(int64)", "tensor(float)", "tensor(bool)"]
    c, s = sess.run(["c", "s"], {"a": np.array([1, 2], np.int64), "b": np.array([3, 4], np.int64)})
    np.testing.assert_array_equal(s, [4, 6])
    assert c.dtype == np.float32


def test_session_from_bytes_computes_in_f32_by_default(models):
    with open(models["mlp"], "rb") as f:
        sess = kiln.InferenceSession(f.read())
    x = np.random.default_rng(4).standard_normal((2, 16)).astype(np.float32)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], mlp_reference(models["mlp_weights"], x), rtol=1e-4,
                               atol=1e-6)
    # outputs belong to the caller: a later run does not change them
    first = sess.run(None, {"x": x})[0]
    kept = first.copy()
    sess.run(None, {"x": -x})
    np.testing.assert_array_equal(first, kept)


def test_session_errors(models):
    sess = kiln.InferenceSession(models["mlp"])
    with pytest.raises(kiln.Error, match="has no output 'nope'"):
        sess.run(["nope"], {"x": np.zeros((1, 16), np.float32)})
    with pytest.raises(kiln.Error, match="input_feed must be a dict"):
        sess.run(None, [np.zeros((1, 16), np.float32)])
    with pytest.warns(RuntimeWarning, match="CUDAExecutionProvider"):
        kiln.InferenceSession(models["mlp"], providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    opts = kiln.SessionOptions()
    opts.add_session_config_entry("kiln.bogus_key", "1")
    with pytest.raises(kiln.Error, match="unknown property 'bogus_key'"):
        kiln.InferenceSession(models["mlp"], sess_options=opts)


def test_profiling_writes_a_chrome_trace(models, tmp_path):
    opts = kiln.SessionOptions()
    opts.enable_profiling = True
    opts.profile_file_prefix = str(tmp_path / "prof")
    sess = kiln.InferenceSession(models["mlp"], sess_options=opts)
    sess.run(None, {"x": np.ones((2, 16), np.float32)})
    path = sess.end_profiling()
    events = json.load(open(path))
    assert events and all(e["ph"] == "X" and e["dur"] >= 0 for e in events)
    assert {e["args"]["op_name"] for e in events} >= {"FullyConnected"}


def test_disabling_all_optimizations_keeps_the_values(models):
    opts = kiln.SessionOptions()
    opts.graph_optimization_level = kiln.GraphOptimizationLevel.ORT_DISABLE_ALL
    plain = kiln.InferenceSession(models["mlp"], sess_options=opts)
    fused = kiln.InferenceSession(models["mlp"])
    x = np.random.default_rng(5).standard_normal((3, 16)).astype(np.float32)
    np.testing.assert_allclose(plain.run(None, {"x": x})[0], fused.run(None, {"x": x})[0], rtol=1e-5, atol=1e-7)
