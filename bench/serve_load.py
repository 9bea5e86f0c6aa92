#!/usr/bin/env python3
"""Load a kiln serve (or any KServe v2) endpoint: N client threads send binary-tensor requests
for T seconds; prints throughput and latency percentiles. Inputs are random, of the shapes
given (or the model's, where static).

usage: /usr/bin/python3 bench/serve_load.py --url http://127.0.0.1:8000 --model NAME
                                            [--clients 8] [--seconds 10] [--shape name=1,3,224,224 ...]
"""
import argparse
import json
import threading
import time
import urllib.request

import numpy as np

DTYPES = {"FP32": np.float32, "FP64": np.float64, "INT64": np.int64, "INT32": np.int32, "UINT8": np.uint8,
          "INT8": np.int8, "BOOL": np.bool_, "FP16": np.float16}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--model", required=True)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--shape", action="append", default=[])
    args = ap.parse_args()
    shapes = {s.split("=")[0]: [int(d) for d in s.split("=")[1].split(",")] for s in args.shape}
    meta = json.load(urllib.request.urlopen(f"{args.url}/v2/models/{args.model}"))
    rng = np.random.default_rng(0)
    header = {"inputs": [], "outputs": [{"name": o["name"], "parameters": {"binary_data": True}} for o in meta["outputs"]]}
    blobs = []
    for i in meta["inputs"]:
        shape = shapes.get(i["name"], [d if d >= 0 else 1 for d in i["shape"]])
        dt = DTYPES[i["datatype"]]
        a = (rng.integers(0, 100, shape) if np.issubdtype(dt, np.integer) else rng.standard_normal(shape)).astype(dt)
        header["inputs"].append({"name": i["name"], "shape": shape, "datatype": i["datatype"],
                                 "parameters": {"binary_data_size": a.nbytes}})
        blobs.append(a.tobytes())
    h = json.dumps(header).encode()
    body = h + b"".join(blobs)
    url = f"{args.url}/v2/models/{args.model}/infer"
    latencies, errors = [], []
    lock = threading.Lock()
    stop = time.time() + args.seconds

    def client():
        mine = []
        while time.time() < stop:
            req = urllib.request.Request(url, data=body, method="POST",
                                         headers={"Inference-Header-Content-Length": str(len(h)),
                                                  "Content-Type": "application/octet-stream"})
            t0 = time.perf_counter()
            try:
                with urllib.request.urlopen(req, timeout=60) as r:
                    r.read()
                mine.append(time.perf_counter() - t0)
            except Exception as e:  # noqa: BLE001 - counted and reported
                with lock:
                    errors.append(str(e))
        with lock:
            latencies.extend(mine)

    t_start = time.time()
    threads = [threading.Thread(target=client) for _ in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - t_start
    lat = np.array(latencies) * 1000
    print(json.dumps({"model": args.model, "clients": args.clients, "requests": len(latencies), "errors": len(errors),
                      "throughput_per_s": round(len(latencies) / wall, 2),
                      "latency_ms": {"median": round(float(np.median(lat)), 3), "p90": round(float(np.percentile(lat, 90)), 3),
                                     "max": round(float(lat.max()), 3)} if len(lat) else {}}))


if __name__ == "__main__":
    main()
