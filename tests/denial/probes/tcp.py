# sbx-probe: tcp
# sbx-expect: egress host-not-allowed
"""Denial probe: open a TCP connection to an address outside the allowlist.

Direct sockets must find no route (the sandbox has no interface but
loopback, and its loopback is not the host's: @HOSTPORT@ is a port that
answers on the host's 127.0.0.1).  Through the egress proxy, a CONNECT to
the same address must be refused by egressd with host-not-allowed, which
is what puts the denial in the audit.  Prints one CHECK line per attempt
(DENIED or ALLOWED) and PROBE-DONE at the end, so a probe cut short is
visible."""
import os
import socket
import urllib.parse

HOSTPORT = "@HOSTPORT@"


def say(kind, name, what):
    print(f"CHECK {name} {kind} {what}", flush=True)


def direct(name, addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect(addr)
        say("ALLOWED", name, f"connected to {addr[0]}:{addr[1]}")
    except socket.timeout:
        say("DENIED", name, "timed out (no route)")
    except OSError as e:
        say("DENIED", name, f"errno {e.errno} {os.strerror(e.errno or 0)}")
    finally:
        s.close()


direct("direct-1.1.1.1:443", ("1.1.1.1", 443))
direct("direct-8.8.8.8:80", ("8.8.8.8", 80))
try:
    port = int(HOSTPORT)
except ValueError:
    port = 22
direct(f"direct-127.0.0.1:{port}", ("127.0.0.1", port))
# A microvm guest has a NIC on QEMU's user network (launchd-sbx/microvm.h):
# to slirp, 10.0.2.2 is the host's loopback and 10.0.2.100 the one forward,
# port 3128 to egressd; restrict=on must drop everything else.  In the
# other tiers these addresses have no route.
direct(f"direct-10.0.2.2:{port}", ("10.0.2.2", port))
direct("direct-10.0.2.2:22", ("10.0.2.2", 22))
direct("direct-10.0.2.100:22", ("10.0.2.100", 22))

# Through the proxy: the only route out, which must refuse the address.
proxy = urllib.parse.urlsplit(os.environ.get("HTTPS_PROXY", ""))
if proxy.hostname is None:
    say("ALLOWED", "proxy-connect", "no HTTPS_PROXY: cannot check the proxy")
else:
    s = socket.create_connection((proxy.hostname, proxy.port or 3128), 10)
    s.sendall(b"CONNECT 1.1.1.1:443 HTTP/1.1\r\nHost: 1.1.1.1:443\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(4096)
        if not b:
            break
        head += b
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split()
    if len(parts) >= 2 and parts[1] == "200":
        say("ALLOWED", "proxy-connect", f"proxy answered {line}")
    else:
        say("DENIED", "proxy-connect", f"proxy answered {line!r}")
    s.close()
print("PROBE-DONE tcp", flush=True)
