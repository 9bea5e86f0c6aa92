#!/usr/bin/env bash
# Installs everything kiln needs to build, test and benchmark, from Debian 12 packages
# only. Idempotent: installs only what is missing; runs `apt-get update` once, only
# when something must be installed.
#
# usage: install_deps.sh [--build-only]
#   --build-only   what building the `kiln` executable needs (-DKILN_BUILD_TESTS=OFF
#                  -DKILN_BUILD_PYTHON=OFF -DKILN_BUILD_BENCHMARKS=OFF), no test data, no torch:
#                  the serving image (deploy/Dockerfile)
set -euo pipefail

BUILD_PKGS=(
  build-essential cmake ninja-build pkg-config
  libdnnl-dev libxbyak-dev
  libonnx-dev libprotobuf-dev protobuf-compiler
  nlohmann-json3-dev libcli11-dev libre2-dev libcpp-httplib-dev libxxhash-dev
)
PKGS=(
  "${BUILD_PKGS[@]}"
  libgtest-dev libgmock-dev libbenchmark-dev pybind11-dev python3-dev python3-pytest
  python3-build python3-setuptools python3-wheel python3-venv
  libonnx-testdata
  python3-yaml python3-numpy python3-onnx python3-torch python3-torchvision libopenblas0-openmp
  qemu-user  # scripts/test_emulated_cpu.sh: kiln's kernels on emulated AVX2 and SSE4.2 CPUs
  clang-14 libclang-rt-14-dev libomp-14-dev  # scripts/test.sh's sanitizer builds
)
case "${1:-}" in
  --build-only) PKGS=("${BUILD_PKGS[@]}") ;;
  "") ;;
  *) echo "install_deps.sh: unknown argument '$1' (usage: install_deps.sh [--build-only])" >&2; exit 2 ;;
esac

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "[kiln] all dependencies are installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "[kiln] installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
