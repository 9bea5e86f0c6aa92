#!/usr/bin/env bash
# From a fresh Debian 12 machine: install dependencies, build kiln (and its Python wheel),
# generate the built-in ResNet-18 (fixed random weights, no download) and run it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
mkdir -p build/models
./build/kiln zoo resnet18 -o build/models/resnet18.onnx
./build/kiln info build/models/resnet18.onnx
./build/kiln run build/models/resnet18.onnx --random-inputs --seed 1 --output-dir build/outputs
# the Python wheel (docs/python.md): offline, from Debian's python3-build / setuptools / wheel
cmake --build build --target kiln_wheel > build/wheel.log 2>&1 || { cat build/wheel.log; exit 1; }
echo "[kiln] Python wheel: $(ls build/dist/kiln-*.whl)"
echo "[kiln]   python3 -m venv --system-site-packages venv && venv/bin/pip install --no-index build/dist/kiln-*.whl"
