"""tests/compat/compare.py: set each tier's run of CPython's regression suite
beside the host's (the "COMPAT ..." lines of tests/compat/driver.py) and
list every test case that passes on the host and does not pass in the tier,
with the reason where the failure says it: seccomp (EPERM, or ENOSYS, from
a system call the profile refuses), a missing device or file under /dev,
/proc or /sys, a limit (EAGAIN, EMFILE, ENOSPC, EFBIG, MemoryError, a
killed or timed-out module), a network restriction, or "other".

A difference that tests/compat/known lists (tier, a test-id prefix,
glob:PATTERN matched against the whole id (fnmatch), or msg:TEXT found in
the failure's message, the reason in words) is
"explained"; the rest are "unexplained".  Closing line:
"compat: N passed, M failed" where N counts the host-passing cases that
pass in each tier and M the unexplained differences.  With --min PCT a tier
under PCT percent of the host's passing cases fails too.

    compare.py [--known FILE] [--min PCT] [--report FILE] HOST TIER=FILE...
"""
import argparse
import fnmatch
import re
import sys


RANK = {"skip": 0, "fail": 1, "error": 1, "pass": 2}


def load(path):
    cases, modules, done = {}, {}, None
    with open(path, errors="replace") as f:
        for line in f:
            if not line.startswith("COMPAT "):
                continue
            parts = line.rstrip("\n").split(" ", 4)
            if parts[1] == "case" and len(parts) >= 4:
                # One id can run twice (test_xml_etree_c reruns
                # test_xml_etree's classes on the C accelerator): it
                # passes if any run passed, else a failure outranks a
                # skip.
                new = (parts[2], parts[4] if len(parts) > 4 else "")
                old = cases.get(parts[3])
                if old is None or RANK[new[0]] > RANK[old[0]]:
                    cases[parts[3]] = new
            elif parts[1] == "module" and len(parts) >= 4:
                modules[parts[3]] = parts[2]
            elif parts[1] == "done":
                done = " ".join(parts[2:])
    return cases, modules, done


def module_of(cid):
    # test.test_os.FileTests.test_x -> test_os; test.test_asyncio.test_x... -> test_asyncio
    p = cid.split(".")
    return p[1] if len(p) > 1 and p[0] == "test" else p[0]


RULES = [
    ("seccomp", re.compile(r"Errno 1\]|Operation not permitted|EPERM|"
                           r"Errno 38\]|Function not implemented|ENOSYS|"
                           r"Bad system call|SIGSYS")),
    ("missing device", re.compile(r"/dev/|/proc/|/sys/|No such device|"
                                  r"Errno 19\]|ENODEV")),
    ("limit", re.compile(r"Errno 11\]|Resource temporarily unavailable|"
                         r"Errno 24\]|Too many open files|Errno 28\]|"
                         r"No space left|Errno 27\]|File too large|"
                         r"MemoryError|Cannot allocate memory|Errno 12\]|"
                         r"can't start new thread|RLIMIT")),
    ("network", re.compile(r"Errno 97\]|Address family not supported|"
                           r"Errno 99\]|Cannot assign requested address|"
                           r"Errno 101\]|Network is unreachable|"
                           r"Errno 93\]|Protocol not supported|"
                           r"Errno 94\]|Socket type not supported|"
                           r"Errno 22\].*socket")),
    ("read-only or ownership", re.compile(r"Errno 30\]|Read-only file system|"
                                          r"Errno 13\]|Permission denied")),
]


def reason_of(status, msg, modstatus):
    for name, rx in RULES:
        if rx.search(msg):
            return name
    if status == "missing":
        if modstatus in ("crashed", "timed_out", "interrupted"):
            return "limit (module %s)" % modstatus.replace("_", " ")
        return "module %s" % (modstatus or "did not report")
    return "other"


def load_known(path):
    known = []
    if not path:
        return known
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].rstrip()
            if not line:
                continue
            # Fields are tab-separated (a msg: text may hold spaces).
            parts = [p.strip() for p in line.split("\t") if p.strip()]
            if len(parts) < 3:
                parts = line.split(None, 2)
            if len(parts) < 3:
                sys.exit("%s:%d: want TIER TEST-PREFIX REASON" % (path, n))
            known.append((parts[0], parts[1], parts[2]))
    return known


def explained(known, tier, cid, msg=""):
    for t, prefix, why in known:
        if t != tier and t != "*":
            continue
        # msg:TEXT matches the failure's message, wherever the test is.
        if prefix.startswith("msg:"):
            if prefix[4:] in msg:
                return why
        elif prefix.startswith("glob:"):
            if fnmatch.fnmatchcase(cid, prefix[5:]):
                return why
        elif cid == prefix or cid.startswith(prefix + "."):
            return why
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--known")
    ap.add_argument("--min", type=float, default=0.0)
    ap.add_argument("--report")
    ap.add_argument("host")
    ap.add_argument("tiers", nargs="+")
    a = ap.parse_args()

    hcases, hmods, hdone = load(a.host)
    known = load_known(a.known)
    hpass = sorted(c for c, (s, _) in hcases.items() if s == "pass")
    out = []
    say = out.append
    say("host: %d cases, %d pass, %d skip, %d fail/error (%s)" % (
        len(hcases), len(hpass),
        sum(1 for s, _ in hcases.values() if s == "skip"),
        sum(1 for s, _ in hcases.values() if s in ("fail", "error")), hdone))
    total_pass = total_bad = 0
    low = []
    for spec in a.tiers:
        tier, path = spec.split("=", 1)
        tcases, tmods, tdone = load(path)
        # A run its wall clock cut short is compared on the modules it
        # finished, and says so.
        tpass = hpass
        if tdone is None:
            tpass = [c for c in hpass if module_of(c) in tmods]
            tdone = "cut short: %d of %d modules" % (
                len(tmods), len(hmods))
        diffs = []
        for cid in tpass:
            st, msg = tcases.get(cid, ("missing", ""))
            if st == "pass":
                continue
            diffs.append((cid, st, msg, reason_of(st, msg,
                                                  tmods.get(module_of(cid)))))
        ok = len(tpass) - len(diffs)
        pct = 100.0 * ok / len(tpass) if tpass else 100.0
        say("")
        say("%s: %d of %d host-passing cases pass (%.2f %%); %d differ (%s)"
            % (tier, ok, len(tpass), pct, len(diffs), tdone))
        if pct < a.min:
            low.append(tier)
        bymod = {}
        for d in diffs:
            bymod.setdefault(module_of(d[0]), []).append(d)
        unexplained = 0
        for mod in sorted(bymod):
            ds = bymod[mod]
            ms = tmods.get(mod, "?")
            say("  %s (%d; module %s)" % (mod, len(ds), ms))
            shown = 0
            for cid, st, msg, why in ds:
                k = explained(known, tier, cid, msg)
                if k is None:
                    unexplained += 1
                # A module that failed to load loses every case: the
                # first few say so, the count says the rest.
                shown += 1
                if shown > 12:
                    continue
                tag = "known: " + k if k else "UNEXPLAINED"
                say("    %-5s %s [%s] %s -- %s" % (st, cid, why, msg[:160],
                                                   tag))
            if shown > 12:
                say("    ... and %d more in %s" % (shown - 12, mod))
        for t, prefix, why in known:
            if prefix.startswith("msg:"):
                continue
            if prefix.startswith("glob:"):
                hit = lambda c, g=prefix[5:]: fnmatch.fnmatchcase(c, g)
            else:
                hit = lambda c, p=prefix: c == p or c.startswith(p + ".")
            if t in (tier, "*") and not any(hit(d[0]) for d in diffs) \
                    and any(hit(c) for c in tpass):
                say("  note: known difference %s now passes: %s" % (
                    prefix, why))
        total_pass += ok
        total_bad += unexplained
    text = "\n".join(out)
    print(text)
    if a.report:
        with open(a.report, "w") as f:
            f.write(text + "\n")
    if low:
        print("compat: under %.1f %% in %s" % (a.min, ", ".join(low)))
        total_bad += len(low)
    print("compat: %d passed, %d failed" % (total_pass, total_bad))
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
