#!/usr/bin/env bash
# Installs the build into a temporary prefix, builds examples/hello against it with
# find_package(kiln) and runs it on a model; checks kiln.pc with pkg-config.
# Usage: check_install.sh BUILD_DIR SOURCE_DIR WORK_DIR MODEL.onnx
set -euo pipefail
build=$1 src=$2 work=$3 model=$4
rm -rf "$work"
cmake --install "$build" --prefix "$work/prefix" > "$work.install.log" 2>&1 || { cat "$work.install.log"; exit 1; }
test -f "$work/prefix/lib/libkiln.so" -a -f "$work/prefix/include/kiln/core.hpp" -a -x "$work/prefix/bin/kiln"
cmake -S "$src/examples/hello" -B "$work/hello" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$work/hello" > /dev/null
"$work/hello/hello" "$model"
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
echo "pkg-config: $(pkg-config --modversion kiln) $(pkg-config --libs kiln)"
