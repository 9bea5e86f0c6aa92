#!/usr/bin/env bash
# Installs dependencies, builds kiln and runs every test (unit, conformance, CLI, end-to-end).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
cd build
ctest --output-on-failure "$@"
