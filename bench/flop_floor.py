#!/usr/bin/env python3
"""The multiply-add work of a shape stream, and the time it takes at the FMA peak: the floor under
any f32 runtime's latency on this machine, to set beside a stream's measured times.

  /usr/bin/python3 bench/flop_floor.py MODEL.onnx --shapes SPEC [--peak GFLOPS] [--per-shape]

SPEC is the data_shape syntax of `kiln benchmark` and bench/dynamic_stream_ort.js
(`x[1,3,48,96][1,3,48,120]`, or `input_ids[1,8][1,12],attention_mask[1,8][1,12]`), or a stream's
name (`squeezenet-hw`, `bert-batch`: its shapes come from `node bench/dynamic_stream_ort.js
--gen NAME`). --peak is the machine's f32 FMA peak for the threads used (GFLOP/s; `limits.cpp` in
../shared/bench measures it; default 214, two Zen 2 cores).

Counted: Conv (2 x output elements x input channels per group x kernel size), Gemm and MatMul
(2 x M x N x K, batched). Nothing else: pooling, normalisation, activations and copies are
extra time on top of the floor. Shapes come from onnx.shape_inference with the inputs fixed.
"""
import argparse
import re
import subprocess
import sys

import onnx
from onnx import shape_inference


def parse_spec(spec):
    """{input: [shape, ...]}; an input with one shape keeps it in every group."""
    groups = {}
    for m in re.finditer(r'([A-Za-z_][\w.:/-]*)((?:\[[0-9, ]+\])+)', spec):
        groups[m.group(1)] = [[int(v) for v in s.split(',')] for s in re.findall(r'\[([0-9, ]+)\]', m.group(2))]
    if not groups:
        sys.exit(f'flop_floor: no shapes in "{spec}"')
    n = max(len(v) for v in groups.values())
    for name, shapes in groups.items():
        if len(shapes) not in (1, n):
            sys.exit(f'flop_floor: input {name} has {len(shapes)} shapes, the others {n}')
    return [{name: shapes[i if len(shapes) > 1 else 0] for name, shapes in groups.items()} for i in range(n)]


def dims(value_info):
    t = value_info.type.tensor_type
    if not t.HasField('shape'):
        return None
    out = []
    for d in t.shape.dim:
        if not d.HasField('dim_value'):
            return None
        out.append(d.dim_value)
    return out


def flops(model, shapes):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    inits = {i.name: list(i.dims) for i in m.graph.initializer}
    for inp in m.graph.input:
        if inp.name in shapes:
            shape = inp.type.tensor_type.shape
            del shape.dim[:]
            for v in shapes[inp.name]:
                shape.dim.add().dim_value = v
    m = shape_inference.infer_shapes(m, data_prop=True)
    known = dict(inits)
    for vi in list(m.graph.input) + list(m.graph.value_info) + list(m.graph.output):
        d = dims(vi)
        if d is not None:
            known.setdefault(vi.name, d)
    total, missing = 0, []
    for node in m.graph.node:
        if node.op_type == 'Conv':
            w, y = known.get(node.input[1]), known.get(node.output[0])
            if w is None or y is None:
                missing.append(node.name)
                continue
            per_output = 1
            for v in w[1:]:
                per_output *= v
            n_out = 1
            for v in y:
                n_out *= v
            total += 2 * n_out * per_output
        elif node.op_type in ('MatMul', 'Gemm'):
            a, y = known.get(node.input[0]), known.get(node.output[0])
            if a is None or y is None:
                missing.append(node.name)
                continue
            trans_a = any(at.name == 'transA' and at.i for at in node.attribute)
            k = a[-2] if trans_a else a[-1]
            n_out = 1
            for v in y:
                n_out *= v
            total += 2 * n_out * k
    return total, missing


def stream_spec(name):
    out = subprocess.run(['node', 'bench/dynamic_stream_ort.js', '--gen', name], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f'flop_floor: dynamic_stream_ort.js --gen {name}: {out.stderr.strip()}')
    return out.stdout.strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('model')
    ap.add_argument('--shapes', required=True, help='data_shape spec or a stream name')
    ap.add_argument('--peak', type=float, default=214.0, help='FMA peak, GFLOP/s (default 214)')
    ap.add_argument('--per-shape', action='store_true')
    args = ap.parse_args()
    spec = args.shapes if '[' in args.shapes else stream_spec(args.shapes)
    model = onnx.load(args.model)
    total = 0
    for group in parse_spec(spec):
        f, missing = flops(model, group)
        if missing:
            sys.exit(f'flop_floor: no static shape for {", ".join(missing[:3])} at {group}')
        total += f
        if args.per_shape:
            print(f'{group}: {f / 1e9:.3f} GFLOP, {f / args.peak / 1e6:.2f} ms at the peak')
    print(f'stream: {total / 1e9:.3f} GFLOP, {total / args.peak / 1e6:.2f} ms at {args.peak:g} GFLOP/s')


if __name__ == '__main__':
    main()
