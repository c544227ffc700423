# sbx-probe: devices
"""Denial probe: devices and code the sandbox must not have (issue 11).

/dev holds only what the OCI spec lists: /dev/fuse and /dev/net/tun
(which gVisor adds by itself) must not open for reading and writing, nor
may any other device node but null, zero, full, random, urandom, tty and
ptmx (a microvm guest's /dev is its kernel's devtmpfs).
Code written to /scratch (noexec) must not run when mapped executable:
the mapping fails (runc), or running it faults (gVisor before late 2023
maps it; the host's noexec mount refuses to run it), checked in a child
so a fault is a denial.  Prints one CHECK line per attempt and
PROBE-DONE at the end."""
import ctypes
import mmap
import os
import signal


def say(kind, name, what):
    print(f"CHECK {name} {kind} {what}", flush=True)


def dev_open(dev, flags=0):
    """One device opened read-write: the line says which way it went."""
    try:
        fd = os.open(dev, os.O_RDWR | flags)
    except OSError as e:
        say("DENIED", "dev-open", f"{dev}: errno {e.errno} "
            f"{os.strerror(e.errno)}")
    else:
        os.close(fd)
        say("ALLOWED", "dev-open", f"{dev} opened read-write")


for dev in ("/dev/fuse", "/dev/net/tun"):
    dev_open(dev)

# Every other device node: a microvm guest's /dev is the guest kernel's
# devtmpfs (its disks, serial port, kernel log...), the other tiers' the
# spec's short list.  Only the harmless ones may open read-write.
import stat
harmless = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
            "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts/ptmx"}
for top, dirs, files in os.walk("/dev"):
    for n in sorted(files):
        dev = os.path.join(top, n)
        try:
            m = os.lstat(dev).st_mode
        except OSError:
            continue
        if not (stat.S_ISCHR(m) or stat.S_ISBLK(m)) or dev in harmless or \
                dev.startswith("/dev/pts/") or dev in ("/dev/fuse", "/dev/net/tun"):
            continue
        dev_open(dev, os.O_NONBLOCK | os.O_NOCTTY)

# A lone x86-64 "ret" (0xc3), padded to a page.
path = f"/scratch/.sbx-probe-exec-{os.getpid()}"
with open(path, "wb") as f:
    f.write(b"\xc3" + b"\0" * (mmap.PAGESIZE - 1))
pid = os.fork()
if pid == 0:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                          ctypes.c_int, ctypes.c_int, ctypes.c_long)
    fd = os.open(path, os.O_RDONLY)
    addr = libc.mmap(None, mmap.PAGESIZE, mmap.PROT_READ | mmap.PROT_EXEC,
                     mmap.MAP_PRIVATE, fd, 0)
    if addr is None or addr == ctypes.c_void_p(-1).value:
        os._exit(100 + ctypes.get_errno())
    ctypes.CFUNCTYPE(None)(addr)()
    os._exit(0)
_, st = os.waitpid(pid, 0)
os.unlink(path)
if os.WIFSIGNALED(st):
    say("DENIED", "scratch-exec", "mapped, but running it was killed by "
        f"{signal.Signals(os.WTERMSIG(st)).name}")
elif os.WEXITSTATUS(st) > 100:
    e = os.WEXITSTATUS(st) - 100
    say("DENIED", "scratch-exec", f"mmap PROT_EXEC: errno {e} "
        f"{os.strerror(e)}")
elif os.WEXITSTATUS(st) == 0:
    say("ALLOWED", "scratch-exec", "code mapped from /scratch ran")
else:
    say("FAILED", "scratch-exec", f"child status {st}")
print("PROBE-DONE devices", flush=True)
