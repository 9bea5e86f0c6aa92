#!/usr/bin/env bash
# Builds the wheel (target kiln_wheel), installs it into a fresh virtual environment made with
# --system-site-packages, offline (pip --no-index), and runs the Python tests against the
# installed package (no PYTHONPATH: the import must find the venv's kiln).
# Usage: check_wheel.sh BUILD_DIR SOURCE_DIR WORK_DIR KILN_CLI
set -euo pipefail
build=$1 src=$2 work=$3 cli=$4
rm -rf "$work" && mkdir -p "$work"
cmake --build "$build" --target kiln_wheel > "$work/wheel.log" 2>&1 || { cat "$work/wheel.log"; exit 1; }
wheel=$(ls "$build"/dist/kiln-*.whl)
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
"$work/venv/bin/pip" install --no-index --quiet "$wheel"
cd "$work"
env -u PYTHONPATH "$work/venv/bin/python" -c \
  "import kiln; assert kiln.__file__.startswith('$work/venv/'), kiln.__file__; print('installed', kiln.__version__, 'from', '$(basename "$wheel")')"
env -u PYTHONPATH KILN_CLI="$cli" "$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$src/tests/python"
