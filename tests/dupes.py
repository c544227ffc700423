#!/usr/bin/env python3
"""tests/dupes.py: no identical run of six or more lines is shared between
two daemon folders (issue 12 item 3): what two daemons both need lives
once, in common/.

    tests/dupes.py [-n LINES] [-l] [-a] [TOP]     (default 6, the repository)

A run is LINES consecutive lines of C (.c and .h) that are the same to the
letter in two files of different daemon folders, once each line is stripped
of its indentation and blank lines and comments are passed over.  Lines
that carry nothing of their own -- only braces, punctuation, "break;",
"return 0;", "default:", a lone "else" and the like -- do not start or
count towards a run, so a shared closing of two functions is not code
written twice.  Prints each shared run once (-l: every place), and ends
with "dupes: N passed, M failed", one check a daemon folder.  -a lists
the folders not yet held to it as well (FOLDERS below).
"""
import os
import re
import sys

# The folders held to it; LATER ones are printed with -a only.
FOLDERS = ["approvald", "brokerd", "egressd", "gated", "launchd-sbx",
           "policyd", "sbxctl"]
LATER = []

TRIVIAL = re.compile(r"^(?:[{}()\[\];,]*|break;|continue;|return;|"
                     r"return (?:0|-1|1|NULL|ok|rc|r|n);|default:|else|"
                     r"else \{|\} else \{|\} else|do \{|\}\);|#endif|"
                     r"goto [a-z_]+;|[a-z_]+:|va_end\(ap\);|#include .*)$")


def lines_of(path):
    """[(lineno, text)] of code lines, comments and blanks passed over."""
    out = []
    in_comment = False
    with open(path, errors="replace") as f:
        for no, raw in enumerate(f, 1):
            s = raw.strip()
            if in_comment:
                if "*/" in s:
                    in_comment = False
                    s = s.split("*/", 1)[1].strip()
                else:
                    continue
            while "/*" in s:
                before, after = s.split("/*", 1)
                if "*/" in after:
                    s = (before + after.split("*/", 1)[1]).strip()
                else:
                    s = before.strip()
                    in_comment = True
            if s.startswith("//"):
                continue
            if s == "":
                continue
            out.append((no, s))
    return out


def main():
    args = sys.argv[1:]
    n = 6
    every = "-l" in args
    folders = FOLDERS + (LATER if "-a" in args else [])
    args = [a for a in args if a not in ("-l", "-a")]
    if "-n" in args:
        i = args.index("-n")
        n = int(args[i + 1])
        del args[i:i + 2]
    top = args[0] if args else os.path.join(os.path.dirname(
        os.path.abspath(__file__)), "..")
    windows = {}
    for d in folders:
        base = os.path.join(top, d)
        for name in sorted(os.listdir(base)):
            if not name.endswith((".c", ".h")):
                continue
            rel = os.path.join(d, name)
            code = lines_of(os.path.join(base, name))
            for i in range(len(code) - n + 1):
                win = code[i:i + n]
                if TRIVIAL.match(win[0][1]):
                    continue
                if sum(1 for _, t in win if not TRIVIAL.match(t)) < n - 1:
                    continue
                key = "\n".join(t for _, t in win)
                windows.setdefault(key, []).append(
                    (d, rel, win[0][0], win[-1][0]))
    bad = {d: [] for d in folders}
    seen = set()
    for key, places in windows.items():
        if len({p[0] for p in places}) < 2:
            continue
        # One report per pair of starting places' files and lines.
        ident = tuple(sorted((p[1], p[2]) for p in places))
        if ident in seen:
            continue
        seen.add(ident)
        for p in places:
            bad[p[0]].append((places, key))
    passed = failed = 0
    shown = set()
    for d in folders:
        if not bad[d]:
            passed += 1
            continue
        failed += 1
        # Merge overlapping windows of one pair of files into runs.
        runs = {}
        for places, _ in bad[d]:
            mine = [p for p in places if p[0] == d]
            other = [p for p in places if p[0] != d]
            for m in mine:
                for o in other:
                    runs.setdefault((m[1], o[1]), []).append(
                        (m[2], m[3], o[2], o[3]))
        print(f"dupes: {d}: FAIL: {len(runs)} file pair(s) share runs of "
              f"{n}+ identical lines")
        for (a, b), spans in sorted(runs.items()):
            spans.sort()
            merged = []
            for s in spans:
                if merged and s[0] <= merged[-1][1] + 1:
                    m = merged[-1]
                    merged[-1] = (m[0], max(m[1], s[1]), min(m[2], s[2]),
                                  max(m[3], s[3]))
                else:
                    merged.append(s)
            pair = tuple(sorted((a, b)))
            if pair in shown and not every:
                continue
            shown.add(pair)
            for m in merged:
                print(f"    {a}:{m[0]}-{m[1]} ~ {b}:{m[2]}-{m[3]}")
    print(f"dupes: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
