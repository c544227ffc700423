#!/usr/bin/python3
"""tests/fleet/askchain.py SOCKET TASK_ID: sends one AuditQuery with chain
set (and task_id, when not empty) and prints what came back: "error CODE
MESSAGE", or "records N SIZE" (the reply frame's size)."""
import os
import socket
import struct
import sys

sys.path.insert(0, os.environ["SBX_PROTO_PY"])
from sbx.v1 import envelope_pb2 as pb  # noqa: E402


def main():
    env = pb.Envelope(version=1, request_id=7)
    env.audit_query.chain = True
    env.audit_query.task_id = sys.argv[2]
    d = env.SerializeToString()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(sys.argv[1])
        s.sendall(struct.pack(">I", len(d)) + d)
        head = b""
        while len(head) < 4:
            c = s.recv(4 - len(head))
            if not c:
                sys.exit("no reply")
            head += c
        n, = struct.unpack(">I", head)
        body = b""
        while len(body) < n:
            c = s.recv(n - len(body))
            if not c:
                sys.exit("short reply")
            body += c
    rep = pb.Envelope()
    rep.ParseFromString(body)
    if rep.WhichOneof("body") == "error":
        print("error %s %s" % (pb.ErrorCode.Name(rep.error.code),
                               rep.error.message))
    else:
        print("records %d %d" % (len(rep.audit_records.events), n))


main()
