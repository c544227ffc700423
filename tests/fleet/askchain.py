#!/usr/bin/python3
"""tests/fleet/askchain.py SOCKET TASK_ID: sends one AuditQuery with chain
set (and task_id, when not empty) and prints what came back: "error CODE
MESSAGE", or "records N SIZE" (the reply frame's size)."""
import os
import socket
import sys

sys.path.insert(0, os.environ["SBX_PROTO_PY"])
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "lib"))
from sbx.v1 import envelope_pb2 as pb  # noqa: E402
import framerelay  # noqa: E402


def main():
    env = pb.Envelope(version=1, request_id=7)
    env.audit_query.chain = True
    env.audit_query.task_id = sys.argv[2]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(sys.argv[1])
        s.sendall(framerelay.pack(env))
        f = framerelay.frame(s)
    if f is None:
        sys.exit("no reply, or a short one")
    rep = pb.Envelope()
    rep.ParseFromString(f[4:])
    if rep.WhichOneof("body") == "error":
        print("error %s %s" % (pb.ErrorCode.Name(rep.error.code),
                               rep.error.message))
    else:
        print("records %d %d" % (len(rep.audit_records.events), len(f) - 4))


main()
