#!/usr/bin/env python3
"""One table row of compare_dynamic.sh / compare_detection.sh: kiln's `benchmark --json` of a
stream (-data_shape or -i NAME=DIR) against the JSON lines of the ORT script (one per pass):
the first pass (every shape or file new), the mean of the later passes and peak resident
memory, with the kiln / ORT ratios.

usage: stream_ratio.py KILN_JSON ORT_LOG LABEL ROUND PASSES
       stream_ratio.py --summary ROWS   (ROWS: the rows printed so far) per label, the median of
                                        its rounds' ratios: the machine's noise moves single rounds
"""
import json
import statistics
import sys


def summary(rows_file):
    ratios = {}  # label -> [first, later, peak] lists
    for line in open(rows_file):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 11 or not cells[1].isdigit():
            continue
        r = ratios.setdefault(cells[0], [[], [], []])
        for i, col in enumerate((4, 7, 10)):
            r[i].append(float(cells[col]))
    print()
    print("| stream | rounds | first pass kiln / ORT (median) | later passes (median) | peak memory (median) |")
    print("|---|---|---|---|---|")
    for label, (first, later, peak) in ratios.items():
        med = [f"{statistics.median(v):.2f}" for v in (first, later, peak)]
        print(f"| {label} | {len(first)} | {med[0]} ({min(first):.2f}-{max(first):.2f}) | "
              f"{med[1]} ({min(later):.2f}-{max(later):.2f}) | {med[2]} |")


if sys.argv[1:2] == ["--summary"]:
    summary(sys.argv[2])
    sys.exit(0)

kiln_json, ort_log, label, rnd, passes = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
kj = json.load(open(kiln_json))
k = kj["data_shape"]
ort = [json.loads(line) for line in open(ort_log) if line.startswith("{")]
k_first = k["first_seen_ms"]["total"]
k_later = k["repeated_ms"]["total"] / (passes - 1) if passes > 1 else float("nan")
o_first = ort[0]["total_ms"]
o_later = sum(p["total_ms"] for p in ort[1:]) / max(1, len(ort) - 1)
k_peak = kj["peak_rss_mib"]
o_peak = max(p["peak_rss_mib"] for p in ort)
print(f"| {label} | {rnd} | {k_first:.0f} | {o_first:.0f} | {k_first / o_first:.2f} | {k_later:.0f} | "
      f"{o_later:.0f} | {k_later / o_later:.2f} | {k_peak:.0f} | {o_peak:.0f} | {k_peak / o_peak:.2f} |")
