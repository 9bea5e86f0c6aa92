#!/usr/bin/env python3
"""A detection benchmark model: `yolo_like`, shaped like YOLOv5s (CSP blocks of 1x1 and 3x3
convolutions with SiLU, SPPF's chained max pools, an FPN / PAN neck of nearest 2x upsampling
and concatenated feature maps, three 1x1 heads of 3 x 85 channels), for the f32 comparison with
ONNX Runtime (bench/compare_ort.sh, MODELS=yolo_like) that the ten models of ../shared/bench
do not cover: upsampling, Concats of feature maps, residual SiLU blocks with Winograd 3x3s.

  $KILN_BENCH_CACHE/models/yolo_like/model.onnx       images float32 [1, 3, 640, 640] -> p3, p4, p5
                              inputs/images.npy       uniform [0, 1), seed 0
                              ref_outputs/<name>.npy  torch's outputs on it
                              meta.json

Random weights (torch's initialisation, seed 0; BatchNorm statistics and affines drawn around the
identity so they fold into non-trivial convolutions), exported by torch.onnx.export (opset 17,
constant folding: the BatchNorms fold into the convolutions). Run with /usr/bin/python3.
usage: make_detector_model.py [--force]
"""
import argparse
import json
import os

import numpy as np
import torch
from torch import nn

NAME = "yolo_like"


def conv(c1, c2, k=1, s=1):
    return nn.Sequential(nn.Conv2d(c1, c2, k, s, 2 if k == 6 else k // 2, bias=False), nn.BatchNorm2d(c2), nn.SiLU())


class Bottleneck(nn.Module):
    def __init__(self, c, shortcut=True):
        super().__init__()
        self.cv1, self.cv2, self.add = conv(c, c, 1), conv(c, c, 3), shortcut

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C3(nn.Module):
    def __init__(self, c1, c2, n=1, shortcut=True):
        super().__init__()
        c = c2 // 2
        self.cv1, self.cv2, self.cv3 = conv(c1, c), conv(c1, c), conv(2 * c, c2)
        self.m = nn.Sequential(*[Bottleneck(c, shortcut) for _ in range(n)])

    def forward(self, x):
        return self.cv3(torch.cat([self.m(self.cv1(x)), self.cv2(x)], 1))


class SPPF(nn.Module):
    def __init__(self, c1, c2):
        super().__init__()
        c = c1 // 2
        self.cv1, self.cv2, self.m = conv(c1, c), conv(4 * c, c2), nn.MaxPool2d(5, 1, 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(torch.cat([x, y1, y2, self.m(y2)], 1))


class YoloLike(nn.Module):
    def __init__(self, classes=80):
        super().__init__()
        self.b0, self.b1, self.b2 = conv(3, 32, 6, 2), conv(32, 64, 3, 2), C3(64, 64, 1)
        self.b3, self.b4 = conv(64, 128, 3, 2), C3(128, 128, 2)
        self.b5, self.b6 = conv(128, 256, 3, 2), C3(256, 256, 3)
        self.b7, self.b8, self.b9 = conv(256, 512, 3, 2), C3(512, 512, 1), SPPF(512, 512)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.h10, self.h13 = conv(512, 256, 1), C3(512, 256, 1, False)
        self.h14, self.h17 = conv(256, 128, 1), C3(256, 128, 1, False)
        self.h18, self.h20 = conv(128, 128, 3, 2), C3(256, 256, 1, False)
        self.h21, self.h23 = conv(256, 256, 3, 2), C3(512, 512, 1, False)
        no = 3 * (classes + 5)
        self.d3, self.d4, self.d5 = nn.Conv2d(128, no, 1), nn.Conv2d(256, no, 1), nn.Conv2d(512, no, 1)

    def forward(self, x):
        x = self.b2(self.b1(self.b0(x)))
        p3 = self.b4(self.b3(x))
        p4 = self.b6(self.b5(p3))
        p5 = self.b9(self.b8(self.b7(p4)))
        h10 = self.h10(p5)
        h13 = self.h13(torch.cat([self.up(h10), p4], 1))
        h14 = self.h14(h13)
        o3 = self.h17(torch.cat([self.up(h14), p3], 1))
        o4 = self.h20(torch.cat([self.h18(o3), h14], 1))
        o5 = self.h23(torch.cat([self.h21(o4), h10], 1))
        return self.d3(o3), self.d4(o4), self.d5(o5)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--force", action="store_true", help="export again even if the model exists")
    a = ap.parse_args()
    cache = os.environ.get("KILN_BENCH_CACHE", os.path.expanduser("~/.cache/kiln-bench"))
    out = os.path.join(cache, "models", NAME)
    if os.path.exists(os.path.join(out, "model.onnx")) and not a.force:
        print(json.dumps({"model": NAME, "dir": out, "made": False}))
        return
    torch.manual_seed(0)
    m = YoloLike().eval()
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.1, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
    os.makedirs(os.path.join(out, "inputs"), exist_ok=True)
    os.makedirs(os.path.join(out, "ref_outputs"), exist_ok=True)
    x = torch.rand(1, 3, 640, 640, generator=torch.Generator().manual_seed(0))
    names = ["p3", "p4", "p5"]
    torch.onnx.export(m, x, os.path.join(out, "model.onnx"), input_names=["images"], output_names=names,
                      opset_version=17, do_constant_folding=True)
    np.save(os.path.join(out, "inputs", "images.npy"), x.numpy())
    with torch.no_grad():
        for n, y in zip(names, m(x)):
            np.save(os.path.join(out, "ref_outputs", n + ".npy"), y.numpy())
    meta = {"model": NAME, "inputs": {"images": [1, 3, 640, 640]}, "outputs": names, "opset": 17,
            "params": sum(p.numel() for p in m.parameters())}
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(json.dumps({"model": NAME, "dir": out, "made": True}))


if __name__ == "__main__":
    main()
