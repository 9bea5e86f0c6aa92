#!/usr/bin/env python3
"""Checks that no source file of src/ includes a header of a layer above its own.

The layers and what each links come from the build (CMakeLists.txt writes them to
<build>/layers/deps.txt: "layer: linked layers | public headers"); a layer may include its own
headers, those of the layers it links directly or indirectly, and the public headers
(include/kiln/) those layers own. Prints every violation with file and line; exit status 1 if
there is any.

Usage: check_layers.py --deps BUILD/layers/deps.txt [--src SRC_DIR]
"""
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'\s*#\s*include\s*[<"]([^">]+)[">]')


def read_deps(path):
    deps, headers = {}, {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, rest = line.split(":", 1)
            linked, _, public = rest.partition("|")
            deps[name] = linked.split()
            for h in public.split():
                headers["kiln/" + h] = name
    return deps, headers


def reachable(deps, layer):
    seen, todo = set(), [layer]
    while todo:
        l = todo.pop()
        if l in seen:
            continue
        seen.add(l)
        todo.extend(deps.get(l, []))
    return seen


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--deps", required=True)
    ap.add_argument("--src", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
    args = ap.parse_args()
    deps, headers = read_deps(args.deps)
    bad, files = [], 0
    for root, _, names in os.walk(args.src):
        for n in sorted(names):
            if not n.endswith((".cpp", ".hpp", ".h")):
                continue
            path = os.path.join(root, n)
            rel = os.path.relpath(path, args.src)
            layer = rel.split(os.sep)[0]
            if layer not in deps:
                bad.append(f"{rel}: the folder src/{layer} is no layer of the build (CMakeLists.txt kiln_layer)")
                continue
            files += 1
            allowed = reachable(deps, layer)
            with open(path, errors="replace") as f:
                for lineno, text in enumerate(f, 1):
                    m = INCLUDE.match(text)
                    if not m:
                        continue
                    inc = m.group(1)
                    owner = headers.get(inc) if inc.startswith("kiln/") else inc.split("/")[0]
                    if inc.startswith("kiln/") and owner is None:
                        bad.append(f"{rel}:{lineno}: <{inc}> is no public header of any layer")
                    elif owner in deps and owner not in allowed:
                        bad.append(f"{rel}:{lineno}: layer '{layer}' includes {inc} of layer '{owner}' above it")
    for b in bad:
        print(b)
    print(f"check_layers: {files} files of {len(deps)} layers, {len(bad)} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
