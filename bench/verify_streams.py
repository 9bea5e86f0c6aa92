#!/usr/bin/env python3
"""Checks kiln's outputs on the variable-shape streams of bench/compare_dynamic.sh against ONNX
Runtime's, shape by shape: one compiled model (as the timing runs use it) takes every group of
the stream PASSES times, so new shapes, cached plans and the arena's growth are all checked.

ORT (node, dynamic_stream_ort.js --dump) runs each group once and dumps its inputs and outputs;
kiln (the Python API, f32, 2 threads) runs the same inputs. An output passes where every element
is within 1e-4 + 1e-3 |ref|. The worst error is also given relative to the output's largest
magnitude: an output whose values are all far below the absolute tolerance would pass anything,
and this says so ("tiny output").

usage: /usr/bin/python3 bench/verify_streams.py [--streams "crnn bert ..."] [--passes 2]
                                                [--python build/python] [--keep DIR]
Streams as in compare_dynamic.sh (models from make_dynamic_models.py, made when missing). Set
KILN_MAX_CPU_ISA / ONEDNN_MAX_CPU_ISA to check another instruction set. Exit code 1 when any
output of any group differs.
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ORT_JS = os.path.join(HERE, "dynamic_stream_ort.js")  # ORT's side, and the list of streams
DEFAULT_STREAMS = "crnn bert bert-batch mnv2-batch mnv3s-hw effb0-hw regnet-hw resnext-hw deeplab-hw densenet-hw googlenet-hw squeezenet-hw"


def node_js(*args):
    """dynamic_stream_ort.js's answer (it holds the list of streams: their models and shapes)."""
    r = subprocess.run(["node", ORT_JS, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"verify_streams: {' '.join(args)}: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else 'failed'}")
    return r.stdout.strip()


def dumped(d, group, kind):
    """{name: array} of group `group`'s inputs (kind "in") or outputs ("out") in dump dir d."""
    prefix = f"{group}_{kind}_"
    return {os.path.basename(f)[len(prefix):-4]: np.load(f) for f in glob.glob(os.path.join(d, prefix + "*.npy"))}


def check_stream(kiln, stream, model, spec, passes, dump):
    p = subprocess.run(["node", ORT_JS, model, "--shapes", spec, "--threads", "2", "--passes", "1", "--dump", dump],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"verify_streams: ORT failed on {stream}:\n{p.stderr}")
    groups = sorted({int(os.path.basename(f).split("_")[0]) for f in glob.glob(os.path.join(dump, "*_in_*.npy"))})
    request = kiln.Core().compile_model(model, {"inference_precision": "f32", "inference_num_threads": "2"}) \
        .create_infer_request()
    failures, worst_tol, worst_rel, tiny = 0, 0.0, 0.0, set()
    for pass_ in range(passes):
        for g in groups:
            out = request.infer(dumped(dump, g, "in"))
            for name, ref in dumped(dump, g, "out").items():
                got = np.asarray(out[name])
                if got.shape != ref.shape:
                    failures += 1
                    print(f"  {stream} pass {pass_ + 1} group {g} '{name}': shape {got.shape}, ORT {ref.shape}")
                    continue
                err = np.abs(got.astype(np.float64) - ref)
                tol = 1e-4 + 1e-3 * np.abs(ref)
                scale = float(np.abs(ref).max()) if ref.size else 0.0
                worst_tol = max(worst_tol, float((err / tol).max()) if err.size else 0.0)
                if scale > 0:
                    worst_rel = max(worst_rel, float(err.max()) / scale)
                if scale < 1e-2:
                    tiny.add(name)
                if not (err <= tol).all():
                    failures += 1
                    print(f"  {stream} pass {pass_ + 1} group {g} '{name}' {ref.shape}: max error {err.max():.3g}, "
                          f"{int((err > tol).sum())} elements outside 1e-4 + 1e-3 |ref|")
    note = f", tiny output ({', '.join(sorted(tiny))}: max |ref| < 1e-2)" if tiny else ""
    print(f"{stream}: {len(groups)} shapes x {passes} passes, {failures} outputs differ; worst error "
          f"{worst_tol:.3f} of the tolerance, {worst_rel:.2g} of the output's largest magnitude{note}")
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", default=DEFAULT_STREAMS)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--python", default=os.path.join(HERE, "..", "build", "python"),
                    help="where the kiln Python module is (default: the build tree's)")
    ap.add_argument("--keep", default=None, help="keep ORT's dumps in this directory")
    a = ap.parse_args()
    if shutil.which("node") is None:
        raise SystemExit("verify_streams: needs node (ONNX Runtime runs in onnxruntime-node)")
    sys.path.insert(0, os.path.abspath(a.python))
    import kiln  # noqa: E402
    cache = os.path.join(os.environ.get("KILN_BENCH_CACHE", os.path.expanduser("~/.cache/kiln-bench")), "models")
    failures = 0
    for stream in a.streams.split():
        name = node_js("--model-of", stream)
        model = os.path.join(cache, name, "model.onnx")
        if not os.path.exists(model):
            subprocess.run([sys.executable, os.path.join(HERE, "make_dynamic_models.py"), "--only", name], check=True,
                           stdout=subprocess.DEVNULL)
        spec = node_js("--gen", stream)
        if a.keep:
            dump = os.path.join(a.keep, stream)
            shutil.rmtree(dump, ignore_errors=True)
            os.makedirs(dump)
            failures += check_stream(kiln, stream, model, spec, a.passes, dump)
        else:
            with tempfile.TemporaryDirectory() as dump:
                failures += check_stream(kiln, stream, model, spec, a.passes, dump)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
