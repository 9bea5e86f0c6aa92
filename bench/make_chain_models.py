#!/usr/bin/env python3
"""Elementwise-chain test models for the snippets benchmark (issue 5), written next to the
peer models so bench/compare_ort.sh times them like any other model:

  $KILN_BENCH_CACHE/models/<name>/model.onnx and inputs/x.npy   (default ~/.cache/kiln-bench)

  chain12_arith   12 cheap elementwise ops (Add, Mul, Relu, Sub, Abs, Max, Min, Sqrt, Neg, Clip)
                  over one 1x64x256x256 f32 tensor: memory-bound, one pass over the data when fused.
  chain12_mixed   12 ops of which 4 transcendental (Sigmoid, Tanh, Erf, Exp), same shape.
  gelu_prims      Erf-GELU written as ONNX primitives: x * (erf(x / sqrt 2) + 1) * 0.5
  hswish_prims    hard-swish as primitives: x * clip(x + 3, 0, 6) / 6
  softmax_scores  attention-score style: softmax(x / 8 + mask) over the last dim (256), the
                  mask a [1, 1, 1, 256] initializer: a reduction kernel with a scratch row
  transpose_scale relu(transpose(x, [0, 2, 1, 3]) * 0.125 + 0.5), x [1, 256, 64, 256]: the
                  kernel reads x in the permuted order (a head split fused into the kernel)

Run with /usr/bin/python3 (onnx, numpy).  usage: make_chain_models.py [--only a,b] [--force]
"""
import argparse
import os

import numpy as np
import onnx
import onnx.numpy_helper
from onnx import TensorProto, helper

SHAPE = [1, 64, 256, 256]


def scalar(name, v):
    return helper.make_tensor(name, TensorProto.FLOAT, [], [float(v)])


def graph_model(name, nodes, inits, in_shape=None):
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape or SHAPE)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, SHAPE)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="kiln-bench")
    onnx.checker.check_model(m)
    return m


def gelu_prims():
    n = helper.make_node
    return graph_model("gelu_prims", [n("Div", ["x", "s2"], ["a"]), n("Erf", ["a"], ["b"]), n("Add", ["b", "one"], ["c"]),
                                      n("Mul", ["x", "c"], ["d"]), n("Mul", ["d", "half"], ["y"])],
                       [scalar("s2", 2 ** 0.5), scalar("one", 1.0), scalar("half", 0.5)])


def hswish_prims():
    n = helper.make_node
    return graph_model("hswish_prims", [n("Add", ["x", "three"], ["a"]), n("Clip", ["a", "zero", "six"], ["b"]),
                                        n("Div", ["b", "six"], ["c"]), n("Mul", ["x", "c"], ["y"])],
                       [scalar("three", 3.0), scalar("zero", 0.0), scalar("six", 6.0)])


def softmax_scores():
    n = helper.make_node
    mask = np.where(np.arange(SHAPE[-1]) % 5 == 4, -10000.0, 0.0).astype(np.float32).reshape(1, 1, 1, SHAPE[-1])
    return graph_model("softmax_scores", [n("Div", ["x", "scale"], ["a"]), n("Add", ["a", "mask"], ["b"]),
                                          n("Softmax", ["b"], ["y"], axis=-1)],
                       [scalar("scale", 8.0), onnx.numpy_helper.from_array(mask, "mask")])


# [1, 256, 64, 256] read as [1, 64, 256, 256]: a head split's transpose, then elementwise ops
TRANSPOSED_IN = [SHAPE[0], SHAPE[2], SHAPE[1], SHAPE[3]]


def transpose_scale():
    n = helper.make_node
    return graph_model("transpose_scale", [n("Transpose", ["x"], ["t"], perm=[0, 2, 1, 3]), n("Mul", ["t", "scale"], ["a"]),
                                           n("Add", ["a", "bias"], ["b"]), n("Relu", ["b"], ["y"])],
                       [scalar("scale", 0.125), scalar("bias", 0.5)], TRANSPOSED_IN)


def build(name, ops):
    """ops: list of (op_type, const or None, attrs); each applied to the previous value."""
    nodes, inits = [], []
    cur = "x"
    for i, (op, const, attrs) in enumerate(ops):
        out = f"v{i}" if i + 1 < len(ops) else "y"
        ins = [cur]
        if op == "Clip":
            lo, hi = const
            inits += [scalar(f"lo{i}", lo), scalar(f"hi{i}", hi)]
            ins += [f"lo{i}", f"hi{i}"]
        elif const is not None:
            inits.append(scalar(f"c{i}", const))
            ins.append(f"c{i}")
        nodes.append(helper.make_node(op, ins, [out], name=f"{op.lower()}_{i}", **attrs))
        cur = out
    return graph_model(name, nodes, inits)


MODELS = {
    "chain12_arith": [("Add", 0.5, {}), ("Mul", 1.5, {}), ("Relu", None, {}), ("Sub", 0.25, {}), ("Abs", None, {}),
                      ("Max", 0.1, {}), ("Min", 4.0, {}), ("Sqrt", None, {}), ("Mul", -0.75, {}), ("Neg", None, {}),
                      ("Clip", (0.0, 1.25), {}), ("Add", 1.0, {})],
    "chain12_mixed": [("Mul", 0.5, {}), ("Sigmoid", None, {}), ("Add", -0.25, {}), ("Tanh", None, {}),
                      ("Mul", 3.0, {}), ("Erf", None, {}), ("Abs", None, {}), ("Neg", None, {}), ("Exp", None, {}),
                      ("Sub", 0.5, {}), ("Max", -0.2, {}), ("Mul", 2.0, {})],
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()
    root = os.path.join(os.environ.get("KILN_BENCH_CACHE", os.path.expanduser("~/.cache/kiln-bench")), "models")
    builders = {name: (lambda name=name: build(name, MODELS[name])) for name in MODELS}
    builders.update({"gelu_prims": gelu_prims, "hswish_prims": hswish_prims, "softmax_scores": softmax_scores,
                     "transpose_scale": transpose_scale})
    names = [n for n in a.only.split(",") if n] or list(builders)
    for n in names:
        if n not in builders:
            raise SystemExit(f"make_chain_models: unknown model {n} (known: {', '.join(builders)})")
        d = os.path.join(root, n)
        if os.path.exists(os.path.join(d, "model.onnx")) and not a.force:
            continue
        os.makedirs(os.path.join(d, "inputs"), exist_ok=True)
        onnx.save(builders[n](), os.path.join(d, "model.onnx"))
        x = np.random.default_rng(0).uniform(-3, 3, TRANSPOSED_IN if n == "transpose_scale" else SHAPE).astype(np.float32)
        np.save(os.path.join(d, "inputs", "x.npy"), x)
        print(f"wrote {d}")


if __name__ == "__main__":
    main()
