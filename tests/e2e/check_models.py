#!/usr/bin/env python3
"""End-to-end check: run kiln on real model architectures (tests/models/make_test_models.py
writes them: fixed random weights, reference outputs from torch) and compare every output
(rtol 1e-3, atol 1e-4 unless --atol). kiln runs with inference_precision=f32, as the references
were computed. Any directory of <name>/model.onnx, inputs/*.npy and ref_outputs/*.npy works.

usage: /usr/bin/python3 tests/e2e/check_models.py --kiln build/kiln --models DIR [--only a,b]
                                                   [--property KEY=VALUE ...]

--property passes a compile property to every run (e.g. snippets_mode=DISABLE: the same
models with the snippets JIT off must match the references too).

With --make, generates the models first (make_test_models.py into --models).
Prints one line per model and a closing "N passed, M failed" line; exit 1 on any failure.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def compare(name, ref, got, rtol, atol):
    if ref.shape != got.shape:
        return f"{name}: shape {got.shape}, expected {ref.shape}"
    if ref.dtype != got.dtype:
        return f"{name}: dtype {got.dtype}, expected {ref.dtype}"
    diff = np.abs(ref.astype(np.float64) - got.astype(np.float64))
    bad = diff > atol + rtol * np.abs(ref.astype(np.float64))
    if bad.any():
        i = int(np.argmax(diff))
        return (f"{name}: {int(bad.sum())} of {ref.size} values out of tolerance; max |diff| {diff.max():.3g} "
                f"at flat index {i} (got {got.flat[i]:.6g}, expected {ref.flat[i]:.6g})")
    return None


def check_model(kiln, model_dir, rtol, atol, properties=()):
    inputs = sorted(glob.glob(os.path.join(model_dir, "inputs", "*.npy")))
    refs = sorted(glob.glob(os.path.join(model_dir, "ref_outputs", "*.npy")))
    if not refs:
        return False, "no reference outputs"
    with tempfile.TemporaryDirectory() as out:
        # f32 like the references (the default is bf16 on CPUs with native bf16, docs/settings.md)
        cmd = [kiln, "run", os.path.join(model_dir, "model.onnx"), "--output-dir", out,
               "--property", "inference_precision=f32"]
        for p in properties:
            cmd += ["--property", p]
        for p in inputs:
            cmd += ["--input", f"{os.path.splitext(os.path.basename(p))[0]}={p}"]
        t0 = time.time()
        r = subprocess.run(cmd, capture_output=True, text=True)
        secs = time.time() - t0
        if r.returncode != 0:
            return False, f"kiln exited {r.returncode}: {r.stderr.strip()[-500:]}"
        for ref_path in refs:
            name = os.path.basename(ref_path)
            got_path = os.path.join(out, name)
            if not os.path.exists(got_path):
                return False, f"kiln wrote no output {name}"
            err = compare(name, np.load(ref_path), np.load(got_path), rtol, atol)
            if err:
                return False, err
    return True, f"{len(refs)} output(s) match ({secs:.1f} s)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--make", action="store_true")
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--property", action="append", default=[])
    a = ap.parse_args()
    only = [m for m in a.only.split(",") if m]
    if a.make:
        cmd = ["/usr/bin/python3", os.path.join(HERE, "..", "models", "make_test_models.py"), "--out", a.models]
        if only:
            cmd += ["--only", ",".join(only)]
        subprocess.run(cmd, check=True, stdout=sys.stderr)
    names = only or sorted(d for d in os.listdir(a.models) if os.path.isdir(os.path.join(a.models, d)))
    passed = failed = 0
    for n in names:
        ok, msg = check_model(a.kiln, os.path.join(a.models, n), a.rtol, a.atol, a.property)
        print(f"{'PASS' if ok else 'FAIL'} {n}: {msg}", flush=True)
        passed += ok
        failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
