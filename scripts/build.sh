#!/usr/bin/env bash
# Configures and builds kiln (Release, Ninja) into ./build. Used by quickstart.sh and test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${KILN_JOBS:-2}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$JOBS"
