#!/usr/bin/env python3
"""Writes seed inputs for the fuzz targets (fuzz/CMakeLists.txt) into OUT/<target>/:

  model         the ONNX backend suite's node models (Debian libonnx-testdata, files under
                4 KiB), kiln's own opset 18-23 cases (tests/data/onnx_new) and the built-in
                zoo's MLP (kiln zoo), so the fuzzer starts from every operator kiln has;
  tensor_proto  the input / output TensorProtos of the same cases (under 4 KiB);
  npy           .npy files of every dtype kiln reads, C and Fortran order, 0-d to 4-d, empty,
                version 1.0 / 2.0 / 3.0 headers;
  pattern_json  the pattern library's configs (src/pattern/library/*.json).

These are seeds, not the kept corpus: run the fuzzers from them, then merge what they found
into fuzz/corpus/<target> (`fuzz_<target> -merge=1 fuzz/corpus/<target> OUT/<target> NEW/`,
docs/security.md). Needs /usr/bin/python3 with numpy.

usage: /usr/bin/python3 fuzz/make_corpus.py OUT [--kiln build/kiln]
"""
import argparse
import glob
import hashlib
import io
import os
import shutil
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTDATA = "/usr/share/libonnx-testdata/data"
MAX_BYTES = 4096


def put(out, target, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)


def small_files(pattern):
    for p in sorted(glob.glob(pattern, recursive=True)):
        if os.path.getsize(p) <= MAX_BYTES:
            with open(p, "rb") as f:
                yield f.read()


def npy_seeds():
    dtypes = ["<f4", "<f8", "<f2", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "|b1", ">f4", "<U5"]
    shapes = [(), (0,), (3,), (2, 3), (2, 1, 3), (1, 2, 2, 2)]
    rng = np.random.default_rng(0)
    for dt in dtypes:
        for shape in shapes:
            if dt.endswith("U5"):
                a = np.array(rng.choice(["a", "bc", "déf", ""], size=shape), dtype=dt)
            else:
                a = (rng.standard_normal(shape) * 3).astype(dt)
            for order in ("C", "F"):
                b = io.BytesIO()
                np.save(b, np.asarray(a, order=order), allow_pickle=False)
                yield b.getvalue()
    for version in ((2, 0), (3, 0)):
        b = io.BytesIO()
        a = np.arange(6, dtype="<f4").reshape(2, 3)
        np.lib.format.write_array(b, a, version=version)
        yield b.getvalue()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"))
    args = ap.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    n = {}
    for src in (f"{TESTDATA}/node/*/model.onnx", f"{ROOT}/tests/data/onnx_new/node/*/model.onnx"):
        for data in small_files(src):
            put(args.out, "model", data)
    for src in (f"{TESTDATA}/node/*/test_data_set_0/*.pb", f"{ROOT}/tests/data/onnx_new/node/*/test_data_set_0/*.pb"):
        for data in small_files(src):
            put(args.out, "tensor_proto", data)
    if os.path.exists(args.kiln):
        mlp = os.path.join(args.out, "mlp.onnx")
        subprocess.run([args.kiln, "zoo", "mlp", "-o", mlp], check=True, capture_output=True)
        with open(mlp, "rb") as f:
            put(args.out, "model", f.read())
        os.remove(mlp)
    for data in npy_seeds():
        put(args.out, "npy", data)
    for data in small_files(f"{ROOT}/src/pattern/library/*.json"):
        put(args.out, "pattern_json", data)
    for t in ("model", "tensor_proto", "npy", "pattern_json"):
        n[t] = len(os.listdir(os.path.join(args.out, t)))
    print(" ".join(f"{t}: {c}" for t, c in n.items()))


if __name__ == "__main__":
    sys.exit(main())
