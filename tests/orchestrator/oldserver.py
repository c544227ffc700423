#!/usr/bin/python3
"""tests/orchestrator/oldserver.py LISTEN UPSTREAM: a stand-in for an sbx
server older than hello.  It answers a frame whose Envelope body it does
not know -- hello, which such a server reads as unknown fields -- with
ERROR_MALFORMED and hangs up, as those servers did, and relays every
other frame to UPSTREAM (the real policyd) and its reply back.  Serves one
connection at a time until killed (tests/lib/framerelay.py)."""
import os
import sys

sys.path.insert(0, os.environ["SBX_PROTO_PY"])
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "lib"))
from sbx.v1 import envelope_pb2 as pb  # noqa: E402
import framerelay  # noqa: E402


def before_hello(conn, f):
    env = pb.Envelope()
    env.ParseFromString(f[4:])
    if env.WhichOneof("body") != "hello":
        return f
    rep = pb.Envelope(version=1, request_id=env.request_id)
    rep.error.code = pb.ERROR_MALFORMED
    rep.error.message = "frame did not decode"
    conn.sendall(framerelay.pack(rep))
    return None


def main():
    framerelay.serve(sys.argv[1], sys.argv[2], request=before_hello,
                     mode=0o666)


main()
