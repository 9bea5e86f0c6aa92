#!/usr/bin/env python3
"""Int8 benchmark models: `kiln quantize` (static QDQ, per channel, minmax) applied to the
float bench models, and the accuracy of the result checked against the float model and against
ONNX Runtime running the same QDQ file.

  $KILN_BENCH_CACHE/models/<name>_int8/model.onnx, inputs/, meta.json, quantize.log
  $KILN_BENCH_CACHE/calib/<name>/<input>/<k>.npy      calibration samples (kiln quantize's layout)
  $KILN_BENCH_CACHE/calib/<name>/sample<k>/<input>.npy the same samples, one folder each (ORT's)

The `_int8` folders hold the bench model's own inputs, so `bench/compare_ort.sh` times them like
any other model (`MODELS=resnet50_int8,...`): kiln and ORT on the same QDQ file.

Samples (fixed seed): 8 standard-normal images for the vision models (the bench models' own
input is one too), 4 token sequences for BERT (random ids between [CLS] and [SEP], 64-128 valid
tokens, the rest padding masked out).

Accuracy (--check, the default): on every sample
  - kiln int8 (the QDQ file as kiln runs it) and ORT (same file, all optimisations) against the
    float model run by kiln in f32: top-1 agreement for [N, classes] outputs, cosine similarity;
  - kiln against ORT on the QDQ file, beside ORT's own spread: ORT with all optimisations
    against ORT with none (the tolerance the quantization implies: every engine's float rounding
    moves some requantizations by one step).

Run with /usr/bin/python3 (numpy). usage:
  make_int8_models.py [--only resnet50,mobilenet_v2,bert_base] [--force] [--no-check] [--kiln build/kiln]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CACHE = os.environ.get("KILN_BENCH_CACHE", os.path.expanduser("~/.cache/kiln-bench"))
SHARED = os.environ.get("SHARED_BENCH", os.path.join(ROOT, "..", "shared", "bench"))
SEED = 20261127
VISION_SAMPLES = 8
TEXT_SAMPLES = 4


def samples_for(name, meta):
    """{input name: [array, ...]} for the model's inputs, from meta.json's shapes and types."""
    rng = np.random.default_rng(SEED)
    inputs = meta["inputs"]
    if set(inputs) == {"input_ids", "attention_mask"}:
        shape = inputs["input_ids"]["shape"]
        ids, masks = [], []
        for _ in range(TEXT_SAMPLES):
            valid = int(rng.integers(shape[1] // 2, shape[1] + 1))
            seq = np.zeros(shape, np.int64)
            seq[0, 0], seq[0, valid - 1] = 101, 102
            seq[0, 1:valid - 1] = rng.integers(1000, 30000, valid - 2)
            mask = np.zeros(shape, np.int64)
            mask[0, :valid] = 1
            ids.append(seq)
            masks.append(mask)
        return {"input_ids": ids, "attention_mask": masks}
    out = {}
    for n, spec in inputs.items():
        if spec["dtype"] != "float32":
            raise SystemExit(f"{name}: no sample recipe for input '{n}' of type {spec['dtype']}")
        out[n] = [rng.standard_normal(spec["shape"]).astype(np.float32) for _ in range(VISION_SAMPLES)]
    return out


def write_samples(calib, samples):
    shutil.rmtree(calib, ignore_errors=True)
    count = len(next(iter(samples.values())))
    for n, arrays in samples.items():
        os.makedirs(os.path.join(calib, n))
        for k, a in enumerate(arrays):
            np.save(os.path.join(calib, n, f"{k}.npy"), a)
            os.makedirs(os.path.join(calib, f"sample{k}"), exist_ok=True)
            np.save(os.path.join(calib, f"sample{k}", f"{n}.npy"), a)
    return count


def run(cmd, log=None):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if log:
        with open(log, "a") as f:
            f.write("$ " + " ".join(cmd) + "\n" + r.stdout + "\n")
    if r.returncode != 0:
        raise SystemExit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout[-2000:]}")
    return r.stdout


def kiln_outputs(kiln, model, sample_dir, out_dir, log):
    args = [kiln, "run", model, "-o", out_dir, "-t", "2", "-p", "inference_precision=f32"]
    for f in sorted(os.listdir(sample_dir)):
        args += ["-i", f"{f[:-4]}={os.path.join(sample_dir, f)}"]
    run(args, log)
    return {f[:-4]: np.load(os.path.join(out_dir, f)) for f in sorted(os.listdir(out_dir))}


def ort_outputs(model, sample_dir, out_dir, opt, log):
    run(["node", os.path.join(SHARED, "peer_ort.js"), model, "--threads", "2", "--iters", "1",
         "--warmup", "0", "--inputs", sample_dir, "--opt", opt, "--save-outputs", out_dir], log)
    return {f[:-4]: np.load(os.path.join(out_dir, f)) for f in sorted(os.listdir(out_dir))}


def cosine(a, b):
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-300))


def check(kiln, name, float_model, qdq_model, calib, count, log):
    stats = {}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(count):
            sd = os.path.join(calib, f"sample{k}")
            ref = kiln_outputs(kiln, float_model, sd, os.path.join(tmp, f"f{k}"), log)
            q = kiln_outputs(kiln, qdq_model, sd, os.path.join(tmp, f"k{k}"), log)
            o = ort_outputs(qdq_model, sd, os.path.join(tmp, f"o{k}"), "all", log)
            o0 = ort_outputs(qdq_model, sd, os.path.join(tmp, f"z{k}"), "disabled", log)
            for out in ref:
                s = stats.setdefault(out, {"kiln_top1": 0, "ort_top1": 0, "classifier": False, "kiln_cos": [],
                                           "ort_cos": [], "kiln_vs_ort": [], "ort_levels": [],
                                           "kiln_vs_ort_mean": [], "ort_levels_mean": []})
                r, a, b, c = ref[out], q[out], o[out], o0[out]
                if r.ndim == 2 and r.shape[0] == 1 and r.shape[1] >= 10:
                    s["classifier"] = True
                    s["kiln_top1"] += int(np.argmax(a) == np.argmax(r))
                    s["ort_top1"] += int(np.argmax(b) == np.argmax(r))
                s["kiln_cos"].append(cosine(a, r))
                s["ort_cos"].append(cosine(b, r))
                s["kiln_vs_ort"].append(float(np.abs(a - b).max()))
                s["kiln_vs_ort_mean"].append(float(np.abs(a - b).mean()))
                s["ort_levels"].append(float(np.abs(b - c).max()))
                s["ort_levels_mean"].append(float(np.abs(b - c).mean()))
    summary = {}
    for out, s in stats.items():
        line = {"samples": count,
                "cosine_vs_float": {"kiln": min(s["kiln_cos"]), "ort": min(s["ort_cos"])},
                "max_abs_kiln_vs_ort": max(s["kiln_vs_ort"]),
                "mean_abs_kiln_vs_ort": float(np.mean(s["kiln_vs_ort_mean"])),
                "max_abs_ort_all_vs_disabled": max(s["ort_levels"]),
                "mean_abs_ort_all_vs_disabled": float(np.mean(s["ort_levels_mean"]))}
        if s["classifier"]:
            line["top1_vs_float"] = {"kiln": s["kiln_top1"], "ort": s["ort_top1"]}
        summary[out] = line
        top = (f"top-1 vs float kiln {s['kiln_top1']}/{count} ORT {s['ort_top1']}/{count}; "
               if s["classifier"] else "")
        print(f"[int8] {name}.{out}: {top}min cosine vs float kiln {line['cosine_vs_float']['kiln']:.4f} "
              f"ORT {line['cosine_vs_float']['ort']:.4f}; kiln vs ORT max {line['max_abs_kiln_vs_ort']:.4g} "
              f"(mean {line['mean_abs_kiln_vs_ort']:.3g}), ORT all vs disabled max "
              f"{line['max_abs_ort_all_vs_disabled']:.4g} (mean {line['mean_abs_ort_all_vs_disabled']:.3g})")
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="resnet50,mobilenet_v2,bert_base")
    ap.add_argument("--force", action="store_true", help="quantize again even if the _int8 model exists")
    ap.add_argument("--no-check", action="store_true", help="skip the accuracy check")
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"))
    ap.add_argument("--method", default="minmax")
    args = ap.parse_args()
    if not os.access(args.kiln, os.X_OK):
        raise SystemExit(f"no kiln binary at {args.kiln} (build it, or pass --kiln)")
    for name in args.only.split(","):
        src = os.path.join(CACHE, "models", name)
        if not os.path.isfile(os.path.join(src, "model.onnx")):
            raise SystemExit(f"{name}: no float model in {src} (run ../shared/bench/make_models.py --only {name})")
        with open(os.path.join(src, "meta.json")) as f:
            meta = json.load(f)
        dst = os.path.join(CACHE, "models", f"{name}_int8")
        calib = os.path.join(CACHE, "calib", name)
        count = write_samples(calib, samples_for(name, meta))
        qdq = os.path.join(dst, "model.onnx")
        log = os.path.join(dst, "quantize.log")
        if args.force or not os.path.isfile(qdq):
            shutil.rmtree(dst, ignore_errors=True)
            os.makedirs(dst)
            shutil.copytree(os.path.join(src, "inputs"), os.path.join(dst, "inputs"))
            report = run([args.kiln, "quantize", os.path.join(src, "model.onnx"), "-o", qdq, "--per-channel",
                          "--method", args.method, "--calibration", calib], log)
            print(f"[int8] {name}: kiln quantize --per-channel --method {args.method} ({count} samples)")
            print("\n".join("    " + l for l in report.strip().splitlines()[-8:]))
        meta_q = dict(meta, name=f"{name}_int8", quantized={
            "from": name, "tool": "kiln quantize", "per_channel": True, "method": args.method,
            "calibration_samples": count, "seed": SEED})
        if not args.no_check:
            meta_q["accuracy"] = check(args.kiln, name, os.path.join(src, "model.onnx"), qdq, calib, count, log)
        for k in ("diffs", "reference", "onnx_bytes"):
            meta_q.pop(k, None)
        with open(os.path.join(dst, "meta.json"), "w") as f:
            json.dump(meta_q, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
