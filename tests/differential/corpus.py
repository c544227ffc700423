#!/usr/bin/env python3
"""tests/differential/corpus.py: the requests the differential harness
(tests/differential/run) sends, each the raw bytes a sandbox could write
to egressd as a forward proxy.  Hand-written cases and generated ones
(the same mutation applied to every header that matters, every
Content-Length and Transfer-Encoding spelling, every chunk-size form,
every path trick), grouped by category; README.md describes each
category and what it is after.

A case is (id, category, description, template[, want]).  The template
is bytes in which {AUTH} stands for HOST:PORT of the upstream the case is
sent to, {HOST} for its name alone and {PORT} for its port; run fills
them in, so the same case goes to nginx, Node and Python alike.  want
"forward" marks an ordinary request egressd must forward (so the harness
cannot pass by egressd refusing everything); everything else is judged
by the invariants alone.

  corpus.py                 list the cases (id, category, description)
  corpus.py --seeds DIR HOST PORT
                            write each case, filled in, to DIR/<id> (the
                            seeds of the egress_fuzz target)

Nothing here is random: the ids and bytes are the same on every run.
"""
import os
import sys

CASES = []
SEEN = set()


def add(cat, desc, data, want=None):
    if isinstance(data, str):
        data = data.encode("latin-1")
    if data in SEEN:
        return          # the same bytes reached from another category
    SEEN.add(data)
    n = sum(1 for c in CASES if c[1] == cat) + 1
    cid = "%s-%03d" % (cat, n)
    CASES.append((cid, cat, desc, data, want))


RL = "GET http://{AUTH}/v1/x HTTP/1.1\r\n"
H = "Host: {AUTH}\r\n"


def post(headers, body, path="/v1/x", method="POST"):
    return "%s http://{AUTH}%s HTTP/1.1\r\n%s%s\r\n%s" % (
        method, path, H, headers, body)


# ---- baseline: ordinary requests every server reads alike ----------------
def baseline():
    for m in ("GET", "HEAD", "DELETE", "OPTIONS"):
        add("baseline", "%s, no body" % m,
            "%s http://{AUTH}/v1/x HTTP/1.1\r\n%s\r\n" % (m, H), "forward")
    for m in ("POST", "PUT", "PATCH"):
        add("baseline", "%s with a Content-Length body" % m,
            post("Content-Length: 5\r\n", "hello", method=m), "forward")
    add("baseline", "POST with a chunked body",
        post("Transfer-Encoding: chunked\r\n", "5\r\nhello\r\n0\r\n\r\n"),
        "forward")
    add("baseline", "POST with two chunks",
        post("Transfer-Encoding: chunked\r\n",
             "3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n"), "forward")
    add("baseline", "POST, Content-Length 0", post("Content-Length: 0\r\n", ""),
        "forward")
    add("baseline", "GET with a query",
        "GET http://{AUTH}/v1/x?a=1&b=two HTTP/1.1\r\n" + H + "\r\n", "forward")
    add("baseline", "GET with a query and no path",
        "GET http://{AUTH}?a=1 HTTP/1.1\r\n" + H + "\r\n")
    add("baseline", "GET of the rule's own prefix",
        "GET http://{AUTH}/v1/ HTTP/1.1\r\n" + H + "\r\n", "forward")
    add("baseline", "GET of a deeper path",
        "GET http://{AUTH}/v1/a/b/c.json HTTP/1.1\r\n" + H + "\r\n", "forward")
    add("baseline", "GET with ordinary headers",
        RL + H + "User-Agent: curl/7.88\r\nAccept: */*\r\n"
        "Accept-Encoding: gzip\r\n\r\n", "forward")
    add("baseline", "GET, Connection: close",
        RL + H + "Connection: close\r\n\r\n", "forward")
    add("baseline", "GET, Connection: keep-alive",
        RL + H + "Connection: keep-alive\r\n\r\n", "forward")
    add("baseline", "GET, Proxy-Connection: keep-alive",
        RL + H + "Proxy-Connection: keep-alive\r\n\r\n", "forward")
    add("baseline", "HTTP/1.0 GET with Host",
        "GET http://{AUTH}/v1/x HTTP/1.0\r\n" + H + "\r\n", "forward")
    add("baseline", "POST with Expect: 100-continue",
        post("Content-Length: 5\r\nExpect: 100-continue\r\n", "hello"),
        "forward")
    add("baseline", "percent-encoded space in the path",
        "GET http://{AUTH}/v1/a%20b HTTP/1.1\r\n" + H + "\r\n", "forward")
    add("baseline", "percent-encoded unreserved characters",
        "GET http://{AUTH}/v1/%41%42c HTTP/1.1\r\n" + H + "\r\n", "forward")
    add("baseline", "a binary body",
        post("Content-Length: 8\r\nContent-Type: application/octet-stream"
             "\r\n", "\x00\x01\r\n\xff\xfe\"\\"), "forward")
    add("baseline", "a 4 KiB body",
        post("Content-Length: 4096\r\n", "b" * 4096), "forward")
    add("baseline", "a body of CRLFs",
        post("Content-Length: 6\r\n", "\r\n\r\n\r\n"), "forward")
    add("baseline", "Host without the port (the URL has one)",
        RL + "Host: {HOST}\r\n\r\n")
    add("baseline", "a path outside the rule (refused by policy)",
        "GET http://{AUTH}/admin HTTP/1.1\r\n" + H + "\r\n")
    add("baseline", "a host outside the policy",
        "GET http://evil.test:{PORT}/v1/x HTTP/1.1\r\n"
        "Host: evil.test:{PORT}\r\n\r\n")
    add("baseline", "a method the rule does not list",
        "TRACE http://{AUTH}/v1/x HTTP/1.1\r\n" + H + "\r\n")
    add("baseline", "no Host header (HTTP/1.1)", RL + "\r\n")
    add("baseline", "no Host header (HTTP/1.0)",
        "GET http://{AUTH}/v1/x HTTP/1.0\r\n\r\n")
    add("baseline", "an empty header value", RL + H + "X-Empty:\r\n\r\n",
        "forward")
    add("baseline", "header value with inner spaces and tabs",
        RL + H + "X-A: a b\tc\r\n\r\n", "forward")
    add("baseline", "header value with trailing whitespace",
        RL + H + "X-A: abc \t\r\n\r\n", "forward")
    add("baseline", "header value with no space after the colon",
        RL + "Host:{AUTH}\r\n\r\n", "forward")
    add("baseline", "header value with obs-text (high bytes)",
        RL + H + "X-A: caf\xe9\r\n\r\n")
    add("baseline", "header names in odd case",
        "GET http://{AUTH}/v1/x HTTP/1.1\r\nhOsT: {AUTH}\r\n"
        "x-LOWER-upper: 1\r\n\r\n", "forward")
    add("baseline", "header names with every token character",
        RL + H + "!#$%&'*+-.^_`|~09azAZ: tchar\r\n\r\n", "forward")


# ---- whitespace and obs-fold in the head ---------------------------------
# The headers whose reading decides framing or routing, each with an
# ordinary value of its own.
FRAMING = [
    ("Host", "{AUTH}", ""),
    ("Content-Length", "5", "hello"),
    ("Transfer-Encoding", "chunked", "5\r\nhello\r\n0\r\n\r\n"),
    ("Connection", "close", ""),
    ("Expect", "100-continue", ""),
    ("Upgrade", "websocket", ""),
    ("X-Forwarded-For", "10.0.0.1", ""),
    ("X-Test", "1", ""),
]


def ws_name(name, how):
    """The header name spelt with whitespace, as a field line prefix."""
    if how == "sp-colon":
        return name + " :"
    if how == "tab-colon":
        return name + "\t:"
    if how == "two-sp-colon":
        return name + "  :"
    if how == "lead-sp":
        return " " + name + ":"
    if how == "lead-tab":
        return "\t" + name + ":"
    if how == "inner-sp":
        k = max(1, len(name) // 2)
        return name[:k] + " " + name[k:] + ":"
    if how == "inner-tab":
        k = max(1, len(name) // 2)
        return name[:k] + "\t" + name[k:] + ":"
    if how == "vt-colon":
        return name + "\x0b:"
    if how == "ff-colon":
        return name + "\x0c:"
    if how == "nul-colon":
        return name + "\x00:"
    raise ValueError(how)


def whitespace():
    hows = ("sp-colon", "tab-colon", "two-sp-colon", "lead-sp", "lead-tab",
            "inner-sp", "inner-tab", "vt-colon", "ff-colon", "nul-colon")
    for name, value, body in FRAMING:
        for how in hows:
            field = "%s %s\r\n" % (ws_name(name, how), value)
            if name == "Host":
                data = RL + field + "\r\n"
                data2 = RL + H + field + "\r\n"
                add("whitespace", "Host spelt %s, alone" % how, data)
                add("whitespace", "Host spelt %s, after a good Host" % how,
                    data2)
            else:
                add("whitespace", "%s spelt %s" % (name, how),
                    post(field, body))
    # obs-fold: a line that starts with SP or HTAB continues the last one.
    for name, value, body in FRAMING:
        for fold in (" ", "\t", "  ", " \t"):
            if name == "Host":
                add("whitespace", "Host value folded (%r)" % fold,
                    RL + "Host:\r\n%s{AUTH}\r\n\r\n" % fold)
            else:
                add("whitespace", "%s value folded (%r)" % (name, fold),
                    post("%s:\r\n%s%s\r\n" % (name, fold, value), body))
    add("whitespace", "obs-fold continuing an X- header into Host-like text",
        RL + H + "X-A: a\r\n Host: evil.test\r\n\r\n")
    add("whitespace", "obs-fold as the first header line",
        RL + " X-A: a\r\n" + H + "\r\n")
    add("whitespace", "a whitespace-only line before the request line",
        " \r\n" + RL + H + "\r\n")
    add("whitespace", "a CRLF before the request line",
        "\r\n" + RL + H + "\r\n")
    add("whitespace", "two CRLFs before the request line",
        "\r\n\r\n" + RL + H + "\r\n")
    # egressd checks a head up to the first CRLF CRLF: empty lines before
    # the request line end that early, and the real head follows them.
    for lead in ("\r\n\r\n", "\r\n\r\n\r\n"):
        for what, head in (
                ("a control byte in a value", RL + H + "X-A: a\x01b\r\n"),
                ("a control byte opening a value", RL + H + "X-A:\x1eb\r\n"),
                ("bare LF line endings", RL.replace("\r\n", "\n") +
                 H.replace("\r\n", "\n")),
                ("obs-fold", RL + H + "X-A: a\r\n b\r\n"),
                ("a bare CR in a value", RL + H + "X-A: a\rb\r\n"),
                ("a DEL in a value", RL + H + "X-A: a\x7fb\r\n")):
            add("whitespace", "%d empty lines, then a head with %s" % (
                lead.count("\n"), what), lead + head + "\r\n")
    add("whitespace", "a tab line before the request line",
        "\t\r\n" + RL + H + "\r\n")
    add("whitespace", "a space before the method", " " + RL + H + "\r\n")
    add("whitespace", "whitespace-only header line",
        RL + H + " \r\n\r\n")
    add("whitespace", "header line with no colon",
        RL + H + "X-A\r\n\r\n")
    add("whitespace", "header line that is only a colon",
        RL + H + ":\r\n\r\n")
    add("whitespace", "header with an empty name", RL + H + ": v\r\n\r\n")
    add("whitespace", "bare LF ends the head", RL + H + "\n")
    add("whitespace", "bare LF line endings throughout",
        "GET http://{AUTH}/v1/x HTTP/1.1\nHost: {AUTH}\n\n")
    add("whitespace", "bare LF inside the head",
        RL + "X-A: a\n" + H + "\r\n")
    add("whitespace", "bare CR inside a value", RL + H + "X-A: a\rb\r\n\r\n")
    add("whitespace", "bare CR ends a header line",
        RL + "X-A: a\r" + H + "\r\n")
    add("whitespace", "CR CR LF ends a header line",
        RL + H + "X-A: a\r\r\n\r\n")
    add("whitespace", "NUL inside a value", RL + H + "X-A: a\x00b\r\n\r\n")
    add("whitespace", "DEL inside a value", RL + H + "X-A: a\x7fb\r\n\r\n")
    add("whitespace", "a control byte inside a value",
        RL + H + "X-A: a\x01b\r\n\r\n")
    add("whitespace", "Content-Length value with a tab before it",
        post("Content-Length:\t5\r\n", "hello"))
    add("whitespace", "Content-Length value with spaces around it",
        post("Content-Length:  5  \r\n", "hello"))
    add("whitespace", "Transfer-Encoding value with a tab before it",
        post("Transfer-Encoding:\tchunked\r\n", "5\r\nhello\r\n0\r\n\r\n"))
    add("whitespace", "request line ends with bare CR",
        "GET http://{AUTH}/v1/x HTTP/1.1\r" + H + "\r\n")


# ---- duplicate and conflicting headers ----------------------------------
CL_VALUES = [
    ("5", "hello"), ("+5", "hello"), ("-5", "hello"), ("05", "hello"),
    ("005", "hello"), ("0x5", "hello"), ("0X05", "hello"), (" 5", "hello"),
    ("5 ", "hello"), ("5 5", "hello"), ("5,5", "hello"), ("5, 5", "hello"),
    ("5,6", "hello!"), ("5.0", "hello"), ("5e0", "hello"), ("", ""),
    ("a", ""), ("5a", "hello"), ("\t5", "hello"), ("5\t", "hello"),
    ("1_0", "helloworld"), ("\xd9\xa5", "hello"), ("00000000000000000005", "hello"),
    ("99999999999999999999", "hello"), ("18446744073709551616", "hello"),
    ("4294967301", "hello"), ("-0", ""), ("+0", ""), ("0", ""),
    ("5;", "hello"), ("\"5\"", "hello"),
]


def duplicate():
    for v, body in CL_VALUES:
        add("duplicate", "Content-Length %r" % v,
            post("Content-Length: %s\r\n" % v, body))
    pairs = [("5", "5", "hello"), ("5", "6", "hello!"), ("6", "5", "hello!"),
             ("0", "5", "hello"), ("5", "0", "hello"), ("5", "05", "hello"),
             ("5", "+5", "hello"), ("5", " 5", "hello"), ("5", "", "hello")]
    for a, b, body in pairs:
        add("duplicate", "two Content-Length: %r then %r" % (a, b),
            post("Content-Length: %s\r\nContent-Length: %s\r\n" % (a, b),
                 body))
    add("duplicate", "two Content-Length with a header between",
        post("Content-Length: 3\r\nX-A: 1\r\nContent-Length: 5\r\n", "hello"))
    add("duplicate", "Content-Length in two cases",
        post("Content-Length: 3\r\ncontent-length: 5\r\n", "hello"))
    hosts = [
        ("{AUTH}", "{AUTH}", "the same twice"),
        ("{AUTH}", "evil.test", "the URL's then another"),
        ("evil.test", "{AUTH}", "another then the URL's"),
        ("{AUTH}", "{HOST}", "with and without port"),
        ("{AUTH}", "", "the URL's then empty"),
        ("", "{AUTH}", "empty then the URL's"),
    ]
    for a, b, what in hosts:
        add("duplicate", "two Host headers: %s" % what,
            RL + "Host: %s\r\nHost: %s\r\n\r\n" % (a, b))
    add("duplicate", "two Host headers, second after other headers",
        RL + H + "X-A: 1\r\nX-B: 2\r\nHost: evil.test\r\n\r\n")
    add("duplicate", "Host in two cases",
        RL + H + "host: evil.test\r\n\r\n")
    add("duplicate", "Host as a list", RL + "Host: {AUTH}, evil.test\r\n\r\n")
    mism = [
        ("evil.test", "another host"),
        ("evil.test:{PORT}", "another host, same port"),
        ("{HOST}:1", "same host, another port"),
        ("{HOST}:80", "same host, port 80"),
        ("{HOST}:0{PORT}", "port with a leading zero"),
        ("{HOST}.:{PORT}", "trailing dot"),
        ("{HOST}..:{PORT}", "two trailing dots"),
        ("{HOST}:{PORT}:{PORT}", "port twice"),
        ("{HOST}:", "empty port"),
        ("user@{AUTH}", "userinfo"),
        ("{AUTH}@evil.test", "userinfo pointing elsewhere"),
        ("evil.test#@{AUTH}", "fragment trick"),
        ("{AUTH}/x", "path in Host"),
        ("{AUTH}?x", "query in Host"),
        ("{AUTH} evil.test", "space in Host"),
        ("{AUTH}\tx", "tab in Host"),
        ("[::1]:{PORT}", "IPv6 literal"),
        ("127.0.0.1:{PORT}", "IPv4 address"),
        ("\xe9vil.test", "non-ASCII"),
        ("{AUTH}\\evil.test", "backslash"),
        ("%65vil.test", "percent-encoded"),
    ]
    for hv, what in mism:
        add("duplicate", "Host and URL disagree: %s" % what,
            RL + "Host: %s\r\n\r\n" % hv)
    add("duplicate", "Host in upper case", RL + "Host: {AUTH}\r\n\r\n"
        .replace("{AUTH}", "{AUTHU}"))
    add("duplicate", "two Transfer-Encoding: chunked",
        post("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
             "5\r\nhello\r\n0\r\n\r\n"))
    add("duplicate", "two Connection headers",
        RL + H + "Connection: keep-alive\r\nConnection: close\r\n\r\n")
    add("duplicate", "Connection naming Host",
        RL + H + "Connection: Host\r\n\r\n")
    add("duplicate", "Connection naming Content-Length",
        post("Content-Length: 5\r\nConnection: Content-Length\r\n", "hello"))
    add("duplicate", "Connection naming Transfer-Encoding",
        post("Transfer-Encoding: chunked\r\nConnection: Transfer-Encoding\r\n",
             "5\r\nhello\r\n0\r\n\r\n"))
    add("duplicate", "two Expect headers",
        post("Content-Length: 5\r\nExpect: 100-continue\r\n"
             "Expect: 100-continue\r\n", "hello"))
    add("duplicate", "Expect other than 100-continue",
        post("Content-Length: 5\r\nExpect: 200-ok\r\n", "hello"))


# ---- Transfer-Encoding and Content-Length together -----------------------
TE_VALUES = [
    "chunked", "Chunked", "CHUNKED", "cHuNkEd", " chunked", "chunked ",
    "\tchunked", "chunked\t", "chunked, identity", "identity, chunked",
    "identity", "gzip, chunked", "chunked, gzip", "deflate", "chunked,",
    ",chunked", "chunked,,", "chunked;q=1", "chunked; x=y", "chunk",
    "chunkedx", "xchunked", "\"chunked\"", "chunked chunked",
    "chunked, chunked", "chunKed", "chunked\x0b", "\xe7hunked", "",
    "identity,chunked", "gzip,chunked",
]


def te_cl():
    chunked = "5\r\nhello\r\n0\r\n\r\n"
    for v in TE_VALUES:
        add("te-cl", "Transfer-Encoding %r" % v,
            post("Transfer-Encoding: %s\r\n" % v, chunked))
    for v in ("chunked", "Chunked", "chunked, identity", "identity",
              " chunked", "gzip, chunked", "chunk"):
        add("te-cl", "Transfer-Encoding %r with Content-Length first" % v,
            post("Content-Length: 4\r\nTransfer-Encoding: %s\r\n" % v,
                 chunked))
        add("te-cl", "Transfer-Encoding %r with Content-Length after" % v,
            post("Transfer-Encoding: %s\r\nContent-Length: 4\r\n" % v,
                 chunked))
    add("te-cl", "TE chunked and Content-Length 0",
        post("Transfer-Encoding: chunked\r\nContent-Length: 0\r\n", chunked))
    add("te-cl", "TE chunked and Content-Length covering the chunks",
        post("Transfer-Encoding: chunked\r\nContent-Length: %d\r\n"
             % len(chunked), chunked))
    add("te-cl", "TE identity then TE chunked (two headers)",
        post("Transfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n",
             chunked))
    add("te-cl", "TE chunked then TE identity (two headers)",
        post("Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n",
             chunked))
    add("te-cl", "TE gzip then TE chunked (two headers)",
        post("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n",
             chunked))
    add("te-cl", "TE with an empty header then chunked",
        post("Transfer-Encoding:\r\nTransfer-Encoding: chunked\r\n", chunked))
    add("te-cl", "TE chunked on HTTP/1.0",
        "POST http://{AUTH}/v1/x HTTP/1.0\r\n" + H +
        "Transfer-Encoding: chunked\r\n\r\n" + chunked)
    add("te-cl", "TE chunked on HTTP/1.0 with Content-Length",
        "POST http://{AUTH}/v1/x HTTP/1.0\r\n" + H +
        "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n" + chunked)
    add("te-cl", "TE chunked on a GET",
        "GET http://{AUTH}/v1/x HTTP/1.1\r\n" + H +
        "Transfer-Encoding: chunked\r\n\r\n" + chunked)
    add("te-cl", "Transfer-Encoding in the trailer",
        post("Transfer-Encoding: chunked\r\n",
             "5\r\nhello\r\n0\r\nTransfer-Encoding: chunked\r\n\r\n"))
    add("te-cl", "Content-Length in the trailer",
        post("Transfer-Encoding: chunked\r\n",
             "5\r\nhello\r\n0\r\nContent-Length: 50\r\n\r\n"))
    add("te-cl", "Host in the trailer",
        post("Transfer-Encoding: chunked\r\n",
             "5\r\nhello\r\n0\r\nHost: evil.test\r\n\r\n"))
    add("te-cl", "TE: chunked with Content-Length before a second request",
        post("Content-Length: 35\r\nTransfer-Encoding: chunked\r\n",
             "0\r\n\r\nGET /v1/smuggled HTTP/1.1\r\nX: y\r\n\r\n"))
    add("te-cl", "TE listed in Connection",
        post("Transfer-Encoding: chunked\r\nConnection: close, "
             "Transfer-Encoding\r\n", chunked))
    add("te-cl", "TE header (the request's own, not Transfer-Encoding)",
        RL + H + "TE: trailers\r\n\r\n")
    add("te-cl", "Content-Length with a body shorter than it",
        post("Content-Length: 10\r\n", "hello"))
    add("te-cl", "Content-Length with a body longer than it",
        post("Content-Length: 3\r\n", "hello"))
    add("te-cl", "GET with a Content-Length body",
        "GET http://{AUTH}/v1/x HTTP/1.1\r\n" + H +
        "Content-Length: 5\r\n\r\nhello")
    add("te-cl", "HEAD with a Content-Length body",
        "HEAD http://{AUTH}/v1/x HTTP/1.1\r\n" + H +
        "Content-Length: 5\r\n\r\nhello")
    add("te-cl", "POST with neither Content-Length nor TE, then bytes",
        post("", "hello"))
    # Found by forward_fuzz: libhttp-parser takes a name that starts with
    # Transfer-Encoding for one as soon as its 17th byte matches.
    add("te-cl", "a field named Transfer-Encoding and more, chunked",
        post("Transfer-Encodingst: a\r\nTransfer-Encoding: chunked\r\n",
             chunked))
    add("te-cl", "a field named Transfer-Encoding and more, alone",
        post("Transfer-Encoding-X: chunked\r\n", "hello"))


# ---- chunk sizes and extensions ------------------------------------------
def chunked_body(body, hdr="Transfer-Encoding: chunked\r\n"):
    return post(hdr, body)


CHUNKS = [
    ("leading zeros", "005\r\nhello\r\n0\r\n\r\n"),
    ("many leading zeros", "0000000000000000000005\r\nhello\r\n0\r\n\r\n"),
    ("upper-case hex", "A\r\nhelloworld\r\n0\r\n\r\n"),
    ("lower-case hex", "a\r\nhelloworld\r\n0\r\n\r\n"),
    ("last chunk 00", "5\r\nhello\r\n00\r\n\r\n"),
    ("last chunk 000000", "5\r\nhello\r\n000000\r\n\r\n"),
    ("0x prefix", "0x5\r\nhello\r\n0\r\n\r\n"),
    ("plus sign", "+5\r\nhello\r\n0\r\n\r\n"),
    ("minus sign", "-5\r\nhello\r\n0\r\n\r\n"),
    ("negative last chunk", "5\r\nhello\r\n-0\r\n\r\n"),
    ("space before the size", " 5\r\nhello\r\n0\r\n\r\n"),
    ("space after the size", "5 \r\nhello\r\n0\r\n\r\n"),
    ("tab after the size", "5\t\r\nhello\r\n0\r\n\r\n"),
    ("space before ;", "5 ;ext\r\nhello\r\n0\r\n\r\n"),
    ("tab before ;", "5\t;ext\r\nhello\r\n0\r\n\r\n"),
    ("extension", "5;ext\r\nhello\r\n0\r\n\r\n"),
    ("extension with value", "5;ext=val\r\nhello\r\n0\r\n\r\n"),
    ("extension with quoted value", "5;ext=\"v a l\"\r\nhello\r\n0\r\n\r\n"),
    ("extension with quoted CR LF", "5;ext=\"a\r\nb\"\r\nhello\r\n0\r\n\r\n"),
    ("extension with spaces around =", "5; ext = val\r\nhello\r\n0\r\n\r\n"),
    ("two extensions", "5;a=1;b=2\r\nhello\r\n0\r\n\r\n"),
    ("empty extension", "5;\r\nhello\r\n0\r\n\r\n"),
    ("extension on the last chunk", "5\r\nhello\r\n0;ext=1\r\n\r\n"),
    ("extension of 4 KiB", "5;" + "e" * 4096 + "\r\nhello\r\n0\r\n\r\n"),
    ("extension of 16 KiB", "5;" + "e" * 16384 + "\r\nhello\r\n0\r\n\r\n"),
    ("extension with a NUL", "5;a\x00b\r\nhello\r\n0\r\n\r\n"),
    ("extension with a bare LF", "5;a\nb\r\nhello\r\n0\r\n\r\n"),
    ("bare LF after the size", "5\nhello\r\n0\r\n\r\n"),
    ("bare LF after the data", "5\r\nhello\n0\r\n\r\n"),
    ("bare LF after the last chunk", "5\r\nhello\r\n0\n\r\n"),
    ("bare LF ends the body", "5\r\nhello\r\n0\r\n\n"),
    ("bare LF throughout", "5\nhello\n0\n\n"),
    ("bare CR after the size", "5\rhello\r\n0\r\n\r\n"),
    ("no CRLF after the data", "5\r\nhello0\r\n\r\n"),
    ("junk instead of CRLF after the data", "5\r\nhelloXX0\r\n\r\n"),
    ("data longer than the size", "3\r\nhello\r\n0\r\n\r\n"),
    ("data shorter than the size", "7\r\nhello\r\n0\r\n\r\n"),
    ("no final CRLF", "5\r\nhello\r\n0\r\n"),
    ("no last chunk", "5\r\nhello\r\n"),
    ("size of 2^32 + 5", "100000005\r\nhello\r\n0\r\n\r\n"),
    ("size of 2^64 + 5", "10000000000000005\r\nhello\r\n0\r\n\r\n"),
    ("size of 2^64 - 1", "ffffffffffffffff\r\nhello\r\n0\r\n\r\n"),
    ("size over 64 bits", "fffffffffffffffff\r\nhello\r\n0\r\n\r\n"),
    ("non-hex size", "zz\r\nhello\r\n0\r\n\r\n"),
    ("empty size", "\r\nhello\r\n0\r\n\r\n"),
    ("size with an underscore", "0_5\r\nhello\r\n0\r\n\r\n"),
    ("size in unicode digits", "\xd9\xa5\r\nhello\r\n0\r\n\r\n"),
    ("chunk of one byte each", "1\r\nh\r\n1\r\ne\r\n1\r\nl\r\n1\r\nl\r\n"
     "1\r\no\r\n0\r\n\r\n"),
    ("a zero-size chunk in the middle", "2\r\nhe\r\n0\r\n\r\n3\r\nllo\r\n"
     "0\r\n\r\n"),
    ("trailer field", "5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n"),
    ("two trailer fields", "5\r\nhello\r\n0\r\nX-T: 1\r\nX-U: 2\r\n\r\n"),
    ("trailer name with a space", "5\r\nhello\r\n0\r\nX-T : 1\r\n\r\n"),
    ("trailer with obs-fold", "5\r\nhello\r\n0\r\nX-T: 1\r\n 2\r\n\r\n"),
    ("trailer line without a colon", "5\r\nhello\r\n0\r\nX-T\r\n\r\n"),
    ("trailer holding a request head",
     "5\r\nhello\r\n0\r\nGET /v1/y HTTP/1.1\r\n\r\n"),
    ("data holding a chunk terminator",
     "a\r\n0\r\n\r\nhello\r\n0\r\n\r\n"),
    ("data holding a request head",
     "1d\r\nGET /v1/y HTTP/1.1\r\nX: 1\r\n\r\n\r\n0\r\n\r\n"),
]


def chunked():
    for desc, body in CHUNKS:
        add("chunked", desc, chunked_body(body))
    # Sizes in every spelling that means five, and some that do not.
    for size in ("5", "05", "0005", "5;", "5;x", "5 ", " 5", "5\t", "0x05",
                 "+05", "5;x=\"\"", "5;x=y;z", "5;;", "5;=", "5;x=\"\\\"\"",
                 "5;x=\"\\\r\n\"", "5;\t", "5; ", "5 ; x", "05;x=1"):
        body = "%s\r\nhello\r\n0\r\n\r\n" % size
        add("chunked", "chunk size %r" % size, chunked_body(body))
    for n in (1, 15, 16, 255, 256, 4095, 4096):
        add("chunked", "one chunk of %d bytes (size %x)" % (n, n),
            chunked_body("%x\r\n%s\r\n0\r\n\r\n" % (n, "c" * n)))
        add("chunked", "one chunk of %d bytes (size %X, upper case)" % (n, n),
            chunked_body("%X\r\n%s\r\n0\r\n\r\n" % (n, "d" * n)))


# ---- absolute-form and authority ----------------------------------------
def authority():
    targets = [
        ("http://{AUTH}/v1/x", "plain"),
        ("HTTP://{AUTH}/v1/x", "scheme in upper case"),
        ("Http://{AUTH}/v1/x", "scheme in mixed case"),
        ("http://{AUTHU}/v1/x", "host in upper case"),
        ("http://{HOST}.:{PORT}/v1/x", "trailing dot"),
        ("http://{HOST}..:{PORT}/v1/x", "two trailing dots"),
        ("http://.{HOST}:{PORT}/v1/x", "leading dot"),
        ("http://user@{AUTH}/v1/x", "userinfo"),
        ("http://user:pw@{AUTH}/v1/x", "userinfo with password"),
        ("http://@{AUTH}/v1/x", "empty userinfo"),
        ("http://evil.test@{AUTH}/v1/x", "userinfo naming another host"),
        ("http://{AUTH}@evil.test/v1/x", "the allowed host as userinfo"),
        ("http://{AUTH}:@evil.test/v1/x", "allowed host:port as userinfo"),
        ("http://{HOST}:0{PORT}/v1/x", "port with a leading zero"),
        ("http://{HOST}:+{PORT}/v1/x", "port with a plus sign"),
        ("http://{HOST}:{PORT}0/v1/x", "port times ten"),
        ("http://{HOST}:/v1/x", "empty port"),
        ("http://{HOST}/v1/x", "no port (80)"),
        ("http://{HOST}:80/v1/x", "port 80"),
        ("http://{HOST}:0/v1/x", "port 0"),
        ("http://{HOST}:65536/v1/x", "port 65536"),
        ("http://{HOST}:{PORT}:{PORT}/v1/x", "port twice"),
        ("http://[::1]:{PORT}/v1/x", "IPv6 loopback literal"),
        ("http://[::ffff:127.0.0.1]:{PORT}/v1/x", "IPv4-mapped IPv6"),
        ("http://[::1%25lo]:{PORT}/v1/x", "IPv6 with a zone id"),
        ("http://[{HOST}]:{PORT}/v1/x", "a name in brackets"),
        ("http://127.0.0.1:{PORT}/v1/x", "IPv4 loopback"),
        ("http://2130706433:{PORT}/v1/x", "IPv4 as one number"),
        ("http://0x7f.1:{PORT}/v1/x", "IPv4 in hex"),
        ("http://0177.0.0.1:{PORT}/v1/x", "IPv4 in octal"),
        ("http://127.1:{PORT}/v1/x", "IPv4 shortened"),
        ("http://{HOSTPCT}:{PORT}/v1/x", "percent-encoded host"),
        ("http://{HOSTPCTDOT}:{PORT}/v1/x", "percent-encoded dot in host"),
        ("http://{HOST}%00.evil.test:{PORT}/v1/x", "NUL in host"),
        ("http://{HOST}\\@evil.test:{PORT}/v1/x", "backslash in host"),
        ("http://{AUTH}\\v1\\x", "backslash as the path separator"),
        ("http://{HOSTIDN}:{PORT}/v1/x", "IDN look-alike of the host"),
        ("http://xn--{HOST}:{PORT}/v1/x", "punycode-looking host"),
        ("http://{HOST}\xe3\x80\x82:{PORT}/v1/x", "ideographic full stop"),
        ("http://{AUTH}", "no path at all"),
        ("http://{AUTH}?v1", "query with no path"),
        ("http://{AUTH}#/v1/x", "fragment instead of a path"),
        ("http://{AUTH}/v1/x#frag", "fragment after the path"),
        ("http://{AUTH}/v1/x#/../../admin", "fragment with dot segments"),
        ("http:/{AUTH}/v1/x", "one slash"),
        ("http:///{AUTH}/v1/x", "three slashes"),
        ("http:{AUTH}/v1/x", "no slashes"),
        ("http:\\\\{AUTH}/v1/x", "backslashes for slashes"),
        ("https://{AUTH}/v1/x", "https scheme"),
        ("ftp://{AUTH}/v1/x", "ftp scheme"),
        ("//{AUTH}/v1/x", "scheme-relative"),
        ("{AUTH}/v1/x", "no scheme"),
        ("/v1/x", "origin-form"),
        ("*", "asterisk-form"),
        ("http://evil.test:{PORT}/v1/x", "a host outside the policy"),
        ("http://{HOST}.evil.test:{PORT}/v1/x", "the host as a subdomain"),
        ("http://{AUTH} /v1/x", "space after the authority"),
        ("http://{HOST} :{PORT}/v1/x", "space before the port"),
    ]
    for t, what in targets:
        add("authority", "target %s" % what,
            "GET %s HTTP/1.1\r\nHost: {AUTH}\r\n\r\n" % t)
    # The same targets, with a Host that spells the target's own
    # authority (so only the target decides).
    same = [
        ("http://{AUTHU}/v1/x", "{AUTHU}", "upper case in both"),
        ("http://{HOST}.:{PORT}/v1/x", "{HOST}.:{PORT}",
         "trailing dot in both"),
        ("http://{HOST}:0{PORT}/v1/x", "{HOST}:0{PORT}",
         "leading-zero port in both"),
        ("http://user@{AUTH}/v1/x", "user@{AUTH}", "userinfo in both"),
        ("http://{HOSTPCT}:{PORT}/v1/x", "{HOSTPCT}:{PORT}",
         "percent-encoded host in both"),
        ("http://{HOST}/v1/x", "{HOST}", "no port in both"),
        ("http://{HOST}:80/v1/x", "{HOST}:80", "port 80 in both"),
    ]
    for t, hv, what in same:
        add("authority", "target and Host both spelt: %s" % what,
            "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (t, hv))


# ---- percent-encoding and dot segments in the path -----------------------
PATHS = [
    "/v1/../admin", "/v1/..", "/v1/../", "/v1/./x", "/v1/.", "/v1/x/..",
    "/v1/x/../..", "/v1/x/../../admin", "/v1/..;/admin", "/v1/..;x=1/admin",
    "/v1/.;/x", "/v1;/../admin", "/v1/;/../admin", "/v1/x;/../../admin",
    "/v1/%2e%2e/admin", "/v1/%2E%2E/admin", "/v1/%2e./admin",
    "/v1/.%2e/admin", "/v1/%2e/x", "/v1/%2E", "/v1/%252e%252e/admin",
    "/v1/%252E%252E/admin", "/v1/%25%32%65%25%32%65/admin",
    "/v1/%252e./admin", "/v1/..%252f..%252fadmin", "/v1/%252fadmin",
    "/v1/..%2fadmin", "/v1/..%2Fadmin", "/v1%2f..%2fadmin",
    "/v1/%2f%2e%2e%2fadmin", "/v1/x%2f", "/v1/..%5cadmin", "/v1/%5c..%5cadmin",
    "/v1/..\\admin", "/v1\\..\\admin", "/v1/x\\y", "//v1/x", "/v1//x",
    "//admin/../v1/x", "/v1///x", "///v1/x", "/v1/.../x", "/v1/..../x",
    "/v1/x%00", "/v1/x%00/../../admin", "/v1/%zz", "/v1/%", "/v1/%2",
    "/v1/%g0", "/v1/x?a=../../admin", "/v1/x?%2e%2e", "/v1/x;a=b",
    "/v1;a=b/x", "/v1/..%00/admin", "/v1/%u002e%u002e/admin",
    "/./v1/x", "/../v1/x", "/v1/%c0%ae%c0%ae/admin",
    "/v1/%c0%af", "/v1/\xc3\xa9", "/v1/\xff", "/V1/x", "/v1%2fx",
    "/v1/x%3f/../../admin", "/v1/x%23/../../admin", "/v1/x#/../../admin",
    "/v1/%2e%2e%2fadmin", "/v1/%2e%2e%5cadmin", "/v1/.%252e/admin",
    "/v1/%%32%65%%32%65/admin", "/v1/..%c0%afadmin", "/v1/x/%2e%2e",
    "/v1/x/.%2e", "/v1/%2E./admin", "/v1/x%20/../../admin",
    "/v1/\t/x", "/v1/x y", "/v1/x\"y", "/v1/x<y>", "/v1/x{y}",
    "/v1/x|y", "/v1/x^y", "/v1/x`y", "/v1/%7e", "/v1/~x", "/v1/x%2525",
    "/v1", "/v1x", "/v1?x", "/v1/%3b/../admin", "/v1/;x/../../admin",
]


def path():
    for p in PATHS:
        add("path", "path %r" % p,
            "GET http://{AUTH}%s HTTP/1.1\r\n%s\r\n" % (p, H))
    # The dangerous ones again on a POST with a body, so a server that
    # routes by the resolved path also reads a body.
    for p in ("/v1/../admin", "/v1/..;/admin", "/v1/%252e%252e/admin",
              "/v1/%2e%2e/admin", "/v1/..%2fadmin", "/v1\\..\\admin"):
        add("path", "POST to path %r" % p, post("Content-Length: 5\r\n",
                                                "hello", path=p))


# ---- request-line oddities ----------------------------------------------
def request_line():
    lines = [
        ("GET http://{AUTH}/v1/x HTTP/1.0", "HTTP/1.0"),
        ("GET http://{AUTH}/v1/x", "HTTP/0.9 (no version)"),
        ("GET http://{AUTH}/v1/x HTTP/0.9", "HTTP/0.9 named"),
        ("GET http://{AUTH}/v1/x HTTP/2.0", "HTTP/2.0"),
        ("GET http://{AUTH}/v1/x HTTP/1.2", "HTTP/1.2"),
        ("GET http://{AUTH}/v1/x HTTP/1.10", "HTTP/1.10"),
        ("GET http://{AUTH}/v1/x HTTP/01.1", "HTTP/01.1"),
        ("GET http://{AUTH}/v1/x HTTP/1", "HTTP/1"),
        ("GET http://{AUTH}/v1/x HTTP/3.0", "HTTP/3.0"),
        ("GET http://{AUTH}/v1/x http/1.1", "version in lower case"),
        ("GET http://{AUTH}/v1/x HTTPS/1.1", "HTTPS/1.1"),
        ("GET http://{AUTH}/v1/x HTTP/1.1 ", "a space after the version"),
        ("GET http://{AUTH}/v1/x HTTP/1.1\t", "a tab after the version"),
        ("GET  http://{AUTH}/v1/x HTTP/1.1", "two spaces after the method"),
        ("GET http://{AUTH}/v1/x  HTTP/1.1", "two spaces before the version"),
        ("GET\thttp://{AUTH}/v1/x\tHTTP/1.1", "tabs as separators"),
        ("GET\thttp://{AUTH}/v1/x HTTP/1.1", "a tab after the method"),
        ("GET http://{AUTH}/v1/x\tHTTP/1.1", "a tab before the version"),
        ("GET http://{AUTH}/v1/x HTTP/1.1 extra", "a fourth word"),
        ("GET http://{AUTH}/v1/x HTTP/1.1 HTTP/1.1", "two versions"),
        ("GET http://{AUTH}/v1/x http://{AUTH}/admin HTTP/1.1",
         "two targets"),
        ("GET http://{AUTH}/v1/x\x0bHTTP/1.1", "a vertical tab separator"),
        ("GET http://{AUTH}/v1/x\x00HTTP/1.1", "a NUL separator"),
        ("get http://{AUTH}/v1/x HTTP/1.1", "lower-case method"),
        ("Get http://{AUTH}/v1/x HTTP/1.1", "mixed-case method"),
        ("gEt http://{AUTH}/v1/x HTTP/1.1", "odd-case method"),
        ("post http://{AUTH}/v1/x HTTP/1.1", "lower-case POST"),
        ("FOO http://{AUTH}/v1/x HTTP/1.1", "unknown method FOO"),
        ("PROPFIND http://{AUTH}/v1/x HTTP/1.1", "WebDAV PROPFIND"),
        ("MKCOL http://{AUTH}/v1/x HTTP/1.1", "WebDAV MKCOL"),
        ("PURGE http://{AUTH}/v1/x HTTP/1.1", "PURGE"),
        ("SEARCH http://{AUTH}/v1/x HTTP/1.1", "SEARCH"),
        ("LINK http://{AUTH}/v1/x HTTP/1.1", "LINK"),
        ("QUERY http://{AUTH}/v1/x HTTP/1.1", "QUERY"),
        ("TRACE http://{AUTH}/v1/x HTTP/1.1", "TRACE"),
        ("CONNECT http://{AUTH}/v1/x HTTP/1.1", "CONNECT with a URL"),
        ("CONNECT {AUTH} HTTP/1.1", "CONNECT to an allowed host over plain"),
        ("GETX http://{AUTH}/v1/x HTTP/1.1", "GETX"),
        ("GE T http://{AUTH}/v1/x HTTP/1.1", "a space inside the method"),
        ("G-ET http://{AUTH}/v1/x HTTP/1.1", "a dash inside the method"),
        ("G_ET http://{AUTH}/v1/x HTTP/1.1", "an underscore in the method"),
        ("GET1 http://{AUTH}/v1/x HTTP/1.1", "a digit in the method"),
        ("GET! http://{AUTH}/v1/x HTTP/1.1", "a ! in the method"),
        ("G\xc9T http://{AUTH}/v1/x HTTP/1.1", "a high byte in the method"),
        ("%s http://{AUTH}/v1/x HTTP/1.1" % ("A" * 100), "a 100-byte method"),
        (" GET http://{AUTH}/v1/x HTTP/1.1", "a space before the method"),
        ("GET http://{AUTH}/v1/x HTTP/1.1\r\n" + H.strip() + "\r\n"
         "GET http://{AUTH}/v1/y HTTP/1.1", "a second request line as a header"),
        ("GET http://{AUTH}/v1/x?" + "q" * 2100 + " HTTP/1.1",
         "a URL of over 2048 bytes"),
        ("GET http://{AUTH}/v1/" + "p" * 1990 + " HTTP/1.1",
         "a URL just under 2048 bytes"),
        ("GET http://{AUTH}/v1/x HTTP/1.1\x00", "a NUL after the version"),
        ("GET http://{AUTH}/v1/x\x7f HTTP/1.1", "DEL in the target"),
    ]
    for line, what in lines:
        data = line + "\r\n" + H + "\r\n"
        add("request-line", what, data)
    add("request-line", "request line of only a method", "GET\r\n" + H + "\r\n")
    add("request-line", "empty request line then a request",
        " \t\r\n" + RL + H + "\r\n")
    add("request-line", "HTTP/1.0 with keep-alive",
        "GET http://{AUTH}/v1/x HTTP/1.0\r\n" + H +
        "Connection: keep-alive\r\n\r\n")
    add("request-line", "HTTP/1.0 POST with a body",
        "POST http://{AUTH}/v1/x HTTP/1.0\r\n" + H +
        "Content-Length: 5\r\n\r\nhello")
    add("request-line", "HTTP/1.0 POST without Content-Length",
        "POST http://{AUTH}/v1/x HTTP/1.0\r\n" + H + "\r\nhello")


# ---- pipelining ----------------------------------------------------------
def req(path="/v1/x", extra="", method="GET", body=""):
    return "%s http://{AUTH}%s HTTP/1.1\r\n%s%s\r\n%s" % (method, path, H,
                                                        extra, body)


def pipelining():
    add("pipelining", "two GETs in one write",
        req("/v1/a") + req("/v1/b"))
    add("pipelining", "three GETs in one write",
        req("/v1/a") + req("/v1/b") + req("/v1/c"))
    add("pipelining", "a POST then a GET",
        req("/v1/a", "Content-Length: 5\r\n", "POST", "hello") + req("/v1/b"))
    add("pipelining", "a chunked POST then a GET",
        req("/v1/a", "Transfer-Encoding: chunked\r\n", "POST",
            "5\r\nhello\r\n0\r\n\r\n") + req("/v1/b"))
    add("pipelining", "a GET then a path outside the rule",
        req("/v1/a") + req("/admin"))
    add("pipelining", "a path outside the rule then a GET",
        req("/admin") + req("/v1/a"))
    add("pipelining", "a GET then a host outside the policy",
        req("/v1/a") + "GET http://evil.test:{PORT}/v1/b HTTP/1.1\r\n"
        "Host: evil.test:{PORT}\r\n\r\n")
    add("pipelining", "a GET then an origin-form request",
        req("/v1/a") + "GET /admin HTTP/1.1\r\nHost: {AUTH}\r\n\r\n")
    add("pipelining", "Connection: close then a second request",
        req("/v1/a", "Connection: close\r\n") + req("/v1/b"))
    add("pipelining", "HTTP/1.0 then a second request",
        "GET http://{AUTH}/v1/a HTTP/1.0\r\n" + H + "\r\n" + req("/v1/b"))
    add("pipelining", "a body that holds a second request head (CL covers it)",
        req("/v1/a", "Content-Length: 53\r\n", "POST",
            "GET http://{AUTH}/admin HTTP/1.1\r\nHost: {AUTH}\r\n\r\n"
            .replace("{AUTH}", "evil.test:1")))
    add("pipelining", "a body shorter than Content-Length, then a request",
        req("/v1/a", "Content-Length: 30\r\n", "POST", "hello") +
        req("/v1/b"))
    add("pipelining", "a request hidden behind Content-Length with a space",
        req("/v1/a", "Content-Length : 25\r\n", "POST",
            "GET /admin HTTP/1.1\r\n\r\n") + req("/v1/b"))
    add("pipelining", "a request hidden behind Transfer-Encoding with a space",
        req("/v1/a", "Transfer-Encoding : chunked\r\n", "POST",
            "0\r\n\r\nGET /admin HTTP/1.1\r\nHost: {AUTH}\r\n\r\n"))
    add("pipelining", "a request hidden behind a chunked body with CL",
        req("/v1/a", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
            "POST", "0\r\n\r\nGET http://{AUTH}/admin HTTP/1.1\r\n" + H +
            "\r\n"))
    add("pipelining", "a GET with a body that is a request",
        req("/v1/a", "Content-Length: %d\r\n" % len(req("/admin")
            .replace("{AUTH}", "a.b:1")), "GET",
            req("/admin").replace("{AUTH}", "a.b:1")))
    add("pipelining", "a request hidden in a chunk extension",
        req("/v1/a", "Transfer-Encoding: chunked\r\n", "POST",
            "5;x=\"\r\n\r\nGET /admin HTTP/1.1\r\n\r\n\"\r\nhello\r\n"
            "0\r\n\r\n"))
    add("pipelining", "a request after obs-fold",
        req("/v1/a", "X-A: a\r\n Content-Length: 20\r\n") + req("/v1/b"))
    add("pipelining", "a request after a bare LF line",
        req("/v1/a", "X-A: a\nContent-Length: 5\r\n", "POST", "hello") +
        req("/v1/b"))
    add("pipelining", "a request after two Content-Lengths",
        req("/v1/a", "Content-Length: 0\r\nContent-Length: 22\r\n", "POST",
            "") + req("/v1/b"))
    add("pipelining", "two requests, the first HEAD",
        req("/v1/a", method="HEAD") + req("/v1/b"))
    add("pipelining", "a request then a partial one",
        req("/v1/a") + "GET http://{AUTH}/v1/b HTTP/1.1\r\nHo")
    add("pipelining", "a request then garbage",
        req("/v1/a") + "\x16\x03\x01\x00\x05hello")
    add("pipelining", "a request then CRLFs then a request",
        req("/v1/a") + "\r\n\r\n" + req("/v1/b"))
    add("pipelining", "a request, CRLFs, then a head with a control byte",
        req("/v1/a") + "\r\n\r\n" + req("/v1/b", "X-A: a\x1eb\r\n"))
    add("pipelining", "a request, CRLFs, then a head with bare LFs",
        req("/v1/a") + "\r\n\r\n" + req("/v1/b").replace("\r\n", "\n"))
    add("pipelining", "a request with Expect then another",
        req("/v1/a", "Content-Length: 5\r\nExpect: 100-continue\r\n",
            "POST", "hello") + req("/v1/b"))
    add("pipelining", "a chunked request whose trailer starts a request",
        req("/v1/a", "Transfer-Encoding: chunked\r\n", "POST",
            "5\r\nhello\r\n0\r\nGET /admin HTTP/1.1\r\n\r\n") + req("/v1/b"))
    add("pipelining", "three requests, the middle one refused",
        req("/v1/a") + req("/admin") + req("/v1/c"))


# ---- identity headers the upstream must never see from the sandbox --------
IDENTITY = [
    "X-Forwarded-For: 10.0.0.1", "X-Forwarded-Host: evil.test",
    "X-Forwarded-Proto: https", "X-Forwarded-Port: 443",
    "Forwarded: for=10.0.0.1;host=evil.test", "X-Real-IP: 10.0.0.1",
    "Via: 1.1 evil", "X-Sbx-Task: t-1", "X-Sbx-Policy: x",
    "Proxy-Authorization: Basic Zm9vOmJhcg==", "Proxy-Foo: 1",
    "x-forwarded-for: 10.0.0.2", "PROXY-AUTHORIZATION: Basic eDp5",
    "X-SBX-RULE: allow",
]


def identity():
    for h in IDENTITY:
        add("identity", "sandbox-written %s" % h.split(":")[0],
            RL + H + h + "\r\n\r\n")
    add("identity", "X-Forwarded-For in a chunked trailer",
        post("Transfer-Encoding: chunked\r\n", "5\r\nhello\r\n0\r\n"
             "X-Forwarded-For: 10.0.0.1\r\n\r\n"))
    add("identity", "X-Sbx-Rule in a chunked trailer",
        post("Transfer-Encoding: chunked\r\n", "5\r\nhello\r\n0\r\n"
             "X-Sbx-Rule: allow\r\n\r\n"))
    add("identity", "X-Forwarded-For named in Connection",
        RL + H + "Connection: X-Forwarded-For\r\nX-Forwarded-For: 1.2.3.4"
        "\r\n\r\n")


# ---- generated: a cross of the above ---------------------------------------
def generated():
    # Every whitespace spelling of Content-Length hiding a second request.
    for how in ("sp-colon", "tab-colon", "inner-sp", "lead-sp"):
        hidden = "GET http://evil.test:1/admin HTTP/1.1\r\nX: y\r\n\r\n"
        add("generated", "Content-Length spelt %s hiding a request" % how,
            req("/v1/a", "%s %d\r\n" % (ws_name("Content-Length", how),
                                        len(hidden)), "POST", hidden))
    # Every Transfer-Encoding value with a Content-Length that frames a
    # different body, and a second request after it.
    for v in ("chunked", "Chunked", " chunked", "chunked, identity",
              "identity, chunked", "xchunked", "chunked;x"):
        add("generated", "TE %r vs CL, with a request after" % v,
            req("/v1/a", "Transfer-Encoding: %s\r\nContent-Length: 3\r\n" % v,
                "POST", "0\r\n\r\n") + req("/v1/b"))
    # Every method the policy lists, through the dot-segment paths.
    for m in ("GET", "HEAD", "DELETE", "OPTIONS"):
        for p in ("/v1/../admin", "/v1/..;/admin", "/v1/%252e%252e/admin",
                  "/v1/%2e%2e/admin"):
            add("generated", "%s %s" % (m, p),
                "%s http://{AUTH}%s HTTP/1.1\r\n%s\r\n" % (m, p, H))
    # Host spellings through every allowed method with a body.
    for m in ("POST", "PUT", "PATCH"):
        for hv in ("{HOST}", "{AUTHU}", "{HOST}.:{PORT}", "evil.test"):
            add("generated", "%s with Host %s" % (m, hv),
                "%s http://{AUTH}/v1/x HTTP/1.1\r\nHost: %s\r\n"
                "Content-Length: 5\r\n\r\nhello" % (m, hv))
    # Header counts around the limit egressd is configured with (64).
    for n in (62, 63, 64, 65, 100):
        add("generated", "%d extra header fields" % n,
            RL + H + "".join("X-H%d: v\r\n" % i for i in range(n)) + "\r\n")
    # Long header values.
    for n in (1000, 8000, 16000, 60000):
        add("generated", "a header value of %d bytes" % n,
            RL + H + "X-Long: " + "v" * n + "\r\n\r\n")
    # Bodies at and around the rule's max_request_kb (64 KiB).
    for n in (65535, 65536, 65537):
        add("generated", "a Content-Length body of %d bytes" % n,
            post("Content-Length: %d\r\n" % n, "q" * n))
    add("generated", "a chunked body just over 64 KiB",
        post("Transfer-Encoding: chunked\r\n",
             "8000\r\n" + "r" * 32768 + "\r\n8001\r\n" + "r" * 32769 +
             "\r\n0\r\n\r\n"))


def build():
    if CASES:
        return CASES
    baseline()
    whitespace()
    duplicate()
    te_cl()
    chunked()
    authority()
    path()
    request_line()
    pipelining()
    identity()
    generated()
    return CASES


def fill(template, host, port):
    """The case's bytes for an upstream called host on port."""
    auth = "%s:%d" % (host, port)
    pct = "".join("%%%02x" % ord(c) for c in host[:3]) + host[3:]
    pctdot = host.replace(".", "%2e", 1)
    # The first letter with a Cyrillic look-alike, swapped for it.
    look = {"a": "\u0430", "e": "\u0435", "i": "\u0456", "o": "\u043e",
            "p": "\u0440", "y": "\u0443", "x": "\u0445", "c": "\u0441"}
    k = min(i for i, ch in enumerate(host) if ch in look)
    idn = (host[:k] + look[host[k]] + host[k + 1:]).encode(
        "utf-8").decode("latin-1")
    subst = {
        b"{AUTHU}": auth.upper().encode(),
        b"{AUTH}": auth.encode(),
        b"{HOSTPCTDOT}": pctdot.encode(),
        b"{HOSTPCT}": pct.encode(),
        b"{HOSTIDN}": idn.encode("latin-1"),
        b"{HOST}": host.encode(),
        b"{PORT}": str(port).encode(),
    }
    out = template
    for k, v in subst.items():
        out = out.replace(k, v)
    return out


def main():
    cases = build()
    if len(sys.argv) >= 2 and sys.argv[1] == "--seeds":
        d, host, port = sys.argv[2], sys.argv[3], int(sys.argv[4])
        os.makedirs(d, exist_ok=True)
        for cid, _, _, data, _ in cases:
            with open(os.path.join(d, cid), "wb") as f:
                f.write(fill(data, host, port))
        return
    for cid, cat, desc, _, want in cases:
        print("%-18s %-8s %s" % (cid, want or "", desc))
    print("%d cases" % len(cases), file=sys.stderr)


if __name__ == "__main__":
    main()
