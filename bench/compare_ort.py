#!/usr/bin/python3
"""Helper of compare_ort.sh (run with /usr/bin/python3).

  compare_ort.py record --runtime kiln|ort --model NAME --pass N --threads T
                        (--json KILN_JSON [--threads-via HOW] | --line ORT_JSON_LINE | --error MSG)
      prints one JSON line for results.jsonl: runtime, model, pass, threads, median_ms, min_ms, p90_ms,
      max_ms, mean_ms, first_ms, compile_ms / load_ms, peak_rss_mib (kiln), error (if it failed).
  compare_ort.py table RESULTS.jsonl
      prints a markdown table: one row per model and pass, plus the median over passes per model.
"""
import argparse
import json
import statistics
import sys


def record(a):
    r = {"runtime": a.runtime, "model": a.model, "pass": a.pass_, "threads": a.threads}
    if a.error is not None:
        r["error"] = a.error
    elif a.json:
        with open(a.json) as f:
            k = json.load(f)
        lat = k["latency_ms"]
        r.update(median_ms=lat["median"], min_ms=lat["min"], p90_ms=lat["p90"], max_ms=lat["max"],
                 mean_ms=lat["mean"], first_ms=k["first_inference_ms"], compile_ms=k["compile_ms"],
                 iters=k["iterations"], warmup=k.get("warmup"), peak_rss_mib=k["peak_rss_mib"],
                 threads_via=a.threads_via)
    elif a.line:
        o = json.loads(a.line)
        r.update({key: o[key] for key in ("median_ms", "min_ms", "p90_ms", "max_ms", "mean_ms", "first_ms",
                                          "load_ms", "iters", "warmup", "ort_version") if key in o})
    else:
        sys.exit("record: give --json, --line or --error")
    print(json.dumps(r))


def fmt(v, digits=2):
    return "—" if v is None else f"{v:.{digits}f}"


def table(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    by = {}  # (model, threads) -> pass -> runtime -> record
    for r in rows:
        by.setdefault((r["model"], r["threads"]), {}).setdefault(r["pass"], {})[r["runtime"]] = r
    out = ["| model | threads | pass | kiln median ms | ORT median ms | kiln/ORT | kiln min ms | ORT min ms | kiln peak RSS MiB |",
           "|---|---|---|---|---|---|---|---|---|"]
    notes = set()

    def val(r, key):
        return None if r is None or "error" in r else r.get(key)

    for (model, threads), passes in by.items():
        meds_k, meds_o, ratios, mins_k, mins_o, rss = [], [], [], [], [], []
        for p in sorted(passes):
            k, o = passes[p].get("kiln"), passes[p].get("ort")
            km, om = val(k, "median_ms"), val(o, "median_ms")
            ratio = km / om if km is not None and om else None
            for lst, v in ((meds_k, km), (meds_o, om), (ratios, ratio), (mins_k, val(k, "min_ms")),
                           (mins_o, val(o, "min_ms")), (rss, val(k, "peak_rss_mib"))):
                if v is not None:
                    lst.append(v)
            if k and k.get("threads_via") == "OMP_NUM_THREADS":
                notes.add("kiln did not accept `-t` (property `inference_num_threads`); its threads were set "
                          "with OMP_NUM_THREADS instead.")
            for rt, r in (("kiln", k), ("ORT", o)):
                if r is not None and "error" in r:
                    notes.add(f"{rt} failed on {model} (pass {p}): {r['error']}")
            out.append(f"| {model} | {threads} | {p} | {fmt(km)} | {fmt(om)} | {fmt(ratio)} | "
                       f"{fmt(val(k, 'min_ms'))} | {fmt(val(o, 'min_ms'))} | {fmt(val(k, 'peak_rss_mib'), 1)} |")
        med = lambda xs: statistics.median(xs) if xs else None
        out.append(f"| **{model}** | {threads} | median of {len(passes)} | **{fmt(med(meds_k))}** | "
                   f"**{fmt(med(meds_o))}** | **{fmt(med(ratios))}** | {fmt(med(mins_k))} | {fmt(med(mins_o))} | "
                   f"{fmt(med(rss), 1)} |")
    print("\n".join(out))
    if notes:
        print()
        for n in sorted(notes):
            print(f"- {n}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("--runtime", required=True, choices=["kiln", "ort"])
    rec.add_argument("--model", required=True)
    rec.add_argument("--pass", dest="pass_", type=int, required=True)
    rec.add_argument("--threads", type=int, required=True)
    rec.add_argument("--threads-via", default="property")
    rec.add_argument("--json")
    rec.add_argument("--line")
    rec.add_argument("--error")
    tab = sub.add_parser("table")
    tab.add_argument("results")
    a = ap.parse_args()
    if a.cmd == "record":
        record(a)
    else:
        table(a.results)


if __name__ == "__main__":
    main()
