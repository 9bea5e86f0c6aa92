#!/usr/bin/env python3
"""The real-architecture models kiln's tests run, made here (no files from outside the project,
nothing downloaded): torchvision's ResNet-50, MobileNet-v2, SqueezeNet 1.1, ShuffleNet-v2 x1.0
and EfficientNet-B0, and two BERT encoders (bench/make_dynamic_models.py's architecture:
HF-style attention, erf GELU, LayerNorm), with random weights from a fixed seed.

  OUT/<name>/model.onnx          opset 13 (LayerNorm exported as its 9 primitive ops), static
                                 shapes, batch 1
  OUT/<name>/inputs/<in>.npy     fixed-seed inputs (names = ONNX input names)
  OUT/<name>/ref_outputs/<out>.npy  torch's outputs for them (eager, f32)
  OUT/<name>/meta.json

  bert_small  4 layers, hidden 256, 4 heads, FFN 1024, sequence 128
  bert_12l    12 layers, hidden 64, 2 heads, FFN 256, sequence 128 (BERT-base's structure, small)
  detector    a small two-stage detector, opset 16: conv backbone, the locations whose objectness
              passes a threshold (NonZero: a count that depends on the data), boxes around them,
              NMS, RoIAlign of the kept boxes, a linear head (outputs boxes, scores, features)
  speech_gru  a speech recogniser: wav2vec2's convolutional front end (Conv1d, GroupNorm, GELU)
              on 1 s of 16 kHz audio, LayerNorm, a 2-layer bidirectional GRU, per-frame log-softmax
              (GroupNorm exports as InstanceNormalization; PyTorch's GRU with linear_before_reset)
  vit_small   torchvision's VisionTransformer, 64x64 images in 8x8 patches, 4 layers, hidden 128,
              4 heads (nn.MultiheadAttention: its q / k / v are Slices of one projection)

BatchNorm running statistics are calibrated in train mode on random inputs (cumulative
average), so activations stay O(1) and the references are not dominated by rounding.
A model whose files exist is kept (--force makes it again). Run with /usr/bin/python3
(Debian's torch, torchvision, onnx, numpy).

usage: make_test_models.py --out DIR [--only a,b] [--force]
"""
import argparse
import inspect
import json
import os
import sys
import time

import numpy as np
import onnx
import torch
import torchvision
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
from make_dynamic_models import Bert, init_bert  # noqa: E402  (the project's own BERT)

OPSET = 13
SEED = 20261126
VISION = ["resnet50", "mobilenet_v2", "squeezenet1_1", "shufflenet_v2_x1_0", "efficientnet_b0"]
BERTS = {"bert_small": dict(layers=4, hidden=256, heads=4, ffn=1024),
         "bert_12l": dict(layers=12, hidden=64, heads=2, ffn=256)}
SEQUENCE = 128
DETECTOR_OPSET = 16  # RoiAlign's half_pixel coordinates (torchvision's aligned=True)
SEQUENCE_MODELS = ["speech_gru", "vit_small"]


class SpeechGru(nn.Module):
    """wav2vec2's feature extractor in small (GroupNorm after the first convolution), then a
    bidirectional GRU over the frames and a per-frame classifier."""

    def __init__(self):
        super().__init__()
        self.front = nn.Sequential(nn.Conv1d(1, 64, 10, 5, bias=False), nn.GroupNorm(64, 64), nn.GELU(),
                                   nn.Conv1d(64, 64, 3, 2, bias=False), nn.GELU(),
                                   nn.Conv1d(64, 64, 3, 2, bias=False), nn.GELU(),
                                   nn.Conv1d(64, 64, 2, 2, bias=False), nn.GELU())
        self.norm = nn.LayerNorm(64)
        self.rnn = nn.GRU(64, 96, num_layers=2, bidirectional=True, batch_first=True)
        self.out = nn.Linear(192, 32)

    def forward(self, audio):
        f = self.norm(self.front(audio).transpose(1, 2))
        return self.out(self.rnn(f)[0]).log_softmax(-1)


class Detector(nn.Module):
    """Proposals from a 16x16 objectness map of a 64x64 image (stride 4), NMS, RoIAlign and a
    head: the shapes after the threshold depend on the data. `threshold` is set by make_detector
    in the widest gap between the scores of the test input, so no score lies near it."""

    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
                                      nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU())
        self.objectness = nn.Conv2d(32, 1, 1)
        self.head = nn.Linear(32 * 4 * 4, 8)
        self.register_buffer("threshold", torch.tensor(0.5))

    def scores(self, x):
        f = self.backbone(x)
        return f, torch.sigmoid(self.objectness(f))[0, 0].flatten()

    def forward(self, x):
        f, s = self.scores(x)
        keep = torch.nonzero(s > self.threshold)[:, 0]
        ys, xs = (keep // 16).float() * 4, (keep % 16).float() * 4
        boxes = torch.stack([xs - 6, ys - 6, xs + 10, ys + 10], 1)
        scores = s[keep]
        kept = torchvision.ops.nms(boxes, scores, 0.3)
        boxes, scores = boxes[kept], scores[kept]
        rois = torchvision.ops.roi_align(f, [boxes], output_size=4, spatial_scale=0.25, sampling_ratio=2,
                                         aligned=True)
        return boxes, scores, self.head(rois.flatten(1))


def detector(g):
    x = torch.rand(1, 3, 64, 64, generator=g) * 2 - 1
    # the first weights (from SEED on) whose kept scores are well apart: NMS orders by score,
    # and two within rounding of each other could come out in either order
    for attempt in range(100):
        torch.manual_seed(SEED + attempt)
        model = Detector().eval()
        with torch.no_grad():
            model.objectness.weight.mul_(8)  # scores spread over (0, 1)
            s = torch.sort(model.scores(x)[1]).values
            n = len(s)
            gaps = s[n // 4 + 1:3 * n // 4] - s[n // 4:3 * n // 4 - 1]
            i = int(torch.argmax(gaps)) + n // 4
            model.threshold.fill_(float(s[i] + s[i + 1]) / 2)
            kept = s[s > model.threshold]
            if len(kept) > 8 and float(torch.min(kept[1:] - kept[:-1])) > 1e-5:
                return model, {"input": x}, ["boxes", "scores", "features"]
    raise RuntimeError("detector: no weights with well separated scores")


def calibrate_batch_norm(model, g):
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative average over the calibration passes
    model.train()
    with torch.no_grad():
        for _ in range(4):
            model(torch.rand(2, 3, 224, 224, generator=g) * 2 - 1)
    model.eval()


def vision(name, g):
    torch.manual_seed(SEED)
    model = getattr(torchvision.models, name)(weights=None)
    with torch.no_grad():  # the default init leaves biases and BN affine params at 0 / 1
        for m in model.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)) and m.bias is not None:
                m.bias.uniform_(-0.1, 0.1, generator=g)
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.weight.uniform_(0.5, 1.5, generator=g)
                m.bias.uniform_(-0.1, 0.1, generator=g)
    calibrate_batch_norm(model, g)
    x = torch.rand(1, 3, 224, 224, generator=g) * 2 - 1
    return model.eval(), {"input": x}, ["output"]


def bert(name, g):
    model = init_bert(Bert(**BERTS[name]), g)
    ids = torch.randint(0, 30000, (1, SEQUENCE), generator=g)
    mask = torch.ones(1, SEQUENCE, dtype=torch.int64)
    mask[:, SEQUENCE - 16:] = 0  # 16 padding positions at the end
    return model, {"input_ids": ids, "attention_mask": mask}, ["last_hidden_state"]


def sequence_model(name, g):
    torch.manual_seed(SEED)
    if name == "speech_gru":
        return SpeechGru().eval(), {"audio": torch.rand(1, 1, 16000, generator=g) * 2 - 1}, ["log_probs"]
    model = torchvision.models.VisionTransformer(image_size=64, patch_size=8, num_layers=4, num_heads=4,
                                                 hidden_dim=128, mlp_dim=256, num_classes=100)
    return model.eval(), {"input": torch.rand(2, 3, 64, 64, generator=g) * 2 - 1}, ["output"]


def make(name, out_dir):
    g = torch.Generator().manual_seed(SEED)
    model, inputs, outputs = (bert(name, g) if name in BERTS else detector(g) if name == "detector"
                              else sequence_model(name, g) if name in SEQUENCE_MODELS else vision(name, g))
    opset = DETECTOR_OPSET if name == "detector" else OPSET
    d = os.path.join(out_dir, name)
    os.makedirs(os.path.join(d, "inputs"), exist_ok=True)
    os.makedirs(os.path.join(d, "ref_outputs"), exist_ok=True)
    path = os.path.join(d, "model.onnx")
    kw = dict(input_names=list(inputs), output_names=outputs, opset_version=opset, do_constant_folding=True)
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kw["dynamo"] = False
    t0 = time.time()
    # nn.MultiheadAttention's fused path (eval without grad) has no ONNX export in torch 1.13
    with torch.set_grad_enabled(name == "vit_small"):
        torch.onnx.export(model, tuple(inputs.values()), path, **kw)
    with torch.no_grad():
        refs = model(*inputs.values())
    refs = refs if isinstance(refs, (tuple, list)) else [refs]
    onnx.checker.check_model(path)
    for k, v in inputs.items():
        np.save(os.path.join(d, "inputs", k + ".npy"), v.numpy())
    for k, v in zip(outputs, refs):
        np.save(os.path.join(d, "ref_outputs", k + ".npy"), v.numpy().astype(np.float32))
    m = onnx.load(path, load_external_data=False)
    meta = {"name": name, "opset": opset, "seed": SEED, "nodes": len(m.graph.node),
            "inputs": {k: list(v.shape) for k, v in inputs.items()}, "seconds": round(time.time() - t0, 1)}
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    return meta


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()
    known = VISION + list(BERTS) + ["detector"] + SEQUENCE_MODELS
    names = [n for n in a.only.split(",") if n] or known
    for n in names:
        if n not in known:
            sys.exit(f"make_test_models: unknown model '{n}' (known: {', '.join(known)})")
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    for n in names:
        done = os.path.join(a.out, n, "meta.json")
        if os.path.exists(done) and not a.force:
            print(f"[{n}] kept: {done}", flush=True)
            continue
        meta = make(n, a.out)
        print(f"[{n}] ok: {meta['nodes']} nodes, {meta['seconds']} s", flush=True)


if __name__ == "__main__":
    main()
