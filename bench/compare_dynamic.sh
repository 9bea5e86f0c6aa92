#!/usr/bin/env bash
# kiln vs ONNX Runtime on streams of changing input shapes (make_dynamic_models.py models):
# for each stream, REPEAT rounds of [kiln, ORT] (order alternating), each a fresh process
# running every shape of the stream PASSES times. Prints, per round, the first pass (every
# shape new), the mean of the later passes, peak resident memory, and the kiln / ORT ratios;
# then, per stream, the median of each ratio over the rounds and its range. A stream with an
# attention mask gives kiln ORT's own inputs (one untimed pass dumps them), so that both see the
# same padded masks.
#
# env: STREAMS="crnn bert bert-batch mnv2-batch" (also mnv3s-hw, mnv3s-hw60, effb0-hw, regnet-hw,
#      resnext-hw, deeplab-hw, densenet-hw, googlenet-hw, squeezenet-hw; the list: dynamic_stream_ort.js)  THREADS=2  PASSES=3 (>= 2)  REPEAT=2
#      KILN=build/kiln
#      KILN_ARGS (default: --property inference_precision=f32; the plan cache keeps its default, 64)
#      KILN_BENCH_CACHE (default ~/.cache/kiln-bench)
set -euo pipefail
NAME=compare_dynamic
# shellcheck source=compare_common.sh
source "$(cd "$(dirname "$0")" && pwd)/compare_common.sh"
STREAMS="${STREAMS:-crnn bert bert-batch mnv2-batch}"
ORT_JS="$HERE/dynamic_stream_ort.js"
[ "$PASSES" -ge 2 ] || { echo "compare_dynamic: PASSES=$PASSES, at least 2 (the first pass, then later ones)" >&2; exit 2; }

# A stream's model and shapes: dynamic_stream_ort.js holds the list (--model-of, --gen).
printf '| stream | round | kiln first pass ms | ORT first pass ms | ratio | kiln later pass ms | ORT later pass ms | ratio | kiln peak MiB | ORT peak MiB | ratio |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|\n'
for stream in $STREAMS; do
  name="$(node "$ORT_JS" --model-of "$stream")"
  model="$CACHE/models/$name/model.onnx"
  [ -f "$model" ] || /usr/bin/python3 "$HERE/make_dynamic_models.py" --only "$name" > "$TMP/make.log"
  spec="$(node "$ORT_JS" --gen "$stream")"
  # shapes per input: "]," only separates inputs
  groups=$(node -e 'const s=process.argv[1].split("],")[0]; console.log((s.match(/\[/g)||[]).length)' "$spec")
  # A stream with an attention mask: kiln runs ORT's very inputs (written by one untimed pass of
  # dynamic_stream_ort.js, each input's files in a directory of its own in group order), whose
  # masks pad the last quarter of every sequence as ORT's generator does; kiln's own random
  # inputs attend to every key. Other streams: -data_shape, random inputs (their values do not
  # change the work).
  kiln_inputs=(-data_shape "$spec")
  if [[ "$spec" == *mask* ]]; then
    rm -rf "$TMP/dump" "$TMP/in"
    node "$ORT_JS" "$model" --shapes "$spec" --threads "$THREADS" --passes 1 --dump "$TMP/dump" > "$TMP/dump.log" 2>&1
    kiln_inputs=()
    for input in $(node -e 'for (const p of process.argv[1].split("],")) console.log(p.split("[")[0])' "$spec"); do
      mkdir -p "$TMP/in/$input"
      for ((g = 0; g < groups; g++)); do
        ln -s "$TMP/dump/${g}_in_${input}.npy" "$TMP/in/$input/$(printf %05d "$g").npy"
      done
      kiln_inputs+=(-i "$input=$TMP/in/$input")
    done
  fi
  for round in $(seq 1 "$REPEAT"); do
    run_kiln() {
      # shellcheck disable=SC2086
      "$KILN" benchmark "$model" "${kiln_inputs[@]}" -niter $((groups * PASSES)) -nthreads "$THREADS" $KILN_ARGS \
        --json "$TMP/kiln.json" > "$TMP/kiln.log" 2>&1
    }
    run_ort() { node "$ORT_JS" "$model" --shapes "$spec" --threads "$THREADS" --passes "$PASSES" > "$TMP/ort.log" 2>&1; }
    if [ $((round % 2)) -eq 1 ]; then run_kiln; run_ort; else run_ort; run_kiln; fi
    /usr/bin/python3 "$HERE/stream_ratio.py" "$TMP/kiln.json" "$TMP/ort.log" "$stream" "$round" "$PASSES" | tee -a "$TMP/rows.md"
  done
done
/usr/bin/python3 "$HERE/stream_ratio.py" --summary "$TMP/rows.md"
