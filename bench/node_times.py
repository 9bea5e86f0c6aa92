#!/usr/bin/env python3
"""kiln's and ONNX Runtime's time per node of the same model, side by side.

usage: node_times.py KILN_TRACE.json ORT_PROFILE.json [--skip N] [--top N]

KILN_TRACE.json: `kiln benchmark MODEL --trace FILE` (every node of every timed request);
ORT_PROFILE.json: `node bench/ort_node_times.js MODEL --out FILE`. Per node, the median of its
times (the first N requests of each skipped, default 5). Nodes are matched by the ONNX name they
come from: kiln's runtime node keeps its ONNX node's name, with a suffix such as `_quant_12`
where a pass made it; ORT's adds `_token_12` and the like. A node one runtime fused into another
shows 0 on that side, so compare sums over a block, not single rows. Nothing here is a timed
assertion: the machine's noise applies (run both more than once, interleaved).
"""
import argparse
import collections
import json
import re
import sys

SUFFIX = re.compile(r'(_quant_\d+|_token_\d+|/subgraph|_output_0_\w+)$')


def median(xs):
    s = sorted(xs)
    n = len(s)
    return 0.0 if n == 0 else (s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2)


def key(name):
    return SUFFIX.sub('', name)


def kiln_times(path, skip):
    with open(path) as f:
        t = json.load(f)
    events = t['traceEvents'] if isinstance(t, dict) else t
    per, kinds = collections.defaultdict(list), {}
    for e in events:
        if e.get('ph') == 'X':
            per[e['name']].append(e['dur'])
            kinds[e['name']] = e.get('args', {}).get('exec_type', '')
    return {n: (median(v[skip:] or v) / 1000.0, kinds[n]) for n, v in per.items()}


def ort_times(path, skip):
    with open(path) as f:
        events = json.load(f)
    per, kinds = collections.defaultdict(list), {}
    for e in events:
        if e.get('cat') == 'Node' and e.get('name', '').endswith('_kernel_time'):
            n = e['name'][:-len('_kernel_time')]
            per[n].append(e['dur'])
            kinds[n] = e.get('args', {}).get('op_name', '')
    return {n: (median(v[skip:] or v) / 1000.0, kinds[n]) for n, v in per.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('kiln_trace')
    ap.add_argument('ort_profile')
    ap.add_argument('--skip', type=int, default=5, help='requests of each node not counted (warm-up)')
    ap.add_argument('--top', type=int, default=0, help='print only the N rows of most time (either side)')
    a = ap.parse_args()
    k, o = kiln_times(a.kiln_trace, a.skip), ort_times(a.ort_profile, a.skip)
    if not k or not o:
        sys.exit('no node times in ' + (a.kiln_trace if not k else a.ort_profile))
    rows = collections.OrderedDict()
    for name, (ms, kind) in k.items():
        r = rows.setdefault(key(name), [0.0, 0.0, '', ''])
        r[0] += ms
        r[2] = r[2] or kind
    for name, (ms, kind) in o.items():
        r = rows.setdefault(key(name), [0.0, 0.0, '', ''])
        r[1] += ms
        r[3] = r[3] or kind
    items = list(rows.items())
    if a.top:
        items = sorted(items, key=lambda kv: -max(kv[1][0], kv[1][1]))[:a.top]
    print(f'{"node":50s} {"kiln ms":>8s} {"ORT ms":>8s} {"ratio":>6s}  kiln kernel / ORT op')
    for name, (km, om, kk, ok) in items:
        ratio = f'{km / om:6.2f}' if om > 0 and km > 0 else '     -'
        print(f'{name[:50]:50s} {km:8.3f} {om:8.3f} {ratio}  {kk[:28]} / {ok}')
    tk, to = sum(r[0] for r in rows.values()), sum(r[1] for r in rows.values())
    print(f'{"sum of node medians":50s} {tk:8.3f} {to:8.3f} {tk / to:6.2f}')


if __name__ == '__main__':
    main()
