# sbx-probe: redirect
# sbx-expect: egress redirect-not-allowed
"""Denial probe: follow a redirect from an allowed host to a disallowed one.

@TARGET@ is the canary target, the one host the canary template allows:
/ok answers 200 and /redirect answers 302 to a host outside the
allowlist.  The control GET of /ok must succeed (so the target is
reachable); the GET of /redirect must be stopped by egressd at the
redirect, a 403 naming redirect-not-allowed, before the client ever sees
the Location.  Prints CHECK lines and PROBE-DONE."""
import json
import urllib.error
import urllib.request

TARGET = "@TARGET@".rstrip("/")


def say(kind, name, what):
    print(f"CHECK {name} {kind} {what}", flush=True)


def rule_of(e):
    try:
        return json.loads(e.read().decode("utf-8", "replace")).get("rule")
    except Exception:
        return None


try:
    with urllib.request.urlopen(TARGET + "/ok", timeout=10) as r:
        print(f"CONTROL {TARGET}/ok answered {r.status}", flush=True)
except (urllib.error.HTTPError, OSError) as e:
    say("ALLOWED", "control-ok", f"the canary target did not answer "
        f"({e}): the probe cannot tell a redirect denial from a dead target")

try:
    with urllib.request.urlopen(TARGET + "/redirect", timeout=10) as r:
        say("ALLOWED", "redirect", f"followed to {r.geturl()} ({r.status})")
except urllib.error.HTTPError as e:
    rule = rule_of(e)
    if e.code == 403 and rule == "redirect-not-allowed":
        say("DENIED", "redirect", f"{e.code} {rule}")
    elif e.code in (301, 302, 303, 307, 308):
        say("ALLOWED", "redirect", f"the client saw the {e.code} itself")
    else:
        say("ALLOWED", "redirect", f"unexpected answer {e.code} {rule}")
except OSError as e:
    say("ALLOWED", "redirect", f"request failed without a denial: {e}")
print("PROBE-DONE redirect", flush=True)
