"""Fixtures of the Python tests: small ONNX models written with onnx.helper into a temporary
folder, and the kiln CLI (env KILN_CLI) for comparing with its results. The tests import the
module from the build tree (ctest sets PYTHONPATH=<build>/python)."""
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper


def _save(model, path):
    onnx.save(model, str(path))
    return str(path)


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    rng = np.random.default_rng(7)
    out = {}

    # x[batch, 16] -> MatMul(16x32) + b -> Relu -> MatMul(32x10) -> Softmax: y[batch, 10]
    w1 = numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32) * 0.3, "w1")
    b1 = numpy_helper.from_array(rng.standard_normal(32).astype(np.float32) * 0.1, "b1")
    w2 = numpy_helper.from_array(rng.standard_normal((32, 10)).astype(np.float32) * 0.3, "w2")
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
         helper.make_node("Add", ["h", "b1"], ["hb"], name="bias1"),
         helper.make_node("Relu", ["hb"], ["r"], name="relu1"),
         helper.make_node("MatMul", ["r", "w2"], ["z"], name="fc2"),
         helper.make_node("Softmax", ["z"], ["y"], name="softmax", axis=-1)],
        "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])], [w1, b1, w2])
    out["mlp"] = _save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), d / "mlp.onnx")
    out["mlp_weights"] = (numpy_helper.to_array(w1), numpy_helper.to_array(b1), numpy_helper.to_array(w2))

    # two inputs of other types: a[n] int64, b[n] int64 -> s = a + b, c = Cast<float>(s), flag = s > 0
    g = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["s"], name="add"),
         helper.make_node("Cast", ["s"], ["c"], name="cast", to=TensorProto.FLOAT),
         helper.make_node("Greater", ["s", "zero"], ["flag"], name="gt")],
        "ints", [helper.make_tensor_value_info("a", TensorProto.INT64, ["n"]),
                 helper.make_tensor_value_info("b", TensorProto.INT64, ["n"])],
        [helper.make_tensor_value_info("s", TensorProto.INT64, ["n"]),
         helper.make_tensor_value_info("c", TensorProto.FLOAT, ["n"]),
         helper.make_tensor_value_info("flag", TensorProto.BOOL, ["n"])],
        [numpy_helper.from_array(np.array(0, dtype=np.int64), "zero")])
    out["ints"] = _save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), d / "ints.onnx")

    # wide: x[n, 512] -> 4 x (MatMul 512x512 -> Relu): enough work per run to watch other threads
    nodes, inits, prev = [], [], "x"
    for i in range(4):
        inits.append(numpy_helper.from_array(rng.standard_normal((512, 512)).astype(np.float32) * 0.05, f"w{i}"))
        nodes += [helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"]), helper.make_node("Relu", [f"m{i}"], [f"r{i}"])]
        prev = f"r{i}"
    g = helper.make_graph(nodes, "wide", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 512])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, ["n", 512])], inits)
    out["wide"] = _save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), d / "wide.onnx")

    # sequences: xs (a list of [k, 2] float tensors) -> ConcatFromSequence (axis 0) -> y, and
    # y -> SplitToSequence (rows of 1) -> parts
    seq_type = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, None))
    g = helper.make_graph(
        [helper.make_node("ConcatFromSequence", ["xs"], ["y"], name="cat", axis=0),
         helper.make_node("SplitToSequence", ["y"], ["parts"], name="split", axis=0, keepdims=1)],
        "seq", [helper.make_value_info("xs", seq_type)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None), helper.make_value_info("parts", seq_type)])
    out["seq"] = _save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), d / "seq.onnx")

    # text: StringNormalizer (lower case) on a [n] string tensor
    g = helper.make_graph(
        [helper.make_node("StringNormalizer", ["t"], ["u"], name="norm", case_change_action="LOWER")],
        "text", [helper.make_tensor_value_info("t", TensorProto.STRING, ["n"])],
        [helper.make_tensor_value_info("u", TensorProto.STRING, ["n"])])
    out["text"] = _save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), d / "text.onnx")
    return out


def mlp_reference(weights, x):
    w1, b1, w2 = (w.astype(np.float64) for w in weights)
    z = np.maximum(x.astype(np.float64) @ w1 + b1, 0) @ w2
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.fixture(scope="session")
def kiln_cli():
    path = os.environ.get("KILN_CLI")
    if not path or not os.path.exists(path):
        pytest.fail("KILN_CLI must name the built kiln binary (ctest sets it)")
    return path
