# sbx-probe: budget
# sbx-expect: egress egress-budget-exhausted
"""Denial probe: exceed the egress byte budget with allowed requests.

POSTs of 2 KiB to @TARGET@/ok, each one allowed by the canary template,
until egressd refuses one with 403 egress-budget-exhausted (the canary
template's max_out_kb is small).  The first must succeed, so the denial is
the budget's and not some other rule's.  Prints CHECK lines and
PROBE-DONE."""
import json
import urllib.error
import urllib.request

TARGET = "@TARGET@".rstrip("/")
BODY = b"b" * 2048


def say(kind, name, what):
    print(f"CHECK {name} {kind} {what}", flush=True)


sent, result = 0, None
for i in range(256):
    req = urllib.request.Request(TARGET + "/ok", data=BODY, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            r.read()
        sent += 1
    except urllib.error.HTTPError as e:
        try:
            rule = json.loads(e.read().decode("utf-8", "replace")).get("rule")
        except Exception:
            rule = None
        result = (e.code, rule)
        break
    except OSError as e:
        result = (0, str(e))
        break
if sent == 0:
    say("ALLOWED", "control-first-post", f"the first allowed POST failed "
        f"({result}): the probe cannot tell the budget from a dead target")
if result is None:
    say("ALLOWED", "budget", f"{sent} POSTs of {len(BODY)} bytes, no budget")
elif result == (403, "egress-budget-exhausted"):
    say("DENIED", "budget", f"{sent} POSTs went out, then 403 {result[1]}")
else:
    say("ALLOWED", "budget", f"after {sent} POSTs: {result}, not the budget")
print("PROBE-DONE budget", flush=True)
