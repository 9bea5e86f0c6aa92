#!/usr/bin/env bash
# kiln vs ONNX Runtime (CPU EP, onnxruntime-node): latency of `kiln benchmark` and
# ../shared/bench/peer_ort.js on the same models, same inputs (<model dir>/inputs/*.npy) and the
# same thread count, interleaved: every pass runs kiln and ORT back to back on each model (the
# order alternates between passes), so machine noise hits both alike.
#
# env: MODELS=resnet50,mobilenet_v2,bert_base   THREADS=2   PASSES=2   ITERS=20   WARMUP=2
#      KILN=<kiln binary> (default: build/kiln)   KILN_ARGS=<extra kiln benchmark arguments>   SHARED_BENCH=../shared/bench
#      KILN_BENCH_CACHE (default ~/.cache/kiln-bench)   OUT=<results dir> (default $CACHE/results/compare-<stamp>)
# out: $OUT/results.jsonl (one line per runtime x model x pass), $OUT/summary.md (the table), logs.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
SHARED="${SHARED_BENCH:-$ROOT/../shared/bench}"
CACHE="${KILN_BENCH_CACHE:-$HOME/.cache/kiln-bench}"
export KILN_BENCH_CACHE="$CACHE"
PY=/usr/bin/python3
MODELS="${MODELS:-resnet50,mobilenet_v2,bert_base}"
THREADS="${THREADS:-2}"
PASSES="${PASSES:-2}"
ITERS="${ITERS:-20}"
WARMUP="${WARMUP:-2}"
if [ -z "${KILN:-}" ]; then
  for k in "$ROOT/build/kiln"; do [ -x "$k" ] && { KILN="$k"; break; }; done
fi
[ -n "${KILN:-}" ] && [ -x "$KILN" ] || { echo "compare_ort: no kiln binary (build it, or set KILN=...)" >&2; exit 2; }
[ -f "$SHARED/peer_ort.js" ] || { echo "compare_ort: $SHARED/peer_ort.js not found (set SHARED_BENCH=...)" >&2; exit 2; }
OUT="${OUT:-$CACHE/results/compare-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
R="$OUT/results.jsonl"
echo "[compare_ort] kiln=$KILN threads=$THREADS passes=$PASSES iters=$ITERS warmup=$WARMUP -> $OUT"

# ORT and the models, only when missing (both idempotent but slow).
[ -d "$CACHE/node_modules/onnxruntime-node" ] || "$SHARED/setup.sh" > "$OUT/setup.log" 2>&1
IFS=, read -r -a NAMES <<< "$MODELS"
missing=()
for n in "${NAMES[@]}"; do
  [ -f "$CACHE/models/$n/model.onnx" ] && continue
  if [ "$n" = yolo_like ]; then  # kiln's own detection model (make_detector_model.py)
    $PY "$HERE/make_detector_model.py" > "$OUT/make_detector_model.log" 2>&1 \
      || echo "[compare_ort] make_detector_model.py failed (see $OUT/make_detector_model.log)"
  else
    missing+=("$n")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  (IFS=,; $PY "$SHARED/make_models.py" --only "${missing[*]}") > "$OUT/make_models.log" 2>&1 \
    || echo "[compare_ort] make_models.py failed for ${missing[*]} (see $OUT/make_models.log)"
fi

run_kiln() {  # model-name pass
  local n="$1" pass="$2" m="$CACHE/models/$1/model.onnx" dir="$CACHE/models/$1/inputs" json="$OUT/kiln_${1}_${2}.json"
  local args=(benchmark "$m" -niter "$ITERS" --warmup "$WARMUP" --json "$json")
  # extra kiln arguments, e.g. KILN_ARGS="--disable-pass all-fusions" (word-split on purpose)
  # shellcheck disable=SC2206
  [ -n "${KILN_ARGS:-}" ] && args+=($KILN_ARGS)
  local f
  if [ -d "$dir" ]; then for f in "$dir"/*.npy; do [ -e "$f" ] && args+=(--input "$(basename "$f" .npy)=$f"); done; fi
  local via=property
  if ! "$KILN" "${args[@]}" -nthreads "$THREADS" > "$OUT/kiln_${n}_$pass.log" 2>&1; then
    if grep -q "unknown property 'inference_num_threads'" "$OUT/kiln_${n}_$pass.log"; then
      # This kiln does not take the thread property yet: its OpenMP reference kernels follow OMP_NUM_THREADS.
      via=OMP_NUM_THREADS
      OMP_NUM_THREADS="$THREADS" "$KILN" "${args[@]}" > "$OUT/kiln_${n}_$pass.log" 2>&1 || via=failed
    else
      via=failed
    fi
  fi
  if [ "$via" = failed ]; then
    echo "[pass $pass] kiln  $n t=$THREADS FAILED: $(grep -m1 'kiln: error' "$OUT/kiln_${n}_$pass.log" || tail -1 "$OUT/kiln_${n}_$pass.log")"
    $PY "$HERE/compare_ort.py" record --runtime kiln --model "$n" --pass "$pass" --threads "$THREADS" \
      --error "$(grep -m1 'kiln: error' "$OUT/kiln_${n}_$pass.log" || echo 'see log')" >> "$R"
    return
  fi
  $PY "$HERE/compare_ort.py" record --runtime kiln --model "$n" --pass "$pass" --threads "$THREADS" \
    --threads-via "$via" --json "$json" >> "$R"
  echo "[pass $pass] kiln  $n t=$THREADS median $($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["latency_ms"]["median"])' "$json") ms (threads via $via)"
}

run_ort() {  # model-name pass
  local n="$1" pass="$2" m="$CACHE/models/$1/model.onnx" dir="$CACHE/models/$1/inputs" line
  local args=("$m" --threads "$THREADS" --iters "$ITERS" --warmup "$WARMUP")
  [ -d "$dir" ] && args+=(--inputs "$dir")
  if line="$(node "$SHARED/peer_ort.js" "${args[@]}" 2>>"$OUT/ort_errors.log")" && [ -n "$line" ]; then
    $PY "$HERE/compare_ort.py" record --runtime ort --model "$n" --pass "$pass" --threads "$THREADS" --line "$line" >> "$R"
    echo "[pass $pass] ort   $n t=$THREADS $(echo "$line" | grep -o '"median_ms":[0-9.]*')"
  else
    echo "[pass $pass] ort   $n t=$THREADS FAILED (see $OUT/ort_errors.log)"
    $PY "$HERE/compare_ort.py" record --runtime ort --model "$n" --pass "$pass" --threads "$THREADS" --error "peer_ort.js failed" >> "$R"
  fi
}

for pass in $(seq 1 "$PASSES"); do
  for n in "${NAMES[@]}"; do
    if [ ! -f "$CACHE/models/$n/model.onnx" ]; then echo "[compare_ort] $n: no model, skipping"; continue; fi
    if [ $((pass % 2)) -eq 1 ]; then run_kiln "$n" "$pass"; run_ort "$n" "$pass"
    else run_ort "$n" "$pass"; run_kiln "$n" "$pass"; fi
  done
done

$PY "$HERE/compare_ort.py" table "$R" | tee "$OUT/summary.md"
echo "[compare_ort] done: $OUT/summary.md"
