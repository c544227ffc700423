#!/usr/bin/python3
"""tests/fleet/relay.py LISTEN UPSTREAM SIZES [old]: relays each frame to
UPSTREAM (a real policyd socket) and its reply back, appending the size of
every reply frame to SIZES, one a line.  With "old" it stands in for a
daemon older than AuditQuery paging: it clears after_seq and chain (fields
3 and 4, which such a daemon skips as unknown) before relaying, so the
daemon answers from seq 1 at most `limit` records, whatever was asked.
Serves one connection at a time until killed (tests/lib/framerelay.py)."""
import os
import sys

sys.path.insert(0, os.environ["SBX_PROTO_PY"])
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "lib"))
from sbx.v1 import envelope_pb2 as pb  # noqa: E402
import framerelay  # noqa: E402


def main():
    listen, upstream, sizes = sys.argv[1], sys.argv[2], sys.argv[3]
    old = len(sys.argv) > 4 and sys.argv[4] == "old"

    def unpaged(_conn, f):
        env = pb.Envelope()
        env.ParseFromString(f[4:])
        if env.WhichOneof("body") != "audit_query":
            return f
        env.audit_query.ClearField("after_seq")
        env.audit_query.ClearField("chain")
        return framerelay.pack(env)

    def note(r):
        with open(sizes, "a") as s:
            s.write("%d\n" % (len(r) - 4))

    framerelay.serve(listen, upstream, request=unpaged if old else None,
                     reply=note)


main()
