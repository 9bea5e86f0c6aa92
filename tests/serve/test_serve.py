"""kiln serve against a KServe v2 client (urllib): every endpoint, JSON and binary tensors,
results equal to `kiln run`, every class of bad request (4xx, the server keeps serving),
concurrent clients, metrics and a graceful SIGTERM.

Run by ctest (test `serve`): KILN_CLI=build/kiln /usr/bin/python3 -m pytest tests/serve
"""
import json
import os
import signal
import struct
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

KILN = os.environ.get("KILN_CLI", os.path.join(os.path.dirname(__file__), "..", "..", "build", "kiln"))


class Server:
    def __init__(self, repo, *args):
        self.proc = subprocess.Popen([KILN, "serve", "--model-repository", repo, "--http-port", "0",
                                      "-p", "inference_precision=f32", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.log = []
        self.port = None
        deadline = time.time() + 60
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            event = json.loads(line)
            if event.get("event") == "listening":
                self.port = int(event["address"].rsplit(":", 1)[1])
                break
        assert self.port, "server did not start: " + "".join(self.log)
        # keep draining the log so the server never blocks on a full pipe
        self.reader = threading.Thread(target=lambda: self.log.extend(self.proc.stderr), daemon=True)
        self.reader.start()

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def request(self, method, path, body=None, headers=None):
        req = urllib.request.Request(self.url(path), data=body, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def get(self, path):
        return self.request("GET", path)

    def infer(self, model, payload, headers=None):
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        return self.request("POST", f"/v2/models/{model}/infer", body, headers)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            return self.proc.wait(timeout=30)
        return self.proc.returncode


@pytest.fixture(scope="module")
def repo():
    d = tempfile.mkdtemp(prefix="kiln_serve_")
    for name in ("mlp", "bert_tiny"):
        os.makedirs(os.path.join(d, name))
        subprocess.run([KILN, "zoo", name, "-o", os.path.join(d, name, "model.onnx")], check=True, capture_output=True)
    with open(os.path.join(d, "mlp", "config.json"), "w") as f:
        json.dump({"properties": {"num_streams": 2}}, f)
    yield d
    subprocess.run(["rm", "-rf", d])


@pytest.fixture(scope="module")
def server(repo):
    s = Server(repo)
    yield s
    assert s.stop() == 0


def kiln_run(model_path, inputs, tmp):
    """`kiln run` on the same inputs (f32): its outputs by name."""
    args = [KILN, "run", model_path, "-p", "inference_precision=f32", "--output-dir", os.path.join(tmp, "out")]
    for name, a in inputs.items():
        p = os.path.join(tmp, name + ".npy")
        np.save(p, a)
        args += ["--input", f"{name}={p}"]
    subprocess.run(args, check=True, capture_output=True)
    out = os.path.join(tmp, "out")
    return {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out)}


def json_tensor(name, a, datatype):
    return {"name": name, "shape": list(a.shape), "datatype": datatype, "data": a.flatten().tolist()}


def error_of(status_headers_body):
    status, _, body = status_headers_body
    return status, json.loads(body)["error"]


def test_health_and_metadata(server):
    assert server.get("/v2/health/live")[0] == 200
    assert json.loads(server.get("/v2/health/ready")[2]) == {"ready": True}
    meta = json.loads(server.get("/v2")[2])
    assert meta["name"] == "kiln" and "binary_tensor_data" in meta["extensions"]
    m = json.loads(server.get("/v2/models/mlp")[2])
    assert m["name"] == "mlp" and m["versions"] == ["1"]
    assert m["inputs"] == [{"name": "input", "datatype": "FP32", "shape": [-1, 16]}]
    assert m["outputs"][0]["name"] == "output"
    assert json.loads(server.get("/v2/models/mlp/versions/1")[2])["name"] == "mlp"
    assert json.loads(server.get("/v2/models/bert_tiny/ready")[2])["ready"] is True
    assert server.get("/v2/models/mlp/versions/1/ready")[0] == 200
    status, msg = error_of(server.get("/v2/models/mlp/versions/2"))
    assert status == 404 and "version" in msg
    status, msg = error_of(server.get("/v2/models/nope/ready"))
    assert status == 404 and "unknown model 'nope'" in msg and "mlp" in msg
    status, msg = error_of(server.get("/v2/nothing/here"))
    assert status == 404 and "no such endpoint" in msg


def test_json_infer_matches_kiln_run(server, repo):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 16)).astype(np.float32)
    status, _, body = server.infer("mlp", {"id": "r1", "inputs": [json_tensor("input", x, "FP32")]})
    assert status == 200, body
    r = json.loads(body)
    assert r["model_name"] == "mlp" and r["id"] == "r1"
    out = r["outputs"][0]
    assert out["name"] == "output" and out["datatype"] == "FP32" and out["shape"] == [3, 10]
    with tempfile.TemporaryDirectory() as tmp:
        want = kiln_run(os.path.join(repo, "mlp", "model.onnx"), {"input": x}, tmp)["output"]
    np.testing.assert_allclose(np.array(out["data"], np.float32).reshape(3, 10), want, rtol=1e-5, atol=1e-7)
    # nested data (row-major) is the same request
    nested = {"inputs": [{"name": "input", "shape": [3, 16], "datatype": "FP32", "data": x.tolist()}]}
    assert json.loads(server.infer("mlp", nested)[2])["outputs"][0]["data"] == out["data"]


def test_binary_infer_two_int64_inputs(server, repo):
    rng = np.random.default_rng(1)
    ids = rng.integers(0, 1000, (2, 12)).astype(np.int64)
    mask = np.ones((2, 12), np.int64)
    mask[1, 8:] = 0
    header = {"inputs": [{"name": "input_ids", "shape": [2, 12], "datatype": "INT64",
                          "parameters": {"binary_data_size": ids.nbytes}},
                         {"name": "attention_mask", "shape": [2, 12], "datatype": "INT64",
                          "parameters": {"binary_data_size": mask.nbytes}}],
              "outputs": [{"name": "last_hidden_state", "parameters": {"binary_data": True}}]}
    h = json.dumps(header).encode()
    status, headers, body = server.infer("bert_tiny", h + ids.tobytes() + mask.tobytes(),
                                         {"Inference-Header-Content-Length": str(len(h)),
                                          "Content-Type": "application/octet-stream"})
    assert status == 200, body
    n = int(headers["Inference-Header-Content-Length"])
    r = json.loads(body[:n])
    out = r["outputs"][0]
    assert out["parameters"]["binary_data_size"] == len(body) - n
    got = np.frombuffer(body[n:], np.float32).reshape(out["shape"])
    with tempfile.TemporaryDirectory() as tmp:
        want = kiln_run(os.path.join(repo, "bert_tiny", "model.onnx"), {"input_ids": ids, "attention_mask": mask}, tmp)
    np.testing.assert_allclose(got, want["last_hidden_state"], rtol=1e-5, atol=1e-6)
    # JSON request, binary response for every output
    req = {"inputs": [json_tensor("input_ids", ids, "INT64"), json_tensor("attention_mask", mask, "INT64")],
           "parameters": {"binary_data_output": True}}
    status, headers, body2 = server.infer("bert_tiny", req)
    assert status == 200
    n2 = int(headers["Inference-Header-Content-Length"])
    outs = json.loads(body2[:n2])["outputs"]
    assert [o["name"] for o in outs][0] == "last_hidden_state"
    size = outs[0]["parameters"]["binary_data_size"]
    assert body2[n2:n2 + size] == body[n:]
    assert n2 + sum(o["parameters"]["binary_data_size"] for o in outs) == len(body2)


BAD = [
    # (what, payload or raw bytes, headers, status, part of the message)
    ("malformed JSON", b'{"inputs": [', None, 400, "not valid JSON"),
    ("not an object", b'[1, 2]', None, 400, "JSON object"),
    ("no inputs", {}, None, 400, "\"inputs\""),
    ("wrong input name", {"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32", "data": [0] * 16}]},
     None, 400, "no such input"),
    ("wrong datatype", {"inputs": [{"name": "input", "shape": [1, 16], "datatype": "INT32", "data": [0] * 16}]},
     None, 400, "the model takes FP32"),
    ("unknown datatype string", {"inputs": [{"name": "input", "shape": [1, 16], "datatype": "FLOAT", "data": [0] * 16}]},
     None, 400, "unknown datatype"),
    ("wrong shape", {"inputs": [{"name": "input", "shape": [1, 15], "datatype": "FP32", "data": [0] * 15}]},
     None, 400, "the model takes [batch,16]"),
    ("data count", {"inputs": [{"name": "input", "shape": [2, 16], "datatype": "FP32", "data": [0] * 16}]},
     None, 400, "16 values for shape [2,16]"),
    ("not a number", {"inputs": [{"name": "input", "shape": [1, 16], "datatype": "FP32", "data": ["a"] * 16}]},
     None, 400, "is not a number"),
    ("negative dim", {"inputs": [{"name": "input", "shape": [-1, 16], "datatype": "FP32", "data": [0] * 16}]},
     None, 400, "non-negative"),
    ("huge declared shape", {"inputs": [{"name": "input", "shape": [2 ** 36, 16], "datatype": "FP32",
                                          "data": [0] * 16}]}, None, 400, "16 values for shape [68719476736,16]"),
    ("huge binary shape", json.dumps({"inputs": [{"name": "input", "shape": [2 ** 36, 16], "datatype": "FP32",
                                                   "parameters": {"binary_data_size": 64}}]}).encode() + b"\0" * 64,
     "header", 400, "need 4398046511104"),
    ("given twice", {"inputs": [{"name": "input", "shape": [1, 16], "datatype": "FP32", "data": [0] * 16}] * 2},
     None, 400, "given twice"),
    ("unknown output", {"inputs": [{"name": "input", "shape": [1, 16], "datatype": "FP32", "data": [0] * 16}],
                        "outputs": [{"name": "nope"}]}, None, 400, "no such output"),
    ("truncated binary", json.dumps({"inputs": [{"name": "input", "shape": [1, 16], "datatype": "FP32",
                                                  "parameters": {"binary_data_size": 64}}]}).encode() + b"\0" * 10,
     "header", 400, "truncated"),
    ("header length past the body", b'{}', {"Inference-Header-Content-Length": "999"}, 400, "but the body has"),
    ("header length not a number", b'{}', {"Inference-Header-Content-Length": "12x"}, 400, "not a byte count"),
]


@pytest.mark.parametrize("what,payload,headers,status,part", BAD, ids=[b[0] for b in BAD])
def test_bad_requests_get_4xx(server, what, payload, headers, status, part):
    if headers == "header":
        n = payload.index(b"}]}") + 3
        headers = {"Inference-Header-Content-Length": str(n)}
    got, msg = error_of(server.infer("mlp", payload, headers))
    assert got == status and part in msg, (what, got, msg)


def test_errors_of_inference_and_paths(server):
    # a value the model cannot take at run time: the Gather of token ids out of the vocabulary
    ids = {"name": "input_ids", "shape": [1, 4], "datatype": "INT64", "data": [1, 2, 3, 10 ** 9]}
    mask = {"name": "attention_mask", "shape": [1, 4], "datatype": "INT64", "data": [1, 1, 1, 1]}
    status, msg = error_of(server.infer("bert_tiny", {"inputs": [ids, mask]}))
    assert status == 400 and "Gather" in msg, msg
    status, msg = error_of(server.infer("nope", {"inputs": []}))
    assert status == 404 and "unknown model" in msg
    status, _, _ = server.request("DELETE", "/v2/models/mlp")
    assert status in (404, 405)
    # still serving
    ok = {"inputs": [{"name": "input", "shape": [1, 16], "datatype": "FP32", "data": [0.5] * 16}]}
    assert server.infer("mlp", ok)[0] == 200


def test_concurrent_clients_get_identical_results(server):
    x = np.linspace(-1, 1, 4 * 16, dtype=np.float32).reshape(4, 16)
    payload = {"inputs": [json_tensor("input", x, "FP32")]}
    first = json.loads(server.infer("mlp", payload)[2])["outputs"][0]["data"]
    failures = []

    def client():
        for _ in range(50):
            status, _, body = server.infer("mlp", payload)
            if status != 200 or json.loads(body)["outputs"][0]["data"] != first:
                failures.append((status, body[:200]))

    threads = [threading.Thread(target=client) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:3]


def test_metrics_count_requests_and_failures(server):
    before = server.get("/metrics")[2].decode()

    def value(text, metric):
        for line in text.splitlines():
            if line.startswith(metric + " "):
                return float(line.split()[-1])
        raise AssertionError(metric + " missing:\n" + text)

    ok = {"inputs": [{"name": "input", "shape": [1, 16], "datatype": "FP32", "data": [0.5] * 16}]}
    server.infer("mlp", ok)
    server.infer("mlp", {"inputs": []})
    after = server.get("/metrics")[2].decode()
    assert value(after, 'kiln_requests_total{model="mlp"}') == value(before, 'kiln_requests_total{model="mlp"}') + 2
    assert (value(after, 'kiln_request_failures_total{model="mlp"}') ==
            value(before, 'kiln_request_failures_total{model="mlp"}') + 1)
    assert value(after, 'kiln_inference_duration_seconds_count{model="mlp"}') >= 1
    assert 'kiln_request_duration_seconds_bucket{model="mlp",le="+Inf"}' in after


def test_oversize_body_and_graceful_shutdown(repo):
    s = Server(repo, "--max-request-bytes", "4096")
    big = {"inputs": [{"name": "input", "shape": [64, 16], "datatype": "FP32", "data": [0.25] * 1024}]}
    status, msg = error_of(s.infer("mlp", big))
    assert status == 413 and "larger than the server's limit" in msg
    small = {"inputs": [{"name": "input", "shape": [1, 16], "datatype": "FP32", "data": [0.25] * 16}]}
    assert s.infer("mlp", small)[0] == 200
    # requests in flight when SIGTERM arrives are answered; then the server exits 0
    results = []

    def client():
        for _ in range(20):
            try:
                results.append(s.infer("mlp", small)[0])
            except OSError:
                results.append("refused")
                return

    t = threading.Thread(target=client)
    t.start()
    time.sleep(0.05)
    assert s.stop() == 0
    t.join()
    assert all(r in (200, 503, "refused") for r in results), results
    assert 200 in results
    log = "".join(s.log)
    assert '"event":"shutting_down","signal":"SIGTERM"' in log and '"event":"stopped"' in log


def test_restart_reads_the_model_cache(tmp_path):
    """-p cache_dir=DIR: the first start writes the compiled model, the second reads it; both answer alike."""
    import onnx
    plain = tmp_path / "mlp.onnx"
    subprocess.run([KILN, "zoo", "mlp", "-o", str(plain)], check=True, capture_output=True)
    m = onnx.load(str(plain))
    for port in (m.graph.input[0], m.graph.output[0]):  # batch 2: a static model, compiled at start
        port.type.tensor_type.shape.dim[0].dim_value = 2
    (tmp_path / "repo" / "mlp2").mkdir(parents=True)
    onnx.save(m, str(tmp_path / "repo" / "mlp2" / "model.onnx"))
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(2, 16)
    answers, statuses = [], []
    for _ in range(2):
        s = Server(str(tmp_path / "repo"), "-p", f"cache_dir={tmp_path / 'cache'}")
        ready = [json.loads(line) for line in s.log if '"model_ready"' in line]
        statuses.append(ready[0]["model_cache"])
        status, _, body = s.infer("mlp2", {"inputs": [json_tensor("input", x, "FP32")]})
        assert status == 200, body
        answers.append(json.loads(body)["outputs"][0]["data"])
        assert s.stop() == 0
    assert statuses[0].startswith("written: ") and statuses[1].startswith("hit: "), statuses
    assert answers[0] == answers[1]
