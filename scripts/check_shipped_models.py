#!/usr/bin/env python3
"""Models as they are shipped: fetches ONNX files published in packages of the npm registry,
runs each on kiln (f32) and on ONNX Runtime (onnxruntime-node) with the same generated inputs,
and compares every output (rtol 1e-3, atol 1e-4). Prints one line per model and kiln's
single-thread median latency (kiln benchmark).

Needs network access to the npm registry, `npm`, and onnxruntime-node in
$KILN_BENCH_CACHE/node_modules (default ~/.cache/kiln-bench; `npm install --prefix DIR
onnxruntime-node@1.30.0`, as ../shared/bench/setup.sh does). Not part of the test suite (it
downloads); models are cached in $KILN_BENCH_CACHE/shipped.

usage: /usr/bin/python3 scripts/check_shipped_models.py [--kiln build/kiln] [--only NAME,...]
"""
import argparse
import base64
import json
import os
import subprocess
import sys
import tarfile
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.environ.get("KILN_BENCH_CACHE", os.path.expanduser("~/.cache/kiln-bench"))


def vad_inputs(state_name, state_shape, extra=()):
    def make(rng):
        d = {"input": (rng.standard_normal((1, 512)) * 0.3).astype(np.float32), "sr": np.array(16000, np.int64)}
        for name, shape in ((state_name, state_shape),) + tuple(extra):
            d[name] = np.zeros(shape, np.float32)
        return d
    return make


# name: (npm package@version, file in the package, input generator)
MODELS = {
    "silero_vad_legacy": ("@ricky0123/vad-web@0.0.31", "package/dist/silero_vad_legacy.onnx",
                          vad_inputs("h", (2, 1, 64), (("c", (2, 1, 64)),))),
    "silero_vad_v5": ("@ricky0123/vad-web@0.0.31", "package/dist/silero_vad_v5.onnx", vad_inputs("state", (2, 1, 128))),
    "silero_vad_v6": ("@ricky0123/vad-web@0.0.31", "package/dist/silero_vad_v6.onnx", vad_inputs("state", (2, 1, 128))),
}

ORT_TYPES = {np.float32: "float32", np.int64: "int64", np.float16: "float16", np.int32: "int32", np.uint8: "uint8"}


def fetch(package, member, dest):
    if os.path.exists(dest):
        return dest
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run(["npm", "pack", package, "--silent"], cwd=tmp, capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"npm pack {package}: {r.stderr.strip()[-300:]}")
        tgz = os.path.join(tmp, r.stdout.strip().splitlines()[-1])
        with tarfile.open(tgz) as t:
            f = t.extractfile(member)
            if f is None:
                raise RuntimeError(f"{package} has no {member}")
            with open(dest, "wb") as out:
                out.write(f.read())
    return dest


def run_ort(model, inputs, tmp):
    spec = {k: {"type": ORT_TYPES[v.dtype.type], "dims": list(v.shape), "b64": base64.b64encode(v.tobytes()).decode()}
            for k, v in inputs.items()}
    with open(os.path.join(tmp, "in.json"), "w") as f:
        json.dump(spec, f)
    r = subprocess.run(["node", os.path.join(ROOT, "tests", "onnx_new", "ort_run.js"), model,
                        os.path.join(tmp, "in.json"), os.path.join(tmp, "out.json")], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("ONNX Runtime: " + r.stderr.strip()[-300:])
    with open(os.path.join(tmp, "out.json")) as f:
        out = json.load(f)
    types = {v: k for k, v in ORT_TYPES.items()}
    return {k: np.frombuffer(base64.b64decode(o["b64"]), types[o["type"]]).reshape(o["dims"]) for k, o in out.items()}


def run_kiln(kiln, model, inputs, tmp):
    args = [kiln, "run", model, "-p", "inference_precision=f32", "--output-dir", os.path.join(tmp, "kiln")]
    bench = [kiln, "benchmark", model, "-p", "inference_precision=f32", "-nthreads", "1", "-niter", "50",
             "--json", os.path.join(tmp, "bench.json")]
    for k, v in inputs.items():
        p = os.path.join(tmp, k + ".npy")
        np.save(p, v)
        args += ["--input", f"{k}={p}"]
        bench += ["--input", f"{k}={p}"]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("kiln: " + r.stderr.strip()[-300:])
    out = os.path.join(tmp, "kiln")
    outputs = {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out)}
    subprocess.run(bench, capture_output=True, text=True, check=True)
    with open(os.path.join(tmp, "bench.json")) as f:
        median = json.load(f)["latency_ms"]["median"]
    return outputs, median


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"))
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    names = [n for n in MODELS if not args.only or n in args.only.split(",")]
    failed = 0
    for name in names:
        package, member, make_inputs = MODELS[name]
        try:
            model = fetch(package, member, os.path.join(CACHE, "shipped", name + ".onnx"))
            inputs = make_inputs(np.random.default_rng(0))
            with tempfile.TemporaryDirectory() as tmp:
                want = run_ort(model, inputs, tmp)
                got, median = run_kiln(args.kiln, model, inputs, tmp)
            worst = []
            for k, w in want.items():
                g = got[k.replace("/", "_")]
                d = float(np.abs(g.astype(np.float64) - w.astype(np.float64)).max()) if w.size else 0.0
                ok = g.shape == w.shape and np.allclose(g, w, rtol=1e-3, atol=1e-4)
                worst.append((ok, k, d))
            ok = all(w[0] for w in worst)
            failed += not ok
            print(f"{'PASS' if ok else 'FAIL'} {name} ({package}): " +
                  ", ".join(f"{k} max|diff| {d:.3g}" for _, k, d in worst) + f"; kiln 1 thread median {median:.3f} ms")
        except Exception as e:  # noqa: BLE001 - reported per model
            failed += 1
            print(f"FAIL {name} ({package}): {e}")
    print(f"{len(names) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
