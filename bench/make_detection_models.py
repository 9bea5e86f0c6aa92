#!/usr/bin/env python3
"""Detection models for the data-dependent-shape benchmark (bench/compare_detection.sh):
torchvision's SSDlite 320 (MobileNet-v3) and Faster R-CNN (MobileNet-v3 FPN, 320), random
weights from a fixed seed, exported by torch (opset 17) with their post-processing: score
thresholds (NonZero), TopK, NonMaxSuppression, RoIAlign, whose counts depend on the image.

  CACHE/models/<name>/model.onnx       input `image` [3, 320, 320]
  CACHE/models/<name>/images/NNN.npy   IMAGES random images (fixed seed), f32 in [0, 1)

CACHE is $KILN_BENCH_CACHE or ~/.cache/kiln-bench. Random weights make few or no detections
after the last threshold, but the proposals, NMS and RoIAlign before it run on every image.
A model whose files exist is kept (--force makes it again). Run with /usr/bin/python3.

usage: make_detection_models.py [--only ssdlite,frcnn] [--images 16] [--force]
"""
import argparse
import os

import numpy as np
import torch
import torchvision

MODELS = {
    "ssdlite": "ssdlite320_mobilenet_v3_large",
    "frcnn": "fasterrcnn_mobilenet_v3_large_320_fpn",
}
SEED = 20261202


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=",".join(MODELS))
    ap.add_argument("--images", type=int, default=16)
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()
    cache = os.environ.get("KILN_BENCH_CACHE", os.path.expanduser("~/.cache/kiln-bench"))
    for key in [k for k in a.only.split(",") if k]:
        if key not in MODELS:
            raise SystemExit(f"make_detection_models: unknown model '{key}' (known: {', '.join(MODELS)})")
        d = os.path.join(cache, "models", key)
        path = os.path.join(d, "model.onnx")
        os.makedirs(os.path.join(d, "images"), exist_ok=True)
        if a.force or not os.path.exists(path):
            torch.manual_seed(SEED)
            model = getattr(torchvision.models.detection, MODELS[key])(weights=None, weights_backbone=None).eval()
            example = torch.rand(3, 320, 320)
            torch.onnx.export(model, ([example],), path, opset_version=17, input_names=["image"],
                              output_names=["boxes", "scores", "labels"])
        rng = np.random.default_rng(SEED)
        for i in range(a.images):
            np.save(os.path.join(d, "images", f"{i:03d}.npy"), rng.random((3, 320, 320), dtype=np.float32))
        print(f"[{key}] {path}, {a.images} images", flush=True)


if __name__ == "__main__":
    main()
