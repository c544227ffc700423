#!/usr/bin/env python3
"""tests/differential/py_server.py: the Python upstream of the differential
harness (tests/differential/run).  Python's http.server
(BaseHTTPRequestHandler, HTTP/1.1, one thread a connection) parses every
request; the handler records what it got, one JSON line a request, and
answers "ok".  A request http.server refuses is recorded as an error.

  python3 py_server.py PORT LOG

http.server leaves the body to the application.  This one reads it the
way RFC 9112 section 6.3 says a server must, with the standard library's
own pieces: a Transfer-Encoding whose last coding is chunked is decoded
by http.client's chunked reader (the one Python uses for responses), any
other Transfer-Encoding is answered 501 and the connection closed;
otherwise Content-Length is read as Python applications read it,
int(self.headers["Content-Length"]).  Every method reaches the handler.

Each line: {"conn", "peer", "n", "method", "target", "host", "hosts",
"body", "version", "route"} ("route": the path
SimpleHTTPRequestHandler.translate_path would serve), {"conn", "peer", "n", "error"} for a request refused,
or {"conn", "peer", "closed": true} once the connection is done (after
every other line of it).
"""
import http.client
import http.server
import itertools
import json
import posixpath
import sys
import urllib.parse
import threading

LOCK = threading.Lock()
CONNS = itertools.count(1)


class _NoClose:
    """rfile as http.client's reader sees it: closing it must not close
    the connection's stream (the next request is read from it)."""

    def __init__(self, f):
        self.f = f

    def route(self):
        """The path SimpleHTTPRequestHandler.translate_path would serve:
        decoded once, then normalised as a POSIX path."""
        path = self.path.split("?", 1)[0].split("#", 1)[0]
        trailing = path.rstrip().endswith("/")
        try:
            path = urllib.parse.unquote(path, errors="surrogatepass")
        except UnicodeDecodeError:
            path = urllib.parse.unquote(path)
        path = posixpath.normpath(path)
        return path + "/" if trailing and not path.endswith("/") else path

    def __getattr__(self, name):
        return getattr(self.f, name)

    def close(self):
        pass


def read_chunked(rfile):
    r = http.client.HTTPResponse.__new__(http.client.HTTPResponse)
    r.fp = _NoClose(rfile)
    r.chunked = True
    r.chunk_left = None
    r.length = None
    return r._read_chunked()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    log_path = None

    def setup(self):
        super().setup()
        self.conn_id = next(CONNS)
        self.nreq = 0

    def finish(self):
        super().finish()
        # The harness waits for this line before it reads the others.
        self.record({"closed": True})

    def log_message(self, *a):
        pass

    def record(self, o):
        o = dict({"conn": self.conn_id, "peer": self.client_address[1]}, **o)
        with LOCK, open(self.log_path, "a") as f:
            f.write(json.dumps(o) + "\n")

    def send_error(self, code, message=None, explain=None):
        self.record({"n": self.nreq + 1, "error": code,
                     "why": message or ""})
        super().send_error(code, message, explain)

    def handle_any(self):
        self.nreq += 1
        te = self.headers.get_all("Transfer-Encoding")
        try:
            if te:
                codings = [c.strip().lower()
                           for c in ",".join(te).split(",")]
                if codings[-1] != "chunked":
                    self.nreq -= 1
                    self.close_connection = True
                    self.send_error(501, "transfer coding not understood")
                    return
                body = read_chunked(self.rfile)
            else:
                cl = self.headers.get("Content-Length")
                n = int(cl) if cl is not None else 0
                body = self.rfile.read(n) if n > 0 else b""
                if len(body) < n:
                    raise http.client.IncompleteRead(body, n - len(body))
        except (ValueError, http.client.HTTPException, OSError) as e:
            self.record({"n": self.nreq, "error": type(e).__name__})
            self.close_connection = True
            return
        self.record({"n": self.nreq, "method": self.command,
                     "target": self.path, "route": self.route(),
                     "host": self.headers.get("Host"),
                     "hosts": self.headers.get_all("Host") or [],
                     "body": len(body), "version": self.request_version})
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", "3")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(b"ok\n")

    def route(self):
        """The path SimpleHTTPRequestHandler.translate_path would serve:
        decoded once, then normalised as a POSIX path."""
        path = self.path.split("?", 1)[0].split("#", 1)[0]
        trailing = path.rstrip().endswith("/")
        try:
            path = urllib.parse.unquote(path, errors="surrogatepass")
        except UnicodeDecodeError:
            path = urllib.parse.unquote(path)
        path = posixpath.normpath(path)
        return path + "/" if trailing and not path.endswith("/") else path

    def __getattr__(self, name):
        if name.startswith("do_"):
            return self.handle_any
        raise AttributeError(name)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass


def main():
    Handler.log_path = sys.argv[2]
    srv = Server(("127.0.0.1", int(sys.argv[1])), Handler)
    print("ready", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
