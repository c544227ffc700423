"""tests/lib/framerelay.py: sbx's wire framing for the Python test
helpers (a 4-byte big-endian length, then an Envelope), and a relay that
stands between a client and a real daemon's socket, so that a test can
play an older or odder daemon by changing only what differs.

A script in tests/SUITE/ imports it with
    sys.path.insert(0, os.path.join(os.path.dirname(
        os.path.abspath(__file__)), "..", "lib"))
    import framerelay
"""
import os
import socket
import struct


def frame(sock):
    """One whole frame (length prefix included) from sock, or None when
    the peer hangs up before it is whole."""
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


def pack(env):
    """The frame of an Envelope."""
    d = env.SerializeToString()
    return struct.pack(">I", len(d)) + d


def serve(listen, upstream, request=None, reply=None, mode=None):
    """Listens on the Unix socket LISTEN (chmod'ed to mode, if given) and
    serves one connection at a time until killed: each frame goes to
    UPSTREAM on a connection of its own and the reply comes back.
    request(conn, frame), if given, returns the frame to relay in its
    place, or None when it has answered (or not) and the connection is
    to end; reply(frame), if given, sees each reply before the client
    does.  A connection ends when either side hangs up."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(listen)
    if mode is not None:
        os.chmod(listen, mode)
    srv.listen(4)
    while True:
        c, _ = srv.accept()
        with c:
            while True:
                f = frame(c)
                if f is None:
                    break
                if request is not None:
                    f = request(c, f)
                    if f is None:
                        break
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as u:
                    u.connect(upstream)
                    u.sendall(f)
                    r = frame(u)
                if r is None:
                    break
                if reply is not None:
                    reply(r)
                c.sendall(r)
