#!/usr/bin/env python3
"""fxapi.py: the worked example's internal FX-rate API, a stand-in for
api.fx-rates.internal.  deploy/sbx-up starts it on loopback as its own
unprivileged user and egressd's hosts file maps the name to 127.0.0.1.
It serves plain HTTP on --port and, with --tls-port, HTTPS on a second
port, with a certificate from a test CA that sbx-up makes and egressd's
upstream_cas trusts.  sbx-up gives the HTTPS side the name
api.fx-rates.internal (the worked example's: tunnelled clients reach it
through egressd's TLS interception, and egressd adds the credential only
there) and the plain side api-http.fx-rates.internal.

It answers GET /v1/rates?base=CUR with JSON, and only when the request's
Authorization header equals the token in TOKEN_FILE exactly: the sandboxed
code never holds that token, egressd adds it (brokerd's secret
fx-readonly).  So a 200 here proves the credential path works, and a 401
proves a request arrived without it.  The token is read once at start and
never logged; each request is logged as one line (method, path, status,
whether a credential was present, scheme) so tests can see what reached
the API.

    fxapi.py [--host 127.0.0.1] --port N --token-file FILE [--log FILE]
             [--tls-port N --tls-cert FILE --tls-key FILE]
"""
import argparse
import ctypes
import hmac
import json
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

# Units of each currency per 1 USD, fixed for 2026-Q3.
PER_USD = {"USD": 1.0, "EUR": 0.9210, "GBP": 0.7874, "CHF": 0.8842,
           "JPY": 147.35}


def set_comm(name):
    """Name the process (ps, /proc/PID/comm) so sbx-down can tell it is
    ours before it signals the pid in the pid file."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(15, name.encode(), 0, 0, 0)   # PR_SET_NAME
    except (OSError, AttributeError):
        pass


class Handler(BaseHTTPRequestHandler):
    server_version = "fxapi/1"
    protocol_version = "HTTP/1.1"

    def reply(self, status, obj):
        body = (json.dumps(obj, sort_keys=True) + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_request(self, code="-", size="-"):
        pass                                # one line per request, below

    def note(self, status, cred):
        line = "%s %s %s %s credential=%s scheme=%s\n" % (
            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            self.command, urlsplit(self.path).path[:200], status,
            "yes" if cred else "no", self.server.scheme)
        with self.server.loglock:
            self.server.logf.write(line)
            self.server.logf.flush()

    def handle_any(self):
        auth = self.headers.get("Authorization")
        ok = auth is not None and hmac.compare_digest(
            auth.encode(), self.server.token)
        u = urlsplit(self.path)
        if not ok:
            status, obj = 401, {"error": "missing or wrong Authorization"}
        elif self.command not in ("GET", "HEAD"):
            status, obj = 405, {"error": "method not allowed"}
        elif u.path != "/v1/rates":
            status, obj = 404, {"error": "no such resource"}
        else:
            base = parse_qs(u.query).get("base", ["USD"])[0].upper()
            if base not in PER_USD:
                status, obj = 400, {"error": "unknown base currency"}
            else:
                status = 200
                obj = {"base": base, "date": "2026-09-30",
                       "source": "api.fx-rates.internal",
                       "rates": {c: round(v / PER_USD[base], 6)
                                 for c, v in PER_USD.items()}}
        self.note(status, auth is not None)
        self.reply(status, obj)

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = handle_any


class TLSHandler(Handler):
    """The handshake runs here, in the connection's own thread (the
    listening socket does not shake hands in accept), so a client that
    stalls mid-handshake holds up nobody else."""
    timeout = 30

    def setup(self):
        super().setup()
        self.connection.do_handshake()


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # One line, not a traceback: a client that hangs up or fails the
        # handshake is not the server's error.
        e = sys.exc_info()[1]
        with self.loglock:
            self.logf.write("fxapi: %s connection from %s:%d: %s\n" % (
                self.scheme, client_address[0], client_address[1],
                type(e).__name__))
            self.logf.flush()


def serve(host, port, handler, scheme, token, logf, lock, ctx=None):
    srv = Server((host, port), handler)
    if ctx is not None:
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True,
                                     do_handshake_on_connect=False)
    srv.token = token
    srv.logf = logf
    srv.loglock = lock
    srv.scheme = scheme
    with lock:
        logf.write("fxapi: listening on %s:%d (%s)\n" % (host, port, scheme))
        logf.flush()
    return srv


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--token-file", required=True)
    ap.add_argument("--log", default="-")
    ap.add_argument("--tls-port", type=int)
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    a = ap.parse_args()
    tls = (a.tls_port, a.tls_cert, a.tls_key)
    if any(x is not None for x in tls) and not all(x is not None for x in tls):
        ap.error("--tls-port, --tls-cert and --tls-key go together")
    with open(a.token_file, "rb") as f:
        token = f.read().strip()
    if not token:
        sys.exit("fxapi: %s is empty" % a.token_file)
    ctx = None
    if a.tls_port is not None:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            ctx.load_cert_chain(a.tls_cert, a.tls_key)
        except (OSError, ssl.SSLError) as e:
            sys.exit("fxapi: %s, %s: %s" % (a.tls_cert, a.tls_key, e))
    set_comm("fxapi")
    logf = sys.stdout if a.log == "-" else open(a.log, "a")
    lock = threading.Lock()
    srv = serve(a.host, a.port, Handler, "http", token, logf, lock)
    if ctx is not None:
        tsrv = serve(a.host, a.tls_port, TLSHandler, "https", token, logf,
                     lock, ctx)
        threading.Thread(target=tsrv.serve_forever, daemon=True).start()
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
