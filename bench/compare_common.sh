# Sourced by compare_dynamic.sh and compare_detection.sh (set -euo pipefail there): the
# environment both read, with its defaults, the kiln binary and ONNX Runtime checked, and a
# temporary directory TMP removed on exit. NAME: the sourcing script's name, for its messages.
#
# env: THREADS=2  PASSES=3  REPEAT=2  KILN=build/kiln
#      KILN_ARGS (default: --property inference_precision=f32)  KILN_BENCH_CACHE (default ~/.cache/kiln-bench)
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
CACHE="${KILN_BENCH_CACHE:-$HOME/.cache/kiln-bench}"
export KILN_BENCH_CACHE="$CACHE"
KILN="${KILN:-$ROOT/build/kiln}"
THREADS="${THREADS:-2}"
PASSES="${PASSES:-3}"
REPEAT="${REPEAT:-2}"
KILN_ARGS="${KILN_ARGS:---property inference_precision=f32}"
[ -x "$KILN" ] || { echo "$NAME: no kiln binary at $KILN" >&2; exit 2; }
[ -d "$CACHE/node_modules/onnxruntime-node" ] || { echo "$NAME: ONNX Runtime not installed (../shared/bench/setup.sh)" >&2; exit 2; }
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
