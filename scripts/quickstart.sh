#!/usr/bin/env bash
# From a fresh Debian 12 machine: install dependencies, build kiln, generate the built-in
# ResNet-18 (fixed random weights, no download) and run it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
mkdir -p build/models
./build/kiln zoo resnet18 -o build/models/resnet18.onnx
./build/kiln info build/models/resnet18.onnx
./build/kiln run build/models/resnet18.onnx --random-inputs --seed 1 --output-dir build/outputs
