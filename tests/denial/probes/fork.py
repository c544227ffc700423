# sbx-probe: fork
# sbx-expect: limit pids
"""Denial probe: fork processes in a loop.

The template's pids limit must stop the loop: fork fails with EAGAIN
(and launchd-sbx reports the pids limit in limits_hit) long before 4096
children.  The children only wait to be killed; the parent kills and
reaps them all before it reports.  Prints a CHECK line and PROBE-DONE."""
import os
import signal
import time

MAX = 4096


def say(kind, name, what):
    print(f"CHECK {name} {kind} {what}", flush=True)


kids, err = [], None
for _ in range(MAX):
    try:
        pid = os.fork()
    except OSError as e:
        err = e
        break
    if pid == 0:
        try:
            time.sleep(60)
        finally:
            os._exit(0)
    kids.append(pid)
for pid in kids:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
for pid in kids:
    try:
        os.waitpid(pid, 0)
    except OSError:
        pass
if err is None:
    say("ALLOWED", "fork-loop", f"{len(kids)} children, no limit")
else:
    say("DENIED", "fork-loop", f"stopped after {len(kids)} children: "
        f"errno {err.errno} {os.strerror(err.errno or 0)}")
print("PROBE-DONE fork", flush=True)
