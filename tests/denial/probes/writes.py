# sbx-probe: writes
"""Denial probe: write outside the scratch directory.

Creating a file in /, /in, /code, /tmp, /etc, /usr, /run/sbx or next to
the program itself must fail with a read-only file system or permission
error.  As a control, the same write in /scratch must succeed, so a
broken probe cannot pass by failing everywhere.  Prints one CHECK line per
directory and PROBE-DONE at the end."""
import errno
import os
import sys


def say(kind, name, what):
    print(f"CHECK {name} {kind} {what}", flush=True)


here = os.path.dirname(os.path.abspath(sys.argv[0] or "."))
dirs = ["/", "/in", "/code", "/tmp", "/etc", "/usr", "/var", "/run/sbx",
        "/scratch/..", here]
seen = set()
for d in dirs:
    real = os.path.realpath(d)
    if real in seen or real.startswith("/scratch"):
        continue
    seen.add(real)
    p = os.path.join(real, f".sbx-probe-{os.getpid()}")
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, b"x")
        os.close(fd)
        os.unlink(p)
        say("ALLOWED", f"write-{real}", f"created {p}")
    except OSError as e:
        if e.errno in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOENT):
            say("DENIED", f"write-{real}",
                f"errno {errno.errorcode.get(e.errno, e.errno)} {e.strerror}")
        else:
            say("ALLOWED", f"write-{real}", f"unexpected error {e}")

# The control: scratch is writable.
p = f"/scratch/.sbx-probe-{os.getpid()}"
try:
    with open(p, "w") as f:
        f.write("x")
    os.unlink(p)
    print("CONTROL scratch writable", flush=True)
except OSError as e:
    say("ALLOWED", "control-scratch", f"scratch is not writable ({e}): the "
        "probe cannot tell a denial from a broken sandbox")
print("PROBE-DONE writes", flush=True)
