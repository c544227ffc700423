#!/usr/bin/env python3
"""tests/egress/tool.py: the moving parts tests/egress/run starts.

  tool.py server PORT LOG [CERT KEY]   upstream HTTP(S) server; every request
                                       is appended to LOG as one JSON line
  tool.py bridge PORT SOCK             127.0.0.1:PORT -> Unix socket SOCK,
                                       as sbx-init bridges 3128
  tool.py raw SOCK REQUEST             send REQUEST (Python escapes, e.g.
                                       \\r\\n) to SOCK, print the response
  tool.py tls SOCK HOST:PORT CA REQ    CONNECT HOST:PORT through SOCK, TLS
                                       trusting only CA, then as raw
  tool.py batch SOCK FILE DIR [HOST:PORT CA]
                                       each line of FILE a request as for
                                       raw (or tls), each on a connection
                                       of its own; line N's answer in DIR/N
  tool.py dns PORT LOG                 a DNS server that logs every query
                                       name to LOG and answers NXDOMAIN
  tool.py ride SOCK URL                an intruder: connect to SOCK, send
                                       GET URL, print "connect-refused
                                       errno N", "closed" (not a byte
                                       back) or "answered STATUS-LINE"
  tool.py handoff SOCK STEP...         speak sbx-init's handoff protocol
                                       on one connection to SOCK, one line
                                       of output per step: hello (send the
                                       hello, print the answer), get:URL (a
                                       connected TCP socket handed over,
                                       then GET URL on its other end: print
                                       the status line), pipe, unix,
                                       listen, unconnected (hand over such
                                       a descriptor), two (two in one
                                       message), nofd (the byte alone),
                                       alive (is the connection still open)

Upstream paths: /v1/rates (JSON), /v1/echo (the request's headers as
JSON), /v1/redirect?to=URL (302), /v1/big?n=N (N bytes, Content-Length),
/v1/chunked?n=N (N bytes, chunked), /v1/slow (never answers),
/v1/badhead?name=NAME (a 200 whose head has a field named NAME, by
default "X-Bad Name": not a token).
/v1/stream?n=N&id=ID (N bytes with Content-Length, written as fast as the
socket takes them; how many it has written so far is in LOG.stream-ID,
rewritten at least every MiB and when it ends), /v1/chunkext?n=K&ext=E
(K one-byte chunks, each with an E-byte chunk extension).
"""
import http.server
import json
import os
import socket
import socketserver
import ssl
import sys
import threading
import time
import urllib.parse


def cmd_server(port, log, cert=None, key=None):
    lock = threading.Lock()

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def record(self, body=b""):
            with lock, open(log, "a") as f:
                f.write(json.dumps({"method": self.command,
                                    "path": self.path,
                                    "headers": dict(self.headers.items()),
                                    "body_len": len(body),
                                    "tls": cert is not None}) + "\n")

        def send(self, code, body, ctype="application/json", extra=None):
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def handle_any(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else b""
            self.record(body)
            u = urllib.parse.urlsplit(self.path)
            q = urllib.parse.parse_qs(u.query)
            if u.path == "/v1/rates":
                self.send(200, b'{"EUR": 0.92}')
            elif u.path == "/v1/echo":
                self.send(200, json.dumps(
                    {"headers": dict(self.headers.items()),
                     "body_len": len(body)}).encode())
            elif u.path == "/v1/redirect":
                self.send(302, b"", extra={"Location": q["to"][0]})
            elif u.path == "/v1/big":
                self.send(200, b"x" * int(q["n"][0]), "text/plain")
            elif u.path == "/v1/chunked":
                n = int(q["n"][0])
                self.send_response(200)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                while n > 0:
                    c = min(n, 4096)
                    self.wfile.write(b"%x\r\n%s\r\n" % (c, b"y" * c))
                    n -= c
                self.wfile.write(b"0\r\n\r\n")
            elif u.path == "/v1/badhead":
                self.send(200, b'{"bad": "head"}', extra={
                    q.get("name", ["X-Bad Name"])[0]: "1"})
            elif u.path == "/v1/slow":
                time.sleep(30)
            elif u.path == "/v1/stream":
                self.stream(int(q["n"][0]), q["id"][0])
            elif u.path == "/v1/chunkext":
                self.send_response(200)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                ext = b";x=" + b"e" * int(q["ext"][0])
                for _ in range(int(q["n"][0])):
                    self.wfile.write(b"1%s\r\nz\r\n" % ext)
                self.wfile.write(b"0\r\n\r\n")
            else:
                self.send(404, b'{"error": "not found"}')

        def stream(self, n, ident):
            # Report progress through a file the test reads while the
            # write blocks: that is what backpressure looks like here.
            prog = "%s.stream-%s" % (log, ident)
            block = b"s" * 65536
            written, told = 0, -1

            def tell(state):
                with open(prog + ".tmp", "w") as f:
                    f.write("%d %s\n" % (written, state))
                os.replace(prog + ".tmp", prog)

            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.end_headers()
            self.wfile.flush()
            tell("started")
            try:
                while written < n:
                    c = block[:min(len(block), n - written)]
                    self.wfile.write(c)
                    written += len(c)
                    if written - told >= 1 << 20:
                        told = written
                        tell("writing")
                self.wfile.flush()
                tell("done")
            except (OSError, ssl.SSLError):
                tell("broken")
                raise

        do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = handle_any

    class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
        allow_reuse_address = True

        def handle_error(self, request, client_address):
            # A proxy that drops a kept-alive connection is normal.
            if not isinstance(sys.exc_info()[1], (ConnectionError, ssl.SSLError)):
                super().handle_error(request, client_address)

    srv = S(("127.0.0.1", int(port)), H)
    if cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    srv.serve_forever()


def cmd_bridge(port, path):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", int(port)))
    ls.listen(64)

    def pump(a, b):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass
        try:
            b.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    while True:
        c, _ = ls.accept()
        u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            u.connect(path)
        except OSError:
            c.close()
            continue
        threading.Thread(target=pump, args=(c, u), daemon=True).start()
        threading.Thread(target=pump, args=(u, c), daemon=True).start()


def cmd_raw(path, req, s=None):
    sys.stdout.write(exchange(path, req, s).decode("latin-1"))


def exchange(path, req, s=None):
    data = req.encode("latin-1").decode("unicode_escape").encode("latin-1")
    if s is None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(path)
    s.sendall(data)
    out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            out += d
            # One response is enough when the proxy keeps the connection
            # (a request that asks for close reads until the end).
            if b"Connection: close" not in data and b"\r\n\r\n" in out and b"Content-Length:" in out:
                head, _, body = out.partition(b"\r\n\r\n")
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        if len(body) >= int(line.split(b":")[1]):
                            raise StopIteration
    except (socket.timeout, StopIteration, ssl.SSLError):
        pass
    except ConnectionResetError:
        pass
    s.close()
    return out


def cmd_tls(path, target, ca, req):
    sys.stdout.write(tls_exchange(path, target, ca, req).decode("latin-1"))


def tls_exchange(path, target, ca, req):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(path)
    s.sendall(("CONNECT %s HTTP/1.1\r\n\r\n" % target).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        d = s.recv(1)
        if not d:
            break
        head += d
    if not head.startswith(b"HTTP/1.1 200"):
        return head + s.recv(65536)
    ctx = ssl.create_default_context(cafile=ca)
    return exchange(path, req, ctx.wrap_socket(s, server_hostname=target.rsplit(":", 1)[0]))


def cmd_batch(path, reqs, outdir, target=None, ca=None):
    with open(reqs, encoding="latin-1") as f:
        lines = f.read().splitlines()
    for i, req in enumerate(lines, 1):
        try:
            out = (tls_exchange(path, target, ca, req) if target
                   else exchange(path, req))
        except OSError as e:
            out = ("error: %s\n" % e).encode()
        with open(os.path.join(outdir, str(i)), "wb") as f:
            f.write(out)


def cmd_dns(port, log):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", int(port)))
    while True:
        data, addr = s.recvfrom(4096)
        if len(data) < 12:
            continue
        labels, i = [], 12
        while i < len(data) and data[i] != 0:
            n = data[i]
            labels.append(data[i + 1:i + 1 + n].decode("latin-1"))
            i += n + 1
        with open(log, "a") as f:
            f.write(".".join(labels) + "\n")
        # NXDOMAIN: id, flags QR|RD|RA|rcode 3, the question echoed.
        q = data[12:i + 5]
        s.sendto(data[:2] + b"\x81\x83" + b"\x00\x01\x00\x00\x00\x00\x00\x00"
                 + q, addr)


def cmd_ride(path, url):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect(path)
    except OSError as e:
        print("connect-refused errno %d" % e.errno)
        return
    host = url.split("//", 1)[1].split("/", 1)[0]
    try:
        s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (url, host))
                  .encode())
        d = s.recv(4096)
    except OSError:
        d = b""
    print("answered " + d.split(b"\r\n")[0].decode("latin-1") if d
          else "closed")


def journal_parse(data):
    """One entry of systemd's native journal protocol: KEY=value lines, or
    KEY, a newline, a 64-bit little-endian length, the value and a newline
    for a value that may hold newlines.  Returns (fields, problem)."""
    fields, i = {}, 0
    while i < len(data):
        nl = data.find(b"\n", i)
        if nl == -1:
            return fields, "entry does not end in a newline"
        line = data[i:nl]
        if b"=" in line:
            k, v = line.split(b"=", 1)
            i = nl + 1
        else:
            k = line
            if nl + 9 > len(data):
                return fields, "binary field %r cut short" % k
            n = int.from_bytes(data[nl + 1:nl + 9], "little")
            v = data[nl + 9:nl + 9 + n]
            if data[nl + 9 + n:nl + 10 + n] != b"\n":
                return fields, "binary field %r not ended by a newline" % k
            i = nl + 10 + n
        fields.setdefault(k.decode("latin-1"), []).append(
            v.decode("utf-8", "replace"))
    return fields, None


def cmd_journal(path, log):
    """Stand in for journald: bind its socket and write each entry the
    protocol delivers (a datagram, or a sealed memfd passed as the only
    payload when the entry is too large for one) as a JSON line."""
    import array
    import json
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    os.chmod(path, 0o666)
    with open(log, "a") as out:
        while True:
            fds = array.array("i")
            data, anc, _, _ = s.recvmsg(1 << 20, socket.CMSG_SPACE(4 * 4))
            for lvl, typ, cdata in anc:
                if lvl == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                    fds.frombytes(cdata[:len(cdata) - len(cdata) % 4])
            via = "datagram"
            for fd in fds:
                data = os.pread(fd, 1 << 24, 0)
                os.close(fd)
                via = "memfd"
            fields, problem = journal_parse(data)
            out.write(json.dumps({"via": via, "fields": fields,
                                  "problem": problem}) + "\n")
            out.flush()


def tcp_pair():
    """A connected TCP pair on loopback: (client end, accepted end)."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    c = socket.create_connection(ls.getsockname())
    a, _ = ls.accept()
    ls.close()
    return c, a


def cmd_handoff(path, *steps):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(3)
    s.connect(path)
    for step in steps:
        try:
            out = handoff_step(s, step)
        except OSError as e:
            out = "error " + e.__class__.__name__
        print(step.split(":", 1)[0], out, flush=True)


def handoff_step(s, step):
    if step == "hello":
        s.sendall(b"\0")
        try:
            b = s.recv(64)
        except socket.timeout:
            return "timeout"
        return "closed" if not b else "answer " + \
            b.decode("latin-1").split("\r")[0]
    if step == "alive":
        time.sleep(0.3)
        s.setblocking(False)
        try:
            b = s.recv(1)
            return "closed" if not b else "data"
        except BlockingIOError:
            return "open"
        except OSError:
            return "closed"
        finally:
            s.settimeout(3)
    if step.startswith("get:"):
        c, a = tcp_pair()
        socket.send_fds(s, [b"\1"], [a.fileno()])
        a.close()
        url = step[4:]
        host = url.split("/")[2]
        c.settimeout(5)
        c.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close"
                   "\r\n\r\n" % (url, host)).encode())
        try:
            b = c.recv(4096)
        except socket.timeout:
            return "timeout"
        finally:
            c.close()
        return "closed" if not b else b.decode("latin-1").split("\r")[0]
    held = []
    if step == "pipe":
        r, w = os.pipe()
        held, fds, byte = [r, w], [r], b"\1"
    elif step == "unix":
        x, y = socket.socketpair()
        held, fds, byte = [x, y], [x.fileno()], b"\1"
    elif step == "listen":
        x = socket.socket()
        x.bind(("127.0.0.1", 0))
        x.listen(1)
        held, fds, byte = [x], [x.fileno()], b"\1"
    elif step == "unconnected":
        x = socket.socket()
        held, fds, byte = [x], [x.fileno()], b"\1"
    elif step == "two":
        c1, a1 = tcp_pair()
        c2, a2 = tcp_pair()
        held, fds, byte = [c1, a1, c2, a2], [a1.fileno(), a2.fileno()], b"\1"
    elif step == "nofd":
        s.sendall(b"\1")
        return "sent"
    else:
        raise SystemExit("handoff: unknown step " + step)
    socket.send_fds(s, [byte], fds)
    for h in held:
        h.close() if hasattr(h, "close") else os.close(h)
    return "sent"


if __name__ == "__main__":
    cmd = sys.argv[1]
    args = sys.argv[2:]
    {"server": cmd_server, "bridge": cmd_bridge, "raw": cmd_raw,
     "tls": cmd_tls, "batch": cmd_batch, "dns": cmd_dns,
     "ride": cmd_ride, "journal": cmd_journal,
     "handoff": cmd_handoff}[cmd](*args)
