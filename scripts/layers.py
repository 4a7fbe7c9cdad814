#!/usr/bin/env python3
"""The layer rule of doc/architecture.md, checked on the built objects.

Every source file belongs to the layer of its folder under src/. A file may
refer (call a function, use a global) only to files of its own layer or of
a lower one; files that refer to each other in a loop must share one
folder, and a loop holds at most MAX_LOOP files. References are read from the objects with nm: an undefined symbol
of one object defined by another is one reference. Prints the loops
(longest first) and every reference that breaks the rule; exits 1 on any.
usage: scripts/layers.py [BUILD_DIR]   (default: the current directory)"""

import collections
import glob
import os
import subprocess
import sys

# From the top: each layer may use itself and the layers after it.
LAYERS = ["sup", "worker", "console", "session", "net", "config", "auth", "proto", "base"]
# The most files one loop may hold (client, server, pool and auth_query
# call each other today).
MAX_LOOP = 4


def symbols(obj, *flags):
    out = subprocess.run(["nm", *flags, obj], capture_output=True, text=True, check=True).stdout
    return [line.split() for line in out.splitlines()]


def graph(build):
    objs = sorted(glob.glob(os.path.join(build, "src", "**", "*.o"), recursive=True))
    if not objs:
        sys.exit(f"layers: no objects under {build}/src (build first)")
    name = {o: os.path.relpath(o, build)[:-2] + ".c" for o in objs}
    defs = {}
    for o in objs:
        for p in symbols(o, "--defined-only", "-g"):
            if len(p) == 3 and p[1] in "TDBR":
                defs[p[2]] = name[o]
    refs = collections.defaultdict(set)
    for o in objs:
        for p in symbols(o, "-u"):
            target = defs.get(p[-1])
            if target and target != name[o]:
                refs[name[o]].add((target, p[-1]))
    return sorted(name.values()), refs


def layer(path):
    parts = path.split(os.sep)
    return parts[1] if len(parts) > 2 and parts[1] in LAYERS else None


def loops(files, edges):
    """Strongly connected components with more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for f in files:
        if f not in index:
            visit(f)
    return sorted(out, key=len, reverse=True)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "."
    files, refs = graph(build)
    bad = []
    for f in files:
        if layer(f) is None:
            bad.append(f"{f}: not in a layer's folder ({', '.join(LAYERS)})")
    for f in files:
        for target, sym in sorted(refs[f]):
            lf, lt = layer(f), layer(target)
            if lf and lt and LAYERS.index(lt) < LAYERS.index(lf):
                bad.append(f"{f} ({lf}) uses {sym} of {target} ({lt}): an upper layer")
    edges = {f: {t for t, _ in refs[f]} for f in files}
    for comp in loops(files, edges):
        folders = {os.path.dirname(f) for f in comp}
        print(f"loop of {len(comp)} files: {' '.join(comp)}")
        if len(folders) > 1:
            bad.append(f"a loop across folders: {' '.join(comp)}")
        if len(comp) > MAX_LOOP:
            bad.append(f"a loop of {len(comp)} files, more than {MAX_LOOP}: {' '.join(comp)}")
    for line in bad:
        print("layers: " + line)
    print(f"layers: {len(files)} files, {sum(len(r) for r in refs.values())} references, "
          f"{len(bad)} against the rule")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
