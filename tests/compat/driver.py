"""tests/compat/driver.py: CPython's regression suite, run once where it
stands (a sandbox tier, or the host as the sandbox user), reported as one
line per test case so that tests/compat/compare.py can set the tiers side by
side.  It runs ``python3 -m test`` with no resources enabled (so no network,
no large files, no audio, no GUI) and a JUnit file in $TMPDIR, then prints:

    COMPAT case <status> <id> <message>
    COMPAT module <status> <name>
    COMPAT done <seconds>

status is pass, fail, error or skip for a case and regrtest's own word for a
module (passed, failed, env_changed, skipped, resource_denied, interrupted,
timeout, crashed...).  message is the last line of the failure or error text
(the exception and its message), which is what compare.py reads a reason
from; tabs and newlines are folded to spaces.  regrtest's own output goes to
$TMPDIR/regrtest.log and its last lines to stderr.

    python3 driver.py [-j N] [--timeout S] [-x] TEST...   (regrtest options)
"""
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET


def one_line(text):
    lines = [l.strip() for l in (text or "").splitlines() if l.strip()]
    return " ".join((lines[-1] if lines else "").split())[:300]


def main(argv):
    tmp = os.environ.get("TMPDIR", "/tmp")
    work = os.path.join(tmp, "compat")
    os.makedirs(work, exist_ok=True)
    xml = os.path.join(work, "junit.xml")
    log = os.path.join(work, "regrtest.log")
    start = time.monotonic()
    cmd = [sys.executable, "-m", "test", "--junit-xml", xml,
           "--tempdir", work, "--slowest"] + argv
    # regrtest prints one line per module with its verdict; 3.11 has no
    # machine-readable summary, so emit_modules reads the log.
    with open(log, "w") as out:
        rc = subprocess.call(cmd, stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, cwd=work)
    elapsed = time.monotonic() - start
    with open(log, errors="replace") as f:
        text = f.read()
    for line in text.splitlines()[-25:]:
        print(line, file=sys.stderr)
    emit_cases(xml)
    emit_modules(text)
    print("COMPAT done %d rc=%d" % (elapsed, rc), flush=True)
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


# regrtest's per-module progress lines: "[ 12/430] test_os" then, for a
# module that did not pass, "test_os failed (2 errors)", "test_x skipped",
# "test_y crashed (Exit code -9)", "test_z timed out".
WORDS = ("failed", "skipped", "crashed", "passed", "interrupted",
         "resource denied", "timed out", "env changed", "run no tests",
         "skipped (resource denied)")


def emit_modules(text):
    seen = {}
    for line in text.splitlines():
        parts = line.split("] ", 1)
        if len(parts) != 2 or "/" not in parts[0]:
            continue
        rest = parts[1].strip()
        if rest.startswith("test_") or rest.startswith("test."):
            name = rest.split()[0]
            tail = rest[len(name):].strip()
            word = "passed"
            if tail:
                for w in WORDS:
                    if tail.startswith(w) or tail.startswith("-- " + w):
                        word = w
                        break
                else:
                    if "failed" in tail:
                        word = "failed"
                    elif "timed out" in tail or "timeout" in tail:
                        word = "timed out"
                    elif "crashed" in tail:
                        word = "crashed"
            seen[name] = word.replace(" ", "_")
    for name in sorted(seen):
        print("COMPAT module %s %s" % (seen[name], name))
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
