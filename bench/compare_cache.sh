#!/usr/bin/env bash
# Start-up with and without the model cache: `kiln benchmark MODEL` run as a fresh process,
# cold (no cache: read_model + compile_model + first inference) and warm (-cache_dir holding
# the model: compile_model through the cache + first inference), interleaved PASSES times;
# medians and their ratio. The cache is written once before the passes (that run is reported
# too: the price of the first start with a cache).
#
# usage: bench/compare_cache.sh MODEL.onnx [extra kiln benchmark arguments, e.g. -p inference_precision=f32]
# env:   PASSES=7   THREADS=2   KILN=<kiln binary> (default build/kiln)   CACHE_DIR=<folder> (default: a temporary one)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
MODEL="${1:?usage: compare_cache.sh MODEL.onnx [kiln benchmark arguments]}"
shift
KILN="${KILN:-$ROOT/build/kiln}"
PASSES="${PASSES:-7}"
THREADS="${THREADS:-2}"
[ -x "$KILN" ] || { echo "compare_cache: no kiln binary at $KILN (build it, or set KILN=...)" >&2; exit 2; }
OWN_DIR=""
if [ -z "${CACHE_DIR:-}" ]; then OWN_DIR="$(mktemp -d)"; CACHE_DIR="$OWN_DIR"; fi
trap '[ -n "$OWN_DIR" ] && rm -rf "$OWN_DIR"' EXIT
J="$(mktemp -d)"
trap '[ -n "$OWN_DIR" ] && rm -rf "$OWN_DIR"; rm -rf "$J"' EXIT

run() {  # $1: json file, rest: extra arguments
  local out="$1"
  shift
  "$KILN" benchmark "$MODEL" -nthreads "$THREADS" -niter 1 --warmup 0 --json "$out" "$@" >/dev/null
}
run "$J/write.json" -cache_dir "$CACHE_DIR" "$@"
for i in $(seq 1 "$PASSES"); do
  run "$J/cold_$i.json" "$@"
  run "$J/warm_$i.json" -cache_dir "$CACHE_DIR" "$@"
done
/usr/bin/python3 - "$J" "$PASSES" <<'EOF'
import json, statistics, sys
d, n = sys.argv[1], int(sys.argv[2])
def load(name):
    return json.load(open(f"{d}/{name}.json"))
def start(j):
    return j["read_ms"] + j["compile_ms"] + j["first_inference_ms"]
w = load("write")
print(f"first start with the cache (writes it): {start(w):.0f} ms  ({w.get('model_cache', '')})")
cold = [load(f"cold_{i}") for i in range(1, n + 1)]
warm = [load(f"warm_{i}") for i in range(1, n + 1)]
assert all(j.get("model_cache", "").startswith("hit") for j in warm), [j.get("model_cache") for j in warm]
med = lambda xs: statistics.median(xs)
c = med([start(j) for j in cold]); h = med([start(j) for j in warm])
print(f"cold: read {med([j['read_ms'] for j in cold]):.0f} + compile {med([j['compile_ms'] for j in cold]):.0f} "
      f"+ first {med([j['first_inference_ms'] for j in cold]):.0f} = {c:.0f} ms (median of {n})")
print(f"warm: compile {med([j['compile_ms'] for j in warm]):.0f} + first {med([j['first_inference_ms'] for j in warm]):.0f} "
      f"= {h:.0f} ms (median of {n})")
print(f"warm / cold = {h / c:.2f}   (per pass: {', '.join(f'{start(b) / start(a):.2f}' for a, b in zip(cold, warm))})")
EOF
