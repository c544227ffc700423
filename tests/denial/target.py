#!/usr/bin/env python3
"""target.py: the canary target, the one host the canary template allows.

    target.py [--host 127.0.0.1] [--port 8419] [--redirect-to URL]

GET or POST /ok answers 200 "ok" (the probes' controls, and the allowed
requests that spend the egress budget); any request for /redirect answers
302 to --redirect-to (default http://exfil.invalid/steal), a host no
template allows, so egressd must stop it at the redirect.  It holds
nothing and trusts nothing: it is there so the redirect and budget probes
have an allowed host to talk to.  tests/denial/run starts it on a free
loopback port; a deployment running `sbxctl canary` runs it where egressd
can reach it (sbxctl(8), CANARY).  One log line per request on stdout.
"""
import argparse
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    server_version = "sbx-canary-target/1"
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n > 0:
            self.rfile.read(min(n, 1 << 20))
        path = self.path.split("?", 1)[0]
        if path == "/redirect":
            status, body = 302, b"moved\n"
        elif path == "/ok":
            status, body = 200, b"ok\n"
        else:
            status, body = 404, b"no such resource\n"
        self.send_response(status)
        if status == 302:
            self.send_header("Location", self.server.redirect_to)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        sys.stdout.write("%s %s %s %d\n" % (
            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            self.command, self.path[:200], status))
        sys.stdout.flush()

    do_GET = do_POST = do_HEAD = answer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8419)
    ap.add_argument("--redirect-to", default="http://exfil.invalid/steal")
    a = ap.parse_args()
    srv = ThreadingHTTPServer((a.host, a.port), Handler)
    srv.daemon_threads = True
    srv.redirect_to = a.redirect_to
    print("listening on %s:%d" % (a.host, srv.server_address[1]), flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
