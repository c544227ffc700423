# sbx-probe: _neighbour (a helper, not run as a probe of its own)
# A second sandbox, running at the same time as another task's, looks for
# that task's egress channel from inside (invariant 11): the other
# execution's id (@VICTIM@) in every command line, cgroup and file name it
# can read, and every Unix socket it can name other than its own channel
# (/run/sbx/egress.sock, or /run/sbx/pool/egress.sock when pooled), each
# sent the request an agent would.  Any answer is a ride; any sighting of
# the id is a leak.  tests/denial/run and `sbxctl canary` run it while a
# task of the canary type sleeps.
import os
import socket
import stat

VICTIM = "@VICTIM@"
TARGET = "@TARGET@"
OWN = {"/run/sbx/egress.sock", "/run/sbx/pool/egress.sock"}


def check(name, ok, detail):
    print("CHECK %s %s %s" % (name, "DENIED" if ok else "ALLOWED", detail),
          flush=True)


leaks, socks = [], set()
for d in os.listdir("/proc"):
    if not d.isdigit():
        continue
    try:
        with open("/proc/%s/cmdline" % d, "rb") as f:
            if VICTIM.encode() in f.read():
                leaks.append("cmdline of pid " + d)
    except OSError:
        pass
for top in ("/run", "/tmp", "/scratch", "/var", "/dev/shm", "/sys/fs/cgroup",
            "/proc/1/root/run", "/proc/self/root/run"):
    for dirpath, dirnames, filenames in os.walk(top):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            if VICTIM in n:
                leaks.append("name " + p)
            try:
                if stat.S_ISSOCK(os.lstat(p).st_mode):
                    socks.add(p)
            except OSError:
                pass
check("neighbour-id", not leaks,
      "; ".join(leaks[:5]) or "the other execution's id is nowhere here")
host = TARGET.split("//", 1)[1].split("/", 1)[0]
answered = []
tried = 0
for p in sorted(socks):
    if os.path.realpath(p) in OWN or p in OWN:
        continue
    tried += 1
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(3)
    try:
        s.connect(p)
        s.sendall(("GET %s/ok?intruder=1 HTTP/1.1\r\nHost: %s\r\n"
                   "Connection: close\r\n\r\n" % (TARGET, host)).encode())
        if s.recv(64).startswith(b"HTTP/"):
            answered.append(p)
    except OSError:
        pass
    finally:
        s.close()
check("neighbour-sockets", not answered,
      "%d other sockets tried, answered: %s" % (tried, answered or "none"))
print("PROBE-DONE _neighbour", flush=True)
