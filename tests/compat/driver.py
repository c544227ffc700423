"""tests/compat/driver.py: CPython's regression suite, run once where it
stands (a sandbox tier, or the host as the sandbox user), reported as one
line per test case so that tests/compat/compare.py can set the tiers side by
side.  It runs ``python3 -m test`` with no resources enabled (so no network,
no large files, no audio, no GUI), in chunks of modules so that a run cut
short by its wall clock still reports every chunk it finished, and prints:

    COMPAT case <status> <id> <message>
    COMPAT module <status> <name>
    COMPAT done <seconds> rc=<regrtest's worst exit status>

status is pass, fail, error or skip for a case and regrtest's own word for a
module (passed, failed, env_changed, skipped, resource_denied, crashed,
timed_out...).  message is the last line of the failure or error text (the
exception and its message), which is what compare.py reads a reason from.
regrtest's own output goes to $TMPDIR/compat/regrtest.log, and to stderr
at the end less the lines of modules that passed.

    python3 driver.py [--chunk N] [regrtest options] [TEST...]
"""
import os
import random
import subprocess
import sys
import time
import xml.etree.ElementTree as ET


def one_line(text):
    lines = [l.strip() for l in (text or "").splitlines() if l.strip()]
    return " ".join((lines[-1] if lines else "").split())[:300]


def main(argv):
    chunk = 25
    if len(argv) >= 2 and argv[0] == "--chunk":
        chunk = int(argv[1])
        argv = argv[2:]
    tmp = os.environ.get("TMPDIR", "/tmp")
    work = os.path.join(tmp, "compat")
    os.makedirs(work, exist_ok=True)
    log = os.path.join(work, "regrtest.log")
    start = time.monotonic()
    base = [sys.executable, "-m", "test", "--tempdir", work]
    # Options apart from the modules: regrtest applies -x and the default
    # selection, and --list-tests says what that selection is.
    opts = [a for a in argv if a.startswith("-") or a.replace(".", "")
            .isdigit()]
    listed = subprocess.run(base + ["--list-tests"] + argv,
                            capture_output=True, text=True, cwd=work)
    mods = [l.strip() for l in listed.stdout.splitlines()
            if l.strip().startswith("test")]
    # A fixed shuffle: a run its wall clock cuts short has covered a
    # sample of the suite, not its first letters.
    random.Random(11).shuffle(mods)
    if not mods:
        print("COMPAT nolist %s" % one_line(listed.stderr), flush=True)
        return 1
    # -x named the modules to leave out; --list-tests already did.
    runopts = [a for a in opts if a != "-x"]
    worst = 0
    with open(log, "w") as out:
        for i in range(0, len(mods), chunk):
            part = mods[i:i + chunk]
            xml = os.path.join(work, "junit-%d.xml" % i)
            out.write("==== chunk %d: %s\n" % (i, " ".join(part)))
            out.flush()
            rc = subprocess.call(base + ["--junit-xml", xml] + runopts +
                                 part, stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, cwd=work)
            worst = max(worst, rc)
            out.flush()
            with open(log, errors="replace") as f:
                text = f.read()
            text = text[text.rindex("==== chunk %d:" % i):]
            emit_cases(xml)
            emit_modules(text)
    elapsed = time.monotonic() - start
    print("COMPAT done %d rc=%d" % (elapsed, worst), flush=True)
    # The log, less the modules that passed, for whoever reads why.
    with open(log, errors="replace") as f:
        for line in f:
            if not line.rstrip().endswith(" passed"):
                sys.stderr.write(line)
    return 0


def emit_cases(xml):
    try:
        root = ET.parse(xml).getroot()
    except (OSError, ET.ParseError) as e:
        print("COMPAT nojunit %s" % one_line(str(e)), flush=True)
        return
    out = sys.stdout
    for case in root.iter("testcase"):
        cid = case.get("name", "?")
        if not cid.startswith("test.") and case.get("classname"):
            cid = case.get("classname") + "." + cid
        status, msg = "pass", ""
        for child in case:
            if child.tag in ("failure", "error"):
                status = "fail" if child.tag == "failure" else "error"
                msg = one_line(child.text) or one_line(child.get("message"))
                break
            if child.tag == "skipped":
                status = "skip"
                msg = one_line(child.get("message") or child.text)
        out.write("COMPAT case %s %s %s\n" % (status, cid, msg))
    out.flush()


# regrtest's per-module progress lines: "[ 12/430] test_os passed",
# "[ 13/430/1] test_x failed (2 errors)", "test_y crashed (Exit code -9)",
# "test_z timed out".
WORDS = ("failed", "skipped", "crashed", "passed", "interrupted",
         "resource denied", "timed out", "env changed", "run no tests")


def emit_modules(text):
    seen = {}
    for line in text.splitlines():
        parts = line.split("] ", 1)
        if len(parts) != 2 or "/" not in parts[0]:
            continue
        rest = parts[1].strip()
        if not rest.startswith("test"):
            continue
        name = rest.split()[0]
        tail = rest[len(name):].strip()
        word = "passed"
        for w in WORDS:
            if tail.startswith(w) or tail.startswith("-- " + w):
                word = w
                break
        else:
            for w in ("failed", "timed out", "crashed"):
                if w in tail:
                    word = w
                    break
        seen[name] = word.replace(" ", "_")
    for name in sorted(seen):
        print("COMPAT module %s %s" % (seen[name], name))
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
