#!/usr/bin/env python3
"""Dynamic-shape benchmark models: exported with symbolic input dims, for timing a stream of
inputs whose shape changes from one inference to the next (bench/dynamic_stream_ort.js).

  $KILN_BENCH_CACHE/models/<name>/model.onnx and meta.json        (default ~/.cache/kiln-bench)

  crnn_dyn   CNN + BiLSTM text recogniser (CRNN).  x float32 [1, 3, 48, W] -> logits [T, 1, 97],
             T = W / 4.  VGG-style conv stack (two BatchNorms), height averaged away, 2-layer
             bidirectional LSTM (hidden 128), Linear to 97 classes.
  mnv2_dyn   MobileNet-v2 (torchvision's, random weights, BatchNorm statistics from random
             batches).  x float32 [batch, 3, height, width] -> logits [batch, 1000].
  mnv3s_hw, effb0_hw, regnet_hw, resnext_hw
             torchvision's mobilenet_v3_small, efficientnet_b0, regnet_y_400mf, resnext50_32x4d
             the same way.  x float32 [batch, 3, height, width] -> y [batch, 1000].
  deeplab_hw torchvision's deeplabv3_mobilenet_v3_large the same way (its "out" only).
             x float32 [batch, 3, height, width] -> y [batch, 21, height, width].
  bert6_dyn  BERT encoder: 6 layers, hidden 384, 6 heads, FFN 1536, vocab 30522, 512 positions,
             erf GELU, LayerNorm eps 1e-12, HF-style additive mask (1 - mask) * finfo(f32).min.
             input_ids, attention_mask int64 [batch, sequence] -> last_hidden_state
             [batch, sequence, 384].

Weights are random with a fixed seed (initialised here; BatchNorm running statistics calibrated
in train mode on random data, so they are not the identity).  Exported with torch.onnx.export
(TorchScript exporter, opset 17, constant folding, dynamic_axes), then checked: onnx.checker,
onnx.shape_inference (the dynamic dims must stay symbolic: no value in the graph may carry a
size that only the trace-time shape would give), and, unless --no-verify, ONNX Runtime
(dynamic_stream_ort.js --dump, via node) runs two other shapes and is compared with torch.

Run with /usr/bin/python3 (torch, onnx, numpy).
usage: make_dynamic_models.py [--only crnn_dyn,bert6_dyn,...] [--force] [--no-verify]   (default: all)
"""
import argparse
import inspect
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnx.numpy_helper
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
OPSET = 17
SEED = 20250611


# ---------------------------------------------------------------------------------------------
# crnn_dyn

class CRNN(nn.Module):
    def __init__(self, classes=97, hidden=128):
        super().__init__()

        def conv(cin, cout, bn):
            # bias is redundant before a BatchNorm
            return [nn.Conv2d(cin, cout, 3, padding=1, bias=not bn)] + ([nn.BatchNorm2d(cout)] if bn else []) + [nn.ReLU()]

        self.features = nn.Sequential(
            *conv(3, 32, False), nn.MaxPool2d(2),             # [32, 24, W/2]
            *conv(32, 64, False), nn.MaxPool2d(2),            # [64, 12, W/4]
            *conv(64, 128, True),                             # [128, 12, W/4]
            *conv(128, 128, False), nn.MaxPool2d((2, 1)),     # [128, 6, W/4]
            *conv(128, 256, True))                            # [256, 6, W/4]
        self.rnn = nn.LSTM(256, hidden, num_layers=2, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, classes)

    def forward(self, x):
        f = self.features(x).mean(dim=2)        # collapse the height: [B, 256, T]
        seq = f.permute(2, 0, 1)                # [T, B, 256]
        out, _ = self.rnn(seq)                  # [T, B, 256]
        return self.fc(out)                     # [T, B, 97]


def init_crnn(m, g):
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.Conv2d):
                fan_in = mod.in_channels * mod.kernel_size[0] * mod.kernel_size[1]
                mod.weight.normal_(0.0, math.sqrt(2.0 / fan_in), generator=g)   # He: keeps ReLU activations O(1)
                if mod.bias is not None:
                    mod.bias.uniform_(-0.05, 0.05, generator=g)
            elif isinstance(mod, nn.BatchNorm2d):
                mod.weight.uniform_(0.7, 1.3, generator=g)
                mod.bias.uniform_(-0.2, 0.2, generator=g)
            elif isinstance(mod, nn.LSTM):
                # gate pre-activations of O(1) for inputs of rms ~0.5, so the cells do not idle
                for name, p in mod.named_parameters():
                    if name.startswith("weight"):
                        p.normal_(0.0, 2.0 / math.sqrt(p.shape[1]), generator=g)
                    else:
                        p.uniform_(-0.1, 0.1, generator=g)
            elif isinstance(mod, nn.Linear):
                mod.weight.normal_(0.0, 3.0 / math.sqrt(mod.in_features), generator=g)   # logits std ~1
                mod.bias.uniform_(-0.1, 0.1, generator=g)
    # BatchNorm running statistics: cumulative average of batch statistics over random data
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.reset_running_stats()
            mod.momentum = None
    m.train()
    with torch.no_grad():
        for w in (96, 160, 256, 320):
            m(torch.rand(4, 3, 48, w, generator=g) * 2 - 1)
    m.eval()
    return m


def crnn_spec():
    return {
        "model": init_crnn(CRNN(), torch.Generator().manual_seed(SEED)),
        "inputs": {"x": ("float32", [1, 3, 48, "W"])},
        "outputs": {"logits": ["T", 1, 97]},
        # the trace shape, and the sizes that only it would give (W, W/2, W/4)
        "trace": {"x": [1, 3, 48, 136]},
        "trace_only_dims": [136, 68, 34],
        "verify": [{"x": [1, 3, 48, 96]}, {"x": [1, 3, 48, 520]}],
    }


# ---------------------------------------------------------------------------------------------
# bert6_dyn

class SelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.query, self.key, self.value = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)

    def split(self, t):                         # [B, L, hidden] -> [B, heads, L, head_dim]
        return t.view(t.size()[:-1] + (self.heads, self.head_dim)).permute(0, 2, 1, 3)

    def forward(self, h, mask):
        q, k, v = self.split(self.query(h)), self.split(self.key(h)), self.split(self.value(h))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        probs = torch.softmax(scores + mask, dim=-1)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        return ctx.view(ctx.size()[:-2] + (self.heads * self.head_dim,))


class Layer(nn.Module):
    def __init__(self, hidden, heads, ffn, eps):
        super().__init__()
        self.attn = SelfAttention(hidden, heads)
        self.attn_out = nn.Linear(hidden, hidden)
        self.ln1 = nn.LayerNorm(hidden, eps=eps)
        self.ffn_in, self.act, self.ffn_out = nn.Linear(hidden, ffn), nn.GELU(), nn.Linear(ffn, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=eps)

    def forward(self, h, mask):
        h = self.ln1(h + self.attn_out(self.attn(h, mask)))
        return self.ln2(h + self.ffn_out(self.act(self.ffn_in(h))))


class Bert(nn.Module):
    def __init__(self, layers=6, hidden=384, heads=6, ffn=1536, vocab=30522, positions=512, eps=1e-12):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(positions, hidden)
        self.token_type = nn.Embedding(2, hidden)   # token_type_ids are all 0 (not an input)
        self.ln = nn.LayerNorm(hidden, eps=eps)
        self.layers = nn.ModuleList([Layer(hidden, heads, ffn, eps) for _ in range(layers)])

    def forward(self, input_ids, attention_mask):
        # position ids as a Range of the dynamic length: a Slice of the table with a computed end
        # would leave the hidden size (384) unknown to shape inference
        positions = torch.arange(input_ids.size(1), dtype=torch.int64)
        h = self.word(input_ids) + self.position(positions) + self.token_type.weight[0]
        h = self.ln(h)
        mask = attention_mask[:, None, None, :].to(torch.float32)
        mask = (1.0 - mask) * torch.finfo(torch.float32).min     # [B, 1, 1, L], 0 or f32 min
        for layer in self.layers:
            h = layer(h, mask)
        return h


def init_bert(m, g):
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, (nn.Linear, nn.Embedding)):
                mod.weight.normal_(0.0, 0.02, generator=g)
            if isinstance(mod, nn.Linear):
                mod.bias.normal_(0.0, 0.02, generator=g)
            elif isinstance(mod, nn.LayerNorm):
                mod.weight.uniform_(0.9, 1.1, generator=g)
                mod.bias.uniform_(-0.05, 0.05, generator=g)
    return m.eval()


def bert_spec():
    return {
        "model": init_bert(Bert(), torch.Generator().manual_seed(SEED + 1)),
        "inputs": {"input_ids": ("int64", ["batch", "sequence"]), "attention_mask": ("int64", ["batch", "sequence"])},
        "outputs": {"last_hidden_state": ["batch", "sequence", 384]},
        "trace": {"input_ids": [3, 11], "attention_mask": [3, 11]},
        "trace_only_dims": [11, 33, 121, 363],       # L, B*L, L*L, B*L*L
        "verify": [{"input_ids": [1, 8], "attention_mask": [1, 8]},
                   {"input_ids": [4, 37], "attention_mask": [4, 37]}],
    }


# ---------------------------------------------------------------------------------------------
# mnv2_dyn


def init_mobilenet(g):
    import torchvision
    torch.manual_seed(SEED + 2)  # torchvision initialises its layers from the global generator
    m = torchvision.models.mobilenet_v2(weights=None)
    m.train()  # BatchNorm running statistics from random batches (not the identity)
    with torch.no_grad():
        for size in (160, 224):
            m(torch.rand(4, 3, size, size, generator=g) * 2 - 1)
    m.eval()
    return m


def mobilenet_spec():
    return {
        "model": init_mobilenet(torch.Generator().manual_seed(SEED + 3)),
        "inputs": {"x": ("float32", ["batch", 3, "height", "width"])},
        "outputs": {"logits": ["batch", 1000]},
        # the trace shape, and the sizes that only it would give (5; 208 and 240 halved 1-4 times)
        "trace": {"x": [5, 3, 208, 240]},
        "trace_only_dims": [5, 208, 104, 52, 26, 13, 240, 120, 60, 30, 15],
        "verify": [{"x": [1, 3, 224, 224]}, {"x": [2, 3, 160, 288]}],
    }


# ---------------------------------------------------------------------------------------------
# mnv3s_hw, effb0_hw, regnet_hw, resnext_hw, deeplab_hw: torchvision's networks with batch,
# height and width dynamic (the "CNN with dynamic H/W" of the streams `<name>-hw`)

TORCHVISION_HW = {  # model name -> (torchvision constructor, seed offset)
    "mnv3s_hw": ("mobilenet_v3_small", 10),
    "effb0_hw": ("efficientnet_b0", 11),
    "regnet_hw": ("regnet_y_400mf", 12),
    "resnext_hw": ("resnext50_32x4d", 13),
    "deeplab_hw": ("deeplabv3_mobilenet_v3_large", 14),
    # channel concatenations between 1x1 and 3x3 convolutions (dense blocks, inception and
    # fire modules): the layouts kiln's pointwise GEMM and oneDNN's convolutions meet in
    "densenet_hw": ("densenet121", 15),
    "googlenet_hw": ("googlenet", 16),
    "squeezenet_hw": ("squeezenet1_1", 17),
}


class SegmentationOut(nn.Module):
    """torchvision's segmentation models return a dict: its "out" as the one output."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        return self.m(x)["out"]


def init_torchvision(name):
    import torchvision
    ctor, offset = TORCHVISION_HW[name]
    torch.manual_seed(SEED + offset)  # torchvision initialises its layers from the global generator
    if ctor.startswith("deeplab"):
        m = SegmentationOut(getattr(torchvision.models.segmentation, ctor)(weights=None, weights_backbone=None,
                                                                           aux_loss=False))
    else:
        # (GoogLeNet without its training-time auxiliary heads, its weights initialised as torchvision does)
        extra = {"aux_logits": False, "init_weights": True} if ctor == "googlenet" else {}
        m = getattr(torchvision.models, ctor)(weights=None, **extra)
    # Linear layers as PyTorch initialises them (torchvision draws some from N(0, 0.01)), and
    # BatchNorm running statistics from random batches: with the initial ones (the identity) a
    # deep network's outputs shrink to about 1e-9 and any error passes an absolute tolerance
    for layer in m.modules():
        if isinstance(layer, nn.Linear):
            layer.reset_parameters()
    m.train()
    g = torch.Generator().manual_seed(SEED + 100 + offset)
    with torch.no_grad():
        for size in (160, 224):
            m(torch.rand(4, 3, size, size, generator=g) * 2 - 1)
    m.eval()
    return m


def torchvision_spec(name):
    segmentation = name == "deeplab_hw"
    return {
        "model": init_torchvision(name),
        "inputs": {"x": ("float32", ["batch", 3, "height", "width"])},
        # (the exporter names the classes dim of the segmentation's Resize instead of giving 21)
        "outputs": {"y": ["batch", None, "height", "width"] if segmentation else ["batch", 1000]},
        # the trace shape, and the sizes only it would give (11; 216 and 280 halved 1-5 times:
        # none is a channel count of these networks, which mnv2_dyn's 240 is)
        "trace": {"x": [11, 3, 216, 280]},
        "trace_only_dims": [11, 216, 108, 54, 27, 14, 7, 280, 140, 70, 35, 18, 9],
        "verify": [{"x": [1, 3, 224, 224]}, {"x": [2, 3, 160, 288]}],
    }


SPECS = {"crnn_dyn": crnn_spec, "bert6_dyn": bert_spec, "mnv2_dyn": mobilenet_spec,
         **{name: (lambda n=name: torchvision_spec(n)) for name in TORCHVISION_HW}}


# ---------------------------------------------------------------------------------------------

def trace_inputs(spec, g):
    out = []
    for name, (dtype, _) in spec["inputs"].items():
        shape = spec["trace"][name]
        if dtype == "float32":
            out.append(torch.rand(*shape, generator=g) * 2 - 1)
        elif "mask" in name:
            t = torch.ones(*shape, dtype=torch.int64)
            t[..., shape[-1] - shape[-1] // 4:] = 0
            out.append(t)
        else:
            out.append(torch.randint(0, 30000, shape, generator=g))
    return tuple(out)


def dynamic_axes(spec):
    axes = {}
    for name, (_, dims) in spec["inputs"].items():
        axes[name] = {i: d for i, d in enumerate(dims) if isinstance(d, str)}
    for name, dims in spec["outputs"].items():
        axes[name] = {i: d for i, d in enumerate(dims) if isinstance(d, str)}
    return axes


def export(spec, path):
    kw = dict(input_names=list(spec["inputs"]), output_names=list(spec["outputs"]), dynamic_axes=dynamic_axes(spec),
              opset_version=OPSET, do_constant_folding=True)
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kw["dynamo"] = False
    with torch.no_grad():
        torch.onnx.export(spec["model"], trace_inputs(spec, torch.Generator().manual_seed(7)), path, **kw)


def dims_of(vi):
    return [d.dim_param if d.HasField("dim_param") else (d.dim_value if d.HasField("dim_value") else "?")
            for d in vi.type.tensor_type.shape.dim]


def check(spec, path):
    """onnx.checker + shape inference; returns a summary.  Fails if a dynamic dim got baked in."""
    m = onnx.load(path)
    onnx.checker.check_model(m, full_check=True)
    inf = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    problems = []
    for vi in list(inf.graph.input) + list(inf.graph.output):
        want = spec["inputs"][vi.name][1] if vi.name in spec["inputs"] else spec["outputs"][vi.name]
        got = dims_of(vi)
        if len(got) != len(want) or any(w is not None and g != w for g, w in zip(got, want)):  # None: any dim
            problems.append(f"{vi.name}: dims {dims_of(vi)}, expected {want}")
    # a value sized by the trace shape alone would show a trace-only number among its dims
    baked = [(vi.name, dims_of(vi)) for vi in inf.graph.value_info
             if any(d in spec["trace_only_dims"] for d in dims_of(vi))]
    problems += [f"value {n} has trace-time dims {d}" for n, d in baked[:10]]
    # Reshape targets / Constant tensors holding a trace-only size would bake it in too
    for init in list(inf.graph.initializer) + [a.t for n in inf.graph.node for a in n.attribute if a.type == onnx.AttributeProto.TENSOR]:
        if init.data_type == onnx.TensorProto.INT64 and len(init.dims) <= 1:
            vals = onnx.numpy_helper.to_array(init).reshape(-1).tolist()
            if any(v in spec["trace_only_dims"] for v in vals):
                problems.append(f"int64 constant {init.name or '(Constant node)'} = {vals}")
    if problems:
        raise SystemExit("make_dynamic_models: %s is not shape-generic:\n  %s" % (path, "\n  ".join(problems)))
    sym = {d for vi in inf.graph.value_info for d in dims_of(vi) if isinstance(d, str)}
    named = sorted(d for d in sym if not d.startswith("unk__") and d != "?")
    ops = {}
    for n in m.graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    return {"n_nodes": len(m.graph.node), "ops": dict(sorted(ops.items(), key=lambda kv: -kv[1])),
            "value_info": len(inf.graph.value_info),
            "symbolic_dims_in_graph": named + ["+%d fresh (unk__*)" % (len(sym) - len(named))]}


def shape_spec(groups):
    """[{name: shape}, ...] -> benchmark_app data_shape syntax, name[..][..],name[..][..]"""
    return ",".join(name + "".join("[" + ",".join(map(str, gr[name])) + "]" for gr in groups) for name in groups[0])


def verify_ort(spec, path):
    """Runs the model in ONNX Runtime (node, dynamic_stream_ort.js --dump) on spec['verify'] shapes
    and compares every output with torch.  Returns {group: {max_abs, ref_max_abs, shape}}."""
    node = shutil.which("node")
    if node is None:
        print("  (no node: ORT verification skipped)", file=sys.stderr)
        return None
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [node, os.path.join(HERE, "dynamic_stream_ort.js"), path, "--shapes", shape_spec(spec["verify"]),
               "--passes", "1", "--dump", tmp]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"make_dynamic_models: ORT failed on {path}:\n{p.stderr}")
        result = {}
        for i in range(len(spec["verify"])):
            feeds = [torch.from_numpy(np.load(os.path.join(tmp, f"{i}_in_{name}.npy"))) for name in spec["inputs"]]
            with torch.no_grad():
                ref = spec["model"](*feeds)
            ref = [ref] if isinstance(ref, torch.Tensor) else list(ref)
            for name, r in zip(spec["outputs"], ref):
                got = np.load(os.path.join(tmp, f"{i}_out_{name}.npy"))
                r = r.numpy()
                if got.shape != r.shape:
                    raise SystemExit(f"make_dynamic_models: {path} group {i} {name}: ORT shape {got.shape}, torch {r.shape}")
                diff = float(np.abs(got - r).max())
                scale = float(np.abs(r).max())
                result[f"{i}:{name}"] = {"shape": list(r.shape), "ort_vs_torch_max_abs": diff, "ref_max_abs": scale,
                                         "ref_std": float(r.std())}
                if not diff <= 1e-3 * max(1.0, scale):
                    raise SystemExit(f"make_dynamic_models: {path} group {i} {name}: ORT differs from torch by {diff}")
        return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma-separated model names (%s)" % ", ".join(SPECS))
    ap.add_argument("--force", action="store_true", help="re-export models that exist")
    ap.add_argument("--no-verify", action="store_true", help="skip the ONNX Runtime check")
    a = ap.parse_args()
    root = os.path.join(os.environ.get("KILN_BENCH_CACHE", os.path.expanduser("~/.cache/kiln-bench")), "models")
    names = [n for n in a.only.split(",") if n] or list(SPECS)
    for n in names:
        if n not in SPECS:
            raise SystemExit(f"make_dynamic_models: unknown model {n} (known: {', '.join(SPECS)})")
    torch.manual_seed(SEED)
    for n in names:
        d = os.path.join(root, n)
        path = os.path.join(d, "model.onnx")
        if os.path.exists(path) and not a.force:
            print(f"[{n}] exists: {path} (--force to re-export)")
            continue
        os.makedirs(d, exist_ok=True)
        spec = SPECS[n]()
        tmp_path = path + ".tmp"
        export(spec, tmp_path)
        summary = check(spec, tmp_path)
        meta = {
            "name": n, "opset": OPSET, "seed": SEED, "torch": torch.__version__, "onnx": onnx.__version__,
            "inputs": {name: {"dtype": dt, "shape": dims, "dynamic_axes": {str(i): s for i, s in enumerate(dims) if isinstance(s, str)}}
                       for name, (dt, dims) in spec["inputs"].items()},
            "outputs": {name: {"dtype": "float32", "shape": dims} for name, dims in spec["outputs"].items()},
            "trace_shapes": spec["trace"],
            "params_M": round(sum(p.numel() for p in spec["model"].parameters()) / 1e6, 3),
            "onnx_bytes": os.path.getsize(tmp_path),
            **summary,
        }
        if not a.no_verify:
            meta["ort_verify"] = verify_ort(spec, tmp_path)
        os.replace(tmp_path, path)
        with open(os.path.join(d, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1)
        print(f"[{n}] ok: {path}, {meta['n_nodes']} nodes, {meta['params_M']}M params, "
              f"symbolic dims {summary['symbolic_dims_in_graph']}"
              + ("" if a.no_verify or meta["ort_verify"] is None else
                 ", ORT vs torch max abs diff %.3g" % max(v["ort_vs_torch_max_abs"] for v in meta["ort_verify"].values())))


if __name__ == "__main__":
    main()
