#!/usr/bin/env python3
"""tests/layers.py: the file-level call graph of one daemon, from its objects.

A daemon's files should form layers a reader can follow downwards: file A
calls file B when a function defined in A calls one defined in B, and no
chain of such calls may lead back to where it started.  This reads the
objects `make` built (nm: the global text symbols each defines, the
symbols each leaves undefined), prints every edge with the functions it
stands for, the layers from top to bottom, and every cycle.  Exits 1 if
there is a cycle, 2 if there are no objects.

usage: tests/layers.py [-v] [daemon [objdir]]   (default: policyd build/obj)
"""
import os
import subprocess
import sys


def nm(args, path):
    out = subprocess.run(["nm"] + args + [path], check=True,
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            yield parts[-2], parts[-1]


def graph(objs):
    """{file: {file: [symbols]}} and the files, from {file: object}."""
    defined = {}
    for f, o in objs.items():
        for kind, sym in nm(["-g", "--defined-only"], o):
            if kind == "T":
                defined[sym] = f
    edges = {f: {} for f in objs}
    for f, o in objs.items():
        for _, sym in nm(["-u"], o):
            g = defined.get(sym)
            if g is not None and g != f:
                edges[f].setdefault(g, []).append(sym)
    return edges


def cycles(edges):
    """Every elementary cycle, each once, starting at its least file."""
    found = []
    nodes = sorted(edges)

    def walk(start, node, path, seen):
        for nxt in sorted(edges[node]):
            if nxt == start:
                found.append(path + [start])
            elif nxt > start and nxt not in seen:
                seen.add(nxt)
                walk(start, nxt, path + [nxt], seen)
                seen.discard(nxt)

    for s in nodes:
        walk(s, s, [s], {s})
    return found


def layers(edges):
    """Files by depth: a file sits one above the deepest file it calls."""
    depth = {}

    def d(f, stack):
        if f in depth:
            return depth[f]
        if f in stack:
            return 0        # a cycle: reported separately
        stack.add(f)
        depth[f] = 1 + max((d(g, stack) for g in edges[f]), default=-1)
        stack.discard(f)
        return depth[f]

    for f in edges:
        d(f, set())
    top = max(depth.values(), default=0)
    return [sorted(f for f in depth if depth[f] == k)
            for k in range(top, -1, -1)]


def main(argv):
    verbose = "-v" in argv
    argv = [a for a in argv if a != "-v"]
    daemon = argv[0] if argv else "policyd"
    objdir = argv[1] if len(argv) > 1 else "build/obj"
    src = os.path.join(objdir, daemon)
    objs = {}
    if os.path.isdir(src):
        for name in sorted(os.listdir(src)):
            if name.endswith(".o"):
                objs[name[:-2] + ".c"] = os.path.join(src, name)
    if not objs:
        print(f"layers: no objects in {src}: run make first",
              file=sys.stderr)
        return 2
    edges = graph(objs)
    print(f"{daemon}: file-level call graph ({len(objs)} files)")
    for f in sorted(edges):
        for g in sorted(edges[f]):
            syms = sorted(set(edges[f][g]))
            more = ": " + ", ".join(syms) if verbose else \
                f" ({len(syms)} function{'s' if len(syms) != 1 else ''})"
            print(f"  {f} -> {g}{more}")
    found = cycles(edges)
    if found:
        print(f"{len(found)} cycle{'s' if len(found) != 1 else ''}:")
        for c in found:
            print("  " + " -> ".join(c))
        return 1
    print("layers, top to bottom:")
    for k, row in enumerate(layers(edges)):
        print(f"  {k + 1}. " + ", ".join(row))
    print("no cycles")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
