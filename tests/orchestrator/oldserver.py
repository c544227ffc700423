#!/usr/bin/python3
"""tests/orchestrator/oldserver.py LISTEN UPSTREAM: a stand-in for an sbx
server older than hello.  It answers a frame whose Envelope body it does
not know -- hello, which such a server reads as unknown fields -- with
ERROR_MALFORMED and hangs up, as those servers did, and relays every
other frame to UPSTREAM (the real policyd) and its reply back.  Serves one
connection at a time until killed."""
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
    listen, upstream = sys.argv[1], sys.argv[2]
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(listen)
    os.chmod(listen, 0o666)
    srv.listen(4)
    while True:
        c, _ = srv.accept()
        with c:
            while True:
                f = frame(c)
                if f is None:
                    break
                env = pb.Envelope()
                env.ParseFromString(f[4:])
                if env.WhichOneof("body") == "hello":
                    rep = pb.Envelope(version=1, request_id=env.request_id)
                    rep.error.code = pb.ERROR_MALFORMED
                    rep.error.message = "frame did not decode"
                    d = rep.SerializeToString()
                    c.sendall(struct.pack(">I", len(d)) + d)
                    break
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as u:
                    u.connect(upstream)
                    u.sendall(f)
                    r = frame(u)
                if r is None:
                    break
                c.sendall(r)


main()
