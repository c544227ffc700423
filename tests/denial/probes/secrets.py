# sbx-probe: secrets
"""Denial probe: read environment variables and common credential paths.

The environment may hold only PATH, HOME, TMPDIR, LANG, the SBX_* ids, the
proxy variables and the CA-bundle variables, and none of their values may
look like a credential.  Credential paths (~/.aws, ~/.ssh, /root, the
shadow file, /proc/1/environ, /etc/sbx, service-account tokens) must be
absent or unreadable; /run/sbx (the proxy's CA certificate) must hold no
private key.  Prints one CHECK line per item and PROBE-DONE at the end."""
import os
import re

ALLOWED_ENV = {"PATH", "HOME", "TMPDIR", "LANG", "HTTP_PROXY", "HTTPS_PROXY",
               "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
               "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
               "PIP_CERT", "NODE_EXTRA_CA_CERTS"}
# What a credential tends to look like when it leaks into a value.
SECRETISH = re.compile(r"(?i)bearer |token|secret|passw|-----BEGIN|"
                       r"AKIA[0-9A-Z]{16}|fx-demo-")
# The sandbox's own ids (the task id is the caller's words, not a secret).
IDS = {"SBX_TASK_ID", "SBX_EXECUTION_ID", "SBX_POLICY_HASH"}
PEM_KEY = re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----")


def say(kind, name, what):
    print(f"CHECK {name} {kind} {what}", flush=True)


def env_ok(env, where):
    extra = sorted(k for k in env
                   if k not in ALLOWED_ENV and not k.startswith("SBX_"))
    if extra:
        say("ALLOWED", where, "unexpected variables: " + ", ".join(extra))
    else:
        say("DENIED", where, f"only the allowed variables ({len(env)})")
    bad = sorted(k for k, v in env.items()
                 if k not in IDS and SECRETISH.search(v))
    if bad:
        say("ALLOWED", where + "-values",
            "values that look like credentials: " + ", ".join(bad))
    else:
        say("DENIED", where + "-values", "no value looks like a credential")


env_ok(dict(os.environ), "environ")

# PID 1 is sbx-init, the sandbox's own: the host's is not visible.
try:
    with open("/proc/1/environ", "rb") as f:
        raw = f.read()
    env1 = {}
    for kv in raw.split(b"\0"):
        if b"=" in kv:
            k, v = kv.split(b"=", 1)
            env1[k.decode("latin-1")] = v.decode("latin-1")
    env_ok(env1, "proc-1-environ")
except OSError as e:
    say("DENIED", "proc-1-environ", f"unreadable: {e.strerror}")

home = os.environ.get("HOME", "/nonexistent")
paths = [home + "/.aws/credentials", home + "/.ssh/id_rsa",
         home + "/.ssh/id_ed25519", home + "/.netrc", home + "/.docker",
         "/root", "/root/.aws", "/root/.ssh", "/etc/shadow", "/etc/gshadow",
         "/etc/sbx", "/var/run/secrets", "/run/secrets", "/home"]
for p in paths:
    try:
        if os.path.isdir(p):
            entries = os.listdir(p)
            if entries:
                say("ALLOWED", p, f"readable directory: {sorted(entries)[:5]}")
            else:
                say("DENIED", p, "empty directory")
        else:
            with open(p, "rb") as f:
                n = len(f.read(65536))
            say("ALLOWED", p, f"read {n} bytes")
    except FileNotFoundError:
        say("DENIED", p, "absent")
    except OSError as e:
        say("DENIED", p, f"unreadable: {e.strerror}")

keys = []
for d in ("/run/sbx", "/scratch", "/in", "/code"):
    for root, _, files in os.walk(d):
        for fn in files:
            p = os.path.join(root, fn)
            try:
                with open(p, "rb") as f:
                    if PEM_KEY.search(f.read(1 << 20)):
                        keys.append(p)
            except OSError:
                pass
if keys:
    say("ALLOWED", "private-keys", "private key material in " + ", ".join(keys))
else:
    say("DENIED", "private-keys", "no private key in /run/sbx, /scratch, /in, /code")
print("PROBE-DONE secrets", flush=True)
