#!/usr/bin/env python3
"""tests/layers.py: each daemon's files form layers a reader follows
downwards (issue 12 item 2): no file calls, directly or round a longer
circle, a file that calls it back.

    tests/layers.py [-v] [-a] [OBJDIR]      (default build/obj)

The call graph is read off the objects the build made, not off the
source text: for each daemon folder, file A calls file B when a symbol A
leaves undefined (nm -u) is a function B defines (nm --defined-only, T).
Every strongly connected set of two or more files is a circle and fails
the check, named with the calls that close it.  -v prints each daemon's
layers, top first (a file's layer is one more than the deepest file it
calls).  Ends with "layers: N passed, M failed" (one per daemon).
"""
import os
import subprocess
import sys

# The daemons held to it.  Not yet: egressd (proxy.c and proxy_tls.c call
# each other: the TLS layer hands a finished or refused connection back);
# -a shows it too.
DAEMONS = ["policyd", "launchd-sbx", "gated", "brokerd", "approvald", "sbxctl"]
LATER = ["egressd"]


def symbols(obj):
    """(defined text symbols, undefined symbols) of one object file."""
    out = subprocess.run(["nm", obj], capture_output=True, text=True,
                         check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] in ("T", "D", "B", "R"):
            defined.add(parts[2])
    return defined, undefined


def graph(objdir):
    objs = sorted(f for f in os.listdir(objdir) if f.endswith(".o"))
    defs, undefs = {}, {}
    for o in objs:
        name = o[:-2] + ".c"
        defs[name], undefs[name] = symbols(os.path.join(objdir, o))
    owner = {}
    for f, ds in defs.items():
        for s in ds:
            owner[s] = f
    edges = {f: {} for f in defs}
    for f, us in undefs.items():
        for s in sorted(us):
            g = owner.get(s)
            if g is not None and g != f:
                edges[f].setdefault(g, []).append(s)
    return edges


def sccs(edges):
    """Tarjan's strongly connected components."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
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
            out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def layers(edges):
    depth = {}

    def d(v):
        if v not in depth:
            depth[v] = 0
            depth[v] = 1 + max((d(w) for w in edges[v]), default=-1)
        return depth[v]

    for v in edges:
        d(v)
    by = {}
    for v, n in depth.items():
        by.setdefault(n, []).append(v)
    return [sorted(by[n]) for n in sorted(by, reverse=True)]


def main():
    args = sys.argv[1:]
    verbose = "-v" in args
    daemons = DAEMONS + (LATER if "-a" in args else [])
    args = [a for a in args if a not in ("-v", "-a")]
    objroot = args[0] if args else "build/obj"
    passed = failed = 0
    for dmn in daemons:
        objdir = os.path.join(objroot, dmn)
        if not os.path.isdir(objdir):
            print(f"layers: {dmn}: no objects in {objdir} (build first)")
            failed += 1
            continue
        edges = graph(objdir)
        circles = [c for c in sccs(edges) if len(c) > 1]
        if circles:
            failed += 1
            for c in circles:
                print(f"layers: {dmn}: FAIL: a circle of {len(c)} files:")
                for f in c:
                    for g, syms in sorted(edges[f].items()):
                        if g in c:
                            shown = ", ".join(syms[:4])
                            more = f" and {len(syms) - 4} more" \
                                if len(syms) > 4 else ""
                            print(f"    {f} -> {g}: {shown}{more}")
            continue
        passed += 1
        if verbose:
            print(f"layers: {dmn}: no circle; layers, top first:")
            for i, layer in enumerate(layers(edges)):
                print(f"    {i}: {' '.join(layer)}")
    print(f"layers: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
