#!/usr/bin/env bash
# Configures and builds kiln (Release, Ninja) into ./build. Used by quickstart.sh and test.sh.
# In unity batches of 12 files (each batch's headers parsed and its inline code compiled once):
# 1025 CPU-seconds for the whole build against 1875 file by file, and no slower to run (ResNet-50,
# BERT, MobileNet-v2 measured interleaved). A development build configured by hand without
# CMAKE_UNITY_BUILD compiles file by file, so that an edit recompiles one file.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${KILN_JOBS:-2}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=12 >/dev/null
cmake --build build -j"$JOBS"
