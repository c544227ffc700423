#!/usr/bin/python3
"""tests/fleet/relay.py LISTEN UPSTREAM SIZES [old]: relays each frame to
UPSTREAM (a real policyd socket) and its reply back, appending the size of
every reply frame to SIZES, one a line.  With "old" it stands in for a
daemon older than AuditQuery paging: it clears after_seq and chain (fields
3 and 4, which such a daemon skips as unknown) before relaying, so the
daemon answers from seq 1 at most `limit` records, whatever was asked.
Serves one connection at a time until killed."""
import os
import socket
import struct
import sys

sys.path.insert(0, os.environ["SBX_PROTO_PY"])
from sbx.v1 import envelope_pb2 as pb  # noqa: E402


def frame(sock):
    head = b""
    while len(head) < 4:
        c = sock.recv(4 - len(head))
        if not c:
            return None
        head += c
    n, = struct.unpack(">I", head)
    body = b""
    while len(body) < n:
        c = sock.recv(n - len(body))
        if not c:
            return None
        body += c
    return head + body


def main():
    listen, upstream, sizes = sys.argv[1], sys.argv[2], sys.argv[3]
    old = len(sys.argv) > 4 and sys.argv[4] == "old"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(listen)
    srv.listen(4)
    while True:
        c, _ = srv.accept()
        with c:
            while True:
                f = frame(c)
                if f is None:
                    break
                if old:
                    env = pb.Envelope()
                    env.ParseFromString(f[4:])
                    if env.WhichOneof("body") == "audit_query":
                        env.audit_query.ClearField("after_seq")
                        env.audit_query.ClearField("chain")
                        d = env.SerializeToString()
                        f = struct.pack(">I", len(d)) + d
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as u:
                    u.connect(upstream)
                    u.sendall(f)
                    r = frame(u)
                if r is None:
                    break
                with open(sizes, "a") as s:
                    s.write("%d\n" % (len(r) - 4))
                c.sendall(r)


main()
