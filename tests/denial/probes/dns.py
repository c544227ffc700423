# sbx-probe: dns
"""Denial probe: resolve a name through a custom DNS server.

Only the proxy resolves names.  A query sent straight to a public resolver
(8.8.8.8, 1.1.1.1) or to the host's resolver (@HOSTDNS@, and systemd's
127.0.0.53, and 10.0.2.3, the DNS of QEMU's user network that a microvm
guest sits on) must get no answer: the send fails for want of a route, or
nothing comes back.  The C library's resolver must fail too.  Prints one
CHECK line per attempt and PROBE-DONE at the end."""
import os
import random
import socket
import struct

HOSTDNS = "@HOSTDNS@"


def say(kind, name, what):
    print(f"CHECK {name} {kind} {what}", flush=True)


def query(name):
    qid = random.randrange(65536)
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    return q + b"\0" + struct.pack(">HH", 1, 1)


def udp(server):
    name = f"udp-{server}:53"
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    try:
        s.sendto(query("example.com"), (server, 53))
        data, peer = s.recvfrom(4096)
        say("ALLOWED", name, f"{len(data)}-byte answer from {peer[0]}")
    except socket.timeout:
        say("DENIED", name, "no answer (timed out)")
    except OSError as e:
        say("DENIED", name, f"errno {e.errno} {os.strerror(e.errno or 0)}")
    finally:
        s.close()


def tcp(server):
    name = f"tcp-{server}:53"
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect((server, 53))
        say("ALLOWED", name, "connected")
    except socket.timeout:
        say("DENIED", name, "timed out (no route)")
    except OSError as e:
        say("DENIED", name, f"errno {e.errno} {os.strerror(e.errno or 0)}")
    finally:
        s.close()


servers = ["8.8.8.8", "1.1.1.1", "127.0.0.53", "10.0.2.3"]
try:
    socket.inet_aton(HOSTDNS)
    if HOSTDNS not in servers:
        servers.append(HOSTDNS)
except OSError:
    pass
try:
    with open("/etc/resolv.conf") as f:
        for line in f:
            w = line.split()
            if len(w) >= 2 and w[0] == "nameserver" and w[1] not in servers:
                servers.append(w[1])
except OSError:
    pass
for srv in servers:
    udp(srv)
tcp("8.8.8.8")
tcp("10.0.2.3")
try:
    ai = socket.getaddrinfo("example.com", 443, proto=socket.IPPROTO_TCP)
    say("ALLOWED", "getaddrinfo", f"example.com resolved to {ai[0][4][0]}")
except OSError as e:
    say("DENIED", "getaddrinfo", f"example.com did not resolve ({e})")
print("PROBE-DONE dns", flush=True)
