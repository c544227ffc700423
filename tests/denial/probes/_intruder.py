#!/usr/bin/env python3
"""_intruder.py: an unprivileged host user tries to ride a live task's
egress channel (invariant 11).  Not a sandbox probe (the leading _ keeps
sbxctl canary from running it as one): tests/denial/run and `sbxctl
canary` run it on the host, as an unprivileged user, while a task of the
canary type sleeps in its sandbox.

    _intruder.py --target URL [--state DIR] [--candidates FILE]
                 [--cgroup-parent NAME]       (SBX_VICTIM=XID in the environment)

It does what a local user would: reads every process's command line, the
cgroup tree and whatever it can list under the deployment's state
directory, looking for the execution id (SBX_VICTIM: the attacker is
assumed to know it, and it is not on this program's own command line;
finding it printed anywhere is a leak); collects
every Unix socket it can name -- found by walking, guessed from the old
layouts (egressd's run_dir/XID.sock, launchd-sbx's x-XID), through
/proc/PID/root of every sandbox process, and, with --candidates, every
socket root sees under the state directory -- and connects to each,
sending the request an agent would (GET TARGET/ok?intruder=1).  It also
tries to ptrace and to read the environment of every process in a
sandbox's cgroup.  Output, one line per finding:

    LEAK <where> <detail>       the execution id where this user reads it
    RODE <socket> <status>      a request answered: the channel was ridden
    PTRACE <pid>                attached to a sandbox process
    ENVIRON <pid>               read a sandbox process's environment
    ROOT <pid>                  listed a sandbox process's /proc/PID/root
    CONNECTED <socket>          accepted the connection (a daemon's own
                                socket, say), then answered no request
    TRIED <n> sockets, <c> connected, <a> answered
    INTRUDER-DONE

Anything but CONNECTED, TRIED and INTRUDER-DONE is a failure of the
deployment.
"""
import argparse
import ctypes
import os
import socket
import stat
import sys

PTRACE_ATTACH = 16
PTRACE_DETACH = 17


def say(*a):
    print(*a, flush=True)


def pids():
    for d in os.listdir("/proc"):
        if d.isdigit():
            yield int(d)


def read(path, n=65536):
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except OSError:
        return None


def sandbox_pids(parent):
    """Processes whose pids cgroup is under /PARENT/ (launchd-sbx's)."""
    out = []
    for p in pids():
        cg = read("/proc/%d/cgroup" % p)
        if cg is None:
            continue
        for line in cg.decode("latin-1").splitlines():
            f = line.split(":", 2)
            if len(f) == 3 and ("pids" in f[1].split(",") or f[0] == "0") \
                    and f[2].startswith("/%s/" % parent):
                out.append(p)
                break
    return out


def walk_sockets(top, xid, found, leaks, depth=8):
    """Every socket under top this user can list; names holding xid."""
    try:
        entries = os.listdir(top)
    except OSError:
        return
    for e in entries:
        p = os.path.join(top, e)
        if xid and xid in e:
            leaks.append(("name", p))
        try:
            st = os.lstat(p)
        except OSError:
            continue
        if stat.S_ISSOCK(st.st_mode):
            found.add(p)
        elif stat.S_ISDIR(st.st_mode) and depth > 0:
            walk_sockets(p, xid, found, leaks, depth - 1)


def ride(path, target):
    """0: not connected, 1: connected but nothing came back, 2: answered."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect(path)
    except OSError:
        return 0, ""
    host = target.split("//", 1)[1].split("/", 1)[0]
    try:
        s.sendall(("GET %s/ok?intruder=1 HTTP/1.1\r\nHost: %s\r\n"
                   "Connection: close\r\n\r\n" % (target, host)).encode())
        d = s.recv(4096)
    except OSError:
        d = b""
    finally:
        s.close()
    if d.startswith(b"HTTP/"):
        return 2, d.split(b"\r\n", 1)[0].decode("latin-1")
    return 1, ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--state", default="")
    ap.add_argument("--candidates", default="")
    ap.add_argument("--cgroup-parent", default="sbx")
    a = ap.parse_args()
    xid = os.environ.get("SBX_VICTIM", "")
    leaks = []
    socks = set()

    # ps / /proc/*/cmdline: the runtime's and sbx-init's command lines.
    for p in pids():
        cmd = read("/proc/%d/cmdline" % p)
        if p == os.getpid():
            continue
        if cmd and xid and xid.encode() in cmd:
            leaks.append(("cmdline", "pid %d: %s" % (
                p, cmd.replace(b"\0", b" ")[:200].decode("latin-1"))))
    # The cgroup tree.
    for top in ("/sys/fs/cgroup",):
        for dirpath, dirnames, _ in os.walk(top):
            for d in dirnames:
                if xid and xid in d:
                    leaks.append(("cgroup", os.path.join(dirpath, d)))
    # The run and state directories, and the usual socket places.
    for top in [a.state, "/run", "/tmp", "/var/run"]:
        if top:
            walk_sockets(top, xid, socks, leaks)
    # The old layouts, guessed from the id.
    if xid and a.state:
        for d in ("egress-run", "launchd-run"):
            socks.add(os.path.join(a.state, d, xid + ".sock"))
            socks.add(os.path.join(a.state, d, "x-" + xid, "egress.sock"))
            socks.add(os.path.join(a.state, d, "x-" + xid, "run",
                                   "egress.sock"))
    # Root's list of every socket in the deployment, as if guessed.
    if a.candidates:
        try:
            with open(a.candidates) as f:
                socks.update(l.strip() for l in f if l.strip())
        except OSError:
            pass
    # Into the sandboxes: ptrace, environ, /proc/PID/root.
    libc = ctypes.CDLL(None, use_errno=True)
    for p in sandbox_pids(a.cgroup_parent):
        if libc.ptrace(PTRACE_ATTACH, p, None, None) == 0:
            say("PTRACE %d" % p)
            try:
                os.waitpid(p, 0x40000000)  # __WALL
            except OSError:
                pass
            libc.ptrace(PTRACE_DETACH, p, None, None)
        env = read("/proc/%d/environ" % p)
        if env is not None:
            say("ENVIRON %d" % p)
            if xid and xid.encode() in env:
                leaks.append(("environ", "pid %d" % p))
        for sub in ("run/sbx", "run/sbx/pool"):
            root = "/proc/%d/root/%s" % (p, sub)
            try:
                names = os.listdir(root)
            except OSError:
                continue
            say("ROOT %d" % p)
            for n in names:
                socks.add(os.path.join(root, n))
        for sub in ("run/sbx/egress.sock", "run/sbx/pool/egress.sock"):
            socks.add("/proc/%d/root/%s" % (p, sub))
    for where, what in leaks:
        say("LEAK %s %s" % (where, what))
    tried = connected = answered = 0
    for s in sorted(socks):
        tried += 1
        r, line = ride(s, a.target)
        if r >= 1:
            connected += 1
            say("CONNECTED %s" % s)
        if r == 2:
            answered += 1
            say("RODE %s %s" % (s, line))
    say("TRIED %d sockets, %d connected, %d answered" % (
        tried, connected, answered))
    say("INTRUDER-DONE")


if __name__ == "__main__":
    main()
