#!/usr/bin/env bash
# kiln vs ONNX Runtime on detectors whose shapes depend on the data (bench/make_detection_models.py:
# SSDlite and Faster R-CNN with their NMS / RoIAlign post-processing), over a directory of
# images: for each model, REPEAT rounds of [kiln, ORT] (order alternating), each a fresh process
# running every image PASSES times. Prints, per round, the first pass (every image new: kiln
# plans the part after each cut for the counts that image gives), the mean of the later passes,
# peak resident memory, and the kiln / ORT ratios; then, per model, the median of each ratio
# over the rounds and its range.
#
# env: MODELS="ssdlite frcnn"  THREADS=2  PASSES=3  REPEAT=2  KILN=build/kiln
#      KILN_ARGS (default: --property inference_precision=f32)  KILN_BENCH_CACHE (default ~/.cache/kiln-bench)
set -euo pipefail
NAME=compare_detection
# shellcheck source=compare_common.sh
source "$(cd "$(dirname "$0")" && pwd)/compare_common.sh"
MODELS="${MODELS:-ssdlite frcnn}"

printf '| model | round | kiln first pass ms | ORT first pass ms | ratio | kiln later pass ms | ORT later pass ms | ratio | kiln peak MiB | ORT peak MiB | ratio |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|\n'
for m in $MODELS; do
  dir="$CACHE/models/$m"
  [ -f "$dir/model.onnx" ] || /usr/bin/python3 "$HERE/make_detection_models.py" --only "$m" > "$TMP/make.log"
  n=$(find "$dir/images" -name '*.npy' | wc -l)
  for round in $(seq 1 "$REPEAT"); do
    run_kiln() {
      # shellcheck disable=SC2086
      "$KILN" benchmark "$dir/model.onnx" -i "image=$dir/images" -niter $((n * PASSES)) -nthreads "$THREADS" $KILN_ARGS \
        --json "$TMP/kiln.json" > "$TMP/kiln.log" 2>&1 || { cat "$TMP/kiln.log" >&2; exit 1; }
    }
    run_ort() {
      node "$HERE/image_stream_ort.js" "$dir/model.onnx" --input "image=$dir/images" --threads "$THREADS" \
        --passes "$PASSES" > "$TMP/ort.log" 2> "$TMP/ort.err" || { cat "$TMP/ort.err" >&2; exit 1; }
    }
    if [ $((round % 2)) -eq 1 ]; then run_kiln; run_ort; else run_ort; run_kiln; fi
    /usr/bin/python3 "$HERE/stream_ratio.py" "$TMP/kiln.json" "$TMP/ort.log" "$m" "$round" "$PASSES" | tee -a "$TMP/rows.md"
  done
done
/usr/bin/python3 "$HERE/stream_ratio.py" --summary "$TMP/rows.md"
