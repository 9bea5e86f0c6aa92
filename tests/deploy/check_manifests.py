#!/usr/bin/env python3
"""The deployment example agrees with itself and with kiln (docs/serving.md, "Deployment"):
deploy/Dockerfile builds with the project's install script and serves /mnt/models on the port
it exposes; the KServe ServingRuntime runs that port with kiln's health endpoints as probes and
only flags `kiln serve` has; the InferenceService names that runtime and one of its formats.
No container daemon is needed: the files are read, not built.

usage: check_manifests.py REPO_ROOT KILN_BINARY
"""
import json
import os
import re
import subprocess
import sys

import yaml


def fail(msg):
    print("deploy_manifests: " + msg)
    sys.exit(1)


def main():
    root, kiln = sys.argv[1], sys.argv[2]
    with open(os.path.join(root, "deploy", "Dockerfile")) as f:
        docker = f.read()
    if not re.search(r"^FROM debian:12\b", docker, re.M):
        fail("the image is not based on debian:12")
    if "scripts/install_deps.sh --build-only" not in docker:
        fail("the image does not install with scripts/install_deps.sh --build-only")
    for src in re.findall(r"^COPY (\S+) ", docker, re.M):
        if not os.path.exists(os.path.join(root, src)):
            fail(f"COPY {src}: no such file in the repository")
    m = re.search(r"^ENTRYPOINT (\[.*\])$", docker, re.M)
    if not m:
        fail("no ENTRYPOINT in exec form")
    entry = json.loads(m.group(1))
    if entry[:2] != ["kiln", "serve"]:
        fail(f"the entrypoint does not run kiln serve: {entry}")
    opts = dict(zip(entry[2::2], entry[3::2]))
    port = int(opts.get("--http-port", "0"))
    if opts.get("--model-repository") != "/mnt/models" or opts.get("--host") != "0.0.0.0" or not port:
        fail(f"the entrypoint must serve /mnt/models on 0.0.0.0 and a fixed port: {entry}")
    if not re.search(rf"^EXPOSE {port}$", docker, re.M):
        fail(f"the image does not EXPOSE {port}")

    serve_help = subprocess.run([kiln, "serve", "--help"], capture_output=True, text=True).stdout
    for flag in entry[2::2]:
        if flag not in serve_help:
            fail(f"kiln serve has no flag {flag}")

    with open(os.path.join(root, "deploy", "kserve", "serving-runtime.yaml")) as f:
        rt = yaml.safe_load(f)
    if rt.get("kind") != "ServingRuntime" or not rt["apiVersion"].startswith("serving.kserve.io/"):
        fail("serving-runtime.yaml is not a KServe ServingRuntime")
    spec = rt["spec"]
    formats = {f["name"] for f in spec["supportedModelFormats"]}
    if "onnx" not in formats or "v2" not in spec.get("protocolVersions", []):
        fail("the runtime must take onnx over protocol v2")
    (c,) = spec["containers"]
    if [p["containerPort"] for p in c["ports"]] != [port]:
        fail(f"the runtime's container port is not the image's {port}")
    probes = {"readinessProbe": "/v2/health/ready", "livenessProbe": "/v2/health/live"}
    for probe, path in probes.items():
        got = c[probe]["httpGet"]
        if got["path"] != path or got["port"] != port:
            fail(f"{probe} must GET {path} on {port}, got {got}")
    for arg in c.get("args", []):
        if arg.startswith("-") and arg.split("=")[0] not in serve_help:
            fail(f"the runtime passes {arg}, which kiln serve does not take")

    with open(os.path.join(root, "deploy", "kserve", "inference-service.yaml")) as f:
        isvc = yaml.safe_load(f)
    if isvc.get("kind") != "InferenceService":
        fail("inference-service.yaml is not an InferenceService")
    model = isvc["spec"]["predictor"]["model"]
    if model["runtime"] != rt["metadata"]["name"]:
        fail(f"the InferenceService runs '{model['runtime']}', the runtime is '{rt['metadata']['name']}'")
    if model["modelFormat"]["name"] not in formats or model.get("protocolVersion") != "v2":
        fail("the InferenceService's format / protocol is not one the runtime takes")
    print(f"deploy_manifests: Dockerfile (port {port}), ServingRuntime '{rt['metadata']['name']}' and "
          f"InferenceService '{isvc['metadata']['name']}' agree")


if __name__ == "__main__":
    main()
