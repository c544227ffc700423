#!/usr/bin/python3
"""orchestrator.py: an sbx orchestrator in a second language.

It knows sbx only through proto/sbx/v1/*.proto and proto/README.md: the
Python modules are generated from the .proto files by Debian's protoc
(`make build/py/sbx/v1/envelope_pb2.py`) and used with Debian's
python3-protobuf; nothing is shared with the C code.  It connects to
policyd's orchestrator socket, speaks the framing (a 4-byte big-endian
length, then an encoded Envelope) and offers:

  submit TASKFILE [--traceparent TP]
                        compile and run a task; print the ExecutionResult
                        as JSON (the fields of DESIGN.md, as `sbxctl run`).
                        The task carries a W3C traceparent, as an
                        orchestrator's model turn would: TP, else the task
                        file's, else a new one; the result must bring the
                        same one back (every audit record and log line of
                        the execution carries it too); the result's signed
                        receipt is verified (--public-key)
  compile TASKFILE      compile only; print the policy hash
  verify-hash TASKFILE  compile, then recompute the policy hash here from
                        the returned Policy (normalised as proto/README.md
                        says) and check it equals policyd's; check the
                        signed grant (Ed25519 over the bytes as received,
                        with python3-nacl when it is installed)
  vectors [DIR]         check the test vectors (proto/testdata): hashes
                        over exact bytes, the grants and receipts that
                        verify and those that must not
  request TASK_ID (--host H [--method M]... [--path P]... | --dataset D)
          --why TEXT [--source FILE]
                        file a capability request; print the decision

The invariant it keeps: what it prints came from policyd's reply, and a
hash it reports as verified was recomputed here from the policy's content,
not copied.

Exit status (DESIGN.md): 0 ran / done (a request granted or pending),
1 an error or a failed verification, 2 usage, 3 policy refused (or a
request denied), 4 launch refused, 5 policyd unreachable.

Environment: SBX_STATE (default ./run; the socket is
$SBX_STATE/sockets/policyd.sock), SBX_PROTO_PY (where the generated
modules are; default build/py next to this script's repository).
"""

import argparse
import hashlib
import json
import os
import socket
import struct
import sys
import time

EXIT_OK = 0
EXIT_ERR = 1
EXIT_USAGE = 2
EXIT_POLICY = 3
EXIT_LAUNCH = 4
EXIT_UNREACHABLE = 5

PROTOCOL_VERSION = 1
REPLY_MAX = 64 * 1024 * 1024    # as sbxctl: results carry outputs
CODE_MAX = 2 * 1024 * 1024      # as sbxctl: the code file
TASKFILE_MAX = 1024 * 1024
SOURCE_MAX = 256 * 1024         # policyd's cap on a request's source

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Failure(Exception):
    """An error to report in one sentence, with the exit status to use."""

    def __init__(self, message, status=EXIT_ERR):
        super().__init__(message)
        self.status = status


def warn(msg):
    print("orchestrator: %s" % msg, file=sys.stderr)


# ---- the generated modules -------------------------------------------------

# Set by load_protos(): the modules of envelope, exec, policy, task and
# capability.proto.
pb = exec_pb = pol_pb = task_pb = cap_pb = None


def load_protos(path):
    """Import the modules protoc generated under PATH (sbx/v1/*_pb2.py)."""
    global pb, exec_pb, pol_pb, task_pb, cap_pb, rcpt_pb
    mod = os.path.join(path, "sbx", "v1", "envelope_pb2.py")
    if not os.path.isfile(mod):
        raise Failure("%s not found: generate the Python modules from the "
                      ".proto files with `make build/py/sbx/v1/envelope_pb2.py` "
                      "(needs protoc, Debian's protobuf-compiler), or name "
                      "where they are with --proto-path or SBX_PROTO_PY"
                      % mod)
    sys.path.insert(0, path)
    try:
        from sbx.v1 import (envelope_pb2, exec_pb2, policy_pb2, task_pb2,
                            capability_pb2, receipt_pb2)
    except ImportError as e:
        raise Failure("cannot import the generated modules from %s: %s "
                      "(is python3-protobuf installed?)" % (path, e))
    pb, exec_pb, pol_pb = envelope_pb2, exec_pb2, policy_pb2
    task_pb, cap_pb, rcpt_pb = task_pb2, capability_pb2, receipt_pb2


# ---- transport -------------------------------------------------------------

class Unreachable(Failure):
    def __init__(self, message):
        super().__init__(message, EXIT_UNREACHABLE)


class Connection:
    """One connection to policyd: request/reply exchanges in order."""

    def __init__(self, path, timeout):
        self.path = path
        self.next_id = (os.getpid() << 32) | 1
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(path)
        except OSError as e:
            self.sock.close()
            raise Unreachable("policyd unreachable: cannot connect to %s: %s"
                              % (path, e.strerror or e))

    def close(self):
        self.sock.close()

    def _refused(self):
        # The peer check closes a refused peer without reading a byte:
        # the client sees end-of-file, or a broken pipe if it was still
        # sending.
        return Unreachable("policyd unreachable: %s closed the connection "
                           "without a reply (is uid %d allowed on it?)"
                           % (self.path, os.getuid()))

    def _recv_exact(self, n, what):
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except socket.timeout:
                raise Failure("policyd at %s did not answer within %d s"
                              % (self.path, self.sock.gettimeout()))
            except (ConnectionResetError, BrokenPipeError):
                if not buf and what == "length":
                    raise self._refused()
                raise Unreachable("policyd at %s reset the connection "
                                  "inside a frame" % self.path)
            except OSError as e:
                raise Unreachable("policyd at %s: %s" % (self.path, e))
            if not chunk:
                if not buf and what == "length":
                    raise self._refused()
                raise Failure("policyd at %s closed the connection inside "
                              "a frame" % self.path)
            buf += chunk
        return bytes(buf)

    def call(self, **body):
        """Send an Envelope whose body is the one keyword argument; return
        the reply Envelope (its body is the answer or `error`)."""
        env = pb.Envelope()
        env.version = PROTOCOL_VERSION
        env.request_id = self.next_id
        self.next_id += 1
        (name, msg), = body.items()
        getattr(env, name).CopyFrom(msg)
        data = env.SerializeToString()
        try:
            self.sock.sendall(struct.pack(">I", len(data)) + data)
        except (ConnectionResetError, BrokenPipeError):
            raise self._refused()
        except OSError as e:
            raise Unreachable("policyd at %s: sending failed: %s"
                              % (self.path, e.strerror or e))
        (length,) = struct.unpack(">I", self._recv_exact(4, "length"))
        if length == 0 or length > REPLY_MAX:
            raise Failure("policyd at %s sent a frame of %d bytes (allowed: "
                          "1 to %d)" % (self.path, length, REPLY_MAX))
        rep = pb.Envelope()
        try:
            rep.ParseFromString(self._recv_exact(length, "body"))
        except Exception as e:  # DecodeError; the C implementation varies
            raise Failure("policyd at %s sent a reply that does not decode: "
                          "%s" % (self.path, e))
        which = rep.WhichOneof("body")
        if which is None:
            raise Failure("policyd at %s sent a reply without a body"
                          % self.path)
        # Frame-level errors come back with request id 0.
        if rep.request_id != env.request_id and not (
                which == "error" and rep.request_id == 0):
            raise Failure("policyd at %s answered request %d, not %d"
                          % (self.path, rep.request_id, env.request_id))
        return rep


def error_status(err):
    """The exit status for an Error reply (as sbxctl's)."""
    c = err.code
    if c in (pb.ERROR_POLICY, pb.ERROR_LIMIT):
        return EXIT_POLICY
    if c == pb.ERROR_LAUNCH:
        return EXIT_LAUNCH
    if c == pb.ERROR_UNAVAILABLE:
        return EXIT_UNREACHABLE
    return EXIT_ERR


def expect(rep, body):
    """The reply's BODY message; an Error reply becomes a Failure naming
    its code, message and rule."""
    which = rep.WhichOneof("body")
    if which == "error":
        e = rep.error
        msg = "policyd: %s: %s" % (pb.ErrorCode.Name(e.code), e.message)
        if e.rule:
            msg += " (rule %s)" % e.rule
        raise Failure(msg, error_status(e))
    if which != body:
        raise Failure("policyd answered with %s, expected %s" % (which, body))
    return getattr(rep, body)


# ---- the task file ---------------------------------------------------------

TASK_FILE_KEYS = {"task", "datasets", "code", "outputs"}
TASK_KEYS = {"id", "type", "tenant", "user", "traceparent"}


def names(doc, key, path):
    v = doc.get(key)
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(x, str) and x
                                          for x in v):
        raise Failure("%s: %s: a list of names" % (path, key), EXIT_USAGE)
    return v


def read_task(path):
    """The Task a task file describes (DESIGN.md), with its code read from
    the file it names relative to the task file."""
    import yaml     # Debian's python3-yaml
    try:
        with open(path, "rb") as f:
            text = f.read(TASKFILE_MAX + 1)
    except OSError as e:
        raise Failure("%s: %s" % (path, e.strerror or e), EXIT_USAGE)
    if len(text) > TASKFILE_MAX:
        raise Failure("%s: larger than %d bytes" % (path, TASKFILE_MAX),
                      EXIT_USAGE)
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise Failure("%s: not YAML: %s" % (path, e), EXIT_USAGE)
    if not isinstance(doc, dict):
        raise Failure("%s: not a task file (a mapping with task, datasets, "
                      "code, outputs)" % path, EXIT_USAGE)
    unknown = sorted(set(map(str, doc)) - TASK_FILE_KEYS)
    if unknown:
        raise Failure("%s: unknown key %s" % (path, unknown[0]), EXIT_USAGE)
    t = doc.get("task")
    if not isinstance(t, dict):
        raise Failure("%s: task: a mapping {id, type, tenant, user} is "
                      "required" % path, EXIT_USAGE)
    unknown = sorted(set(map(str, t)) - TASK_KEYS)
    if unknown:
        raise Failure("%s: task.%s: unknown key" % (path, unknown[0]),
                      EXIT_USAGE)
    task = task_pb.Task()
    for k in sorted(TASK_KEYS):
        v = t.get(k)
        if v is None:
            continue
        if not isinstance(v, str):
            raise Failure("%s: task.%s: a string" % (path, k), EXIT_USAGE)
        setattr(task, k, v)
    task.datasets.extend(names(doc, "datasets", path))
    task.outputs.extend(names(doc, "outputs", path))
    code = doc.get("code")
    if code is not None:
        if not isinstance(code, str) or not code:
            raise Failure("%s: code: a file name" % path, EXIT_USAGE)
        cpath = os.path.join(os.path.dirname(path) or ".", code)
        try:
            with open(cpath, "rb") as f:
                data = f.read(CODE_MAX + 1)
        except OSError as e:
            raise Failure("%s: code: %s: %s" % (path, cpath,
                                                e.strerror or e), EXIT_USAGE)
        if len(data) > CODE_MAX:
            raise Failure("%s: code: %s is larger than %d bytes"
                          % (path, cpath, CODE_MAX), EXIT_USAGE)
        task.code_name = os.path.basename(cpath)
        task.code = data
    return task


# ---- the policy hash, recomputed here --------------------------------------

def ascii_lower(s):
    # The C side lower-cases byte by byte in the C locale: ASCII only.
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in s)


def ascii_upper(s):
    return "".join(chr(ord(c) - 32) if "a" <= c <= "z" else c for c in s)


def host_norm(h):
    h = ascii_lower(h)
    return h[:-1] if len(h) > 1 and h.endswith(".") else h


def strset(field, fn=None):
    """Sort and de-duplicate a repeated string field in place.  Python
    compares str by code point, which is UTF-8 byte order (strcmp)."""
    v = sorted(set(fn(x) if fn else x for x in field))
    del field[:]
    field.extend(v)


def enc(m):
    return m.SerializeToString(deterministic=True)


def msgset(field, key):
    """Sort a repeated message field by KEY, ties broken by the encoded
    bytes, and drop exact duplicates."""
    items = [(key(m), enc(m), m) for m in field]
    items.sort(key=lambda x: (x[0], x[1]))
    out, last = [], None
    for k, b, m in items:
        if b != last:
            c = type(m)()
            c.CopyFrom(m)
            out.append(c)
        last = b
    del field[:]
    field.extend(out)


def normalise(policy):
    """A normalised copy of POLICY (proto/README.md "Canonical form")."""
    p = pol_pb.Policy()
    p.CopyFrom(policy)
    p.DiscardUnknownFields()
    # Limits, network and outputs are always present in the canonical
    # form, even when every field in them is zero.
    p.limits.SetInParent()
    p.network.SetInParent()
    p.outputs.SetInParent()
    p.network.default_action = "deny"
    for r in p.network.allow:
        r.host = host_norm(r.host)
        strset(r.methods, ascii_upper)
        strset(r.paths)
        strset(r.cidrs, ascii_lower)
    msgset(p.network.allow, lambda r: r.host.encode())
    msgset(p.inputs, lambda i: i.dataset.encode())
    for c in p.credentials:
        c.host = host_norm(c.host)
    msgset(p.credentials, lambda c: (c.host.encode(), c.header.encode()))
    strset(p.outputs.allowed_types, ascii_lower)
    return p


def policy_hash(policy):
    return hashlib.sha256(enc(normalise(policy))).hexdigest()


def scramble(policy):
    """A copy of POLICY as a template author might have written it: every
    set reversed and doubled, hosts in upper case with a trailing dot,
    methods in lower case, types in upper case.  The same policy: its
    hash must not change."""
    p = pol_pb.Policy()
    p.CopyFrom(policy)

    def rev2(field, fn=lambda x: x):
        v = [fn(x) for x in field][::-1]
        del field[:]
        field.extend(v + v)

    def rev2msg(field):
        v = []
        for m in field:
            c = type(m)()
            c.CopyFrom(m)
            v.append(c)
        v.reverse()
        del field[:]
        field.extend(v + v)

    for r in p.network.allow:
        r.host = ascii_upper(r.host) + "."
        rev2(r.methods, ascii_lower)
        rev2(r.paths)
        rev2(r.cidrs, ascii_upper)
    rev2msg(p.network.allow)
    rev2msg(p.inputs)
    for c in p.credentials:
        c.host = ascii_upper(c.host) + "."
    rev2msg(p.credentials)
    rev2(p.outputs.allowed_types, ascii_upper)
    return p


# ---- subcommands -----------------------------------------------------------

def connect(args, *needs):
    """A connection that said hello first (proto/README.md, Hello): the
    server must speak protocol 1 and serve every request body in NEEDS
    (Envelope field names), else a Failure names what is missing before
    anything is sent."""
    conn = Connection(args.socket, args.timeout)
    try:
        hello = pb.Hello(protocol_version=PROTOCOL_VERSION,
                         client_name="orchestrator.py")
        rep = conn.call(hello=hello)
        if (rep.WhichOneof("body") == "error" and
                rep.error.code == pb.ERROR_MALFORMED):
            # A server older than hello answers a body it does not know
            # ERROR_MALFORMED and hangs up (proto/README.md, Hello): talk
            # to it without one.  What it serves cannot be asked, so a
            # request it lacks fails when it is sent.
            conn.close()
            sys.stderr.write("orchestrator.py: %s does not know hello (an "
                             "older sbx); going on without it\n"
                             % args.socket)
            return Connection(args.socket, args.timeout)
        rep = expect(rep, "hello_reply")
        if rep.protocol_version != PROTOCOL_VERSION:
            raise Failure("%s %s speaks protocol %d, not %d"
                          % (rep.server_name, rep.server_version,
                             rep.protocol_version, PROTOCOL_VERSION))
        served = {t.field for t in rep.requests}
        fields = pb.Envelope.DESCRIPTOR.fields_by_name
        missing = [n for n in needs if fields[n].number not in served]
        if missing:
            raise Failure("%s %s at %s (socket %s) does not serve %s"
                          % (rep.server_name, rep.server_version,
                             args.socket, rep.socket,
                             ", ".join(missing)))
    except BaseException:
        conn.close()
        raise
    return conn


# ---- exact bytes, signatures, receipts (proto/README.md) ------------------

# A receipt's signature is over these 15 bytes ("sbx receipt v1", NUL),
# then the receipt's bytes; a grant's over its bytes alone.
RECEIPT_CONTEXT = b"sbx receipt v1\0"

def varint(buf, i):
    v = shift = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise Failure("grant: a varint runs off the end")
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return v, i
        shift += 7


def grant_policy_bytes(grant):
    """The exact bytes of the policy (field 1) inside the grant's bytes:
    what policy_hash is the SHA-256 of.  Never a re-encoding, so a field
    this client's generated code lacks is hashed as sent."""
    i, found = 0, None
    while i < len(grant):
        key, i = varint(grant, i)
        field, wt = key >> 3, key & 7
        if field == 0:
            raise Failure("grant: field number 0")
        if wt == 0:
            _, i = varint(grant, i)
        elif wt == 1:
            i += 8
        elif wt == 5:
            i += 4
        elif wt == 2:
            n, i = varint(grant, i)
            if i + n > len(grant):
                raise Failure("grant: a field runs off the end")
            if field == 1:
                if found is not None:
                    raise Failure("grant: the policy (field 1) is there "
                                  "twice")
                found = grant[i:i + n]
            i += n
        else:
            raise Failure("grant: wire type %d" % wt)
        if i > len(grant):
            raise Failure("grant: a field runs off the end")
    if found is None:
        raise Failure("grant: no policy")
    return bytes(found)


def ed25519_verify(pk, msg, sig):
    """True or False; None when no Ed25519 library is installed
    (python3-nacl, else python3-cryptography)."""
    try:
        import nacl.signing
        import nacl.exceptions
        try:
            nacl.signing.VerifyKey(pk).verify(msg, sig)
            return True
        except (nacl.exceptions.BadSignatureError, ValueError):
            return False
    except ImportError:
        pass
    try:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import (
            Ed25519PublicKey)
        from cryptography.exceptions import InvalidSignature
    except ImportError:
        return None
    try:
        Ed25519PublicKey.from_public_bytes(pk).verify(sig, msg)
        return True
    except (InvalidSignature, ValueError):
        return False


def verify_grant(pk, signed, now=None, allow_preview=False):
    """Check a SignedPolicy as every daemon does: the signature over the
    grant's bytes, the key id, the hash over the policy's bytes as sent,
    not a preview, not expired (now None: the expiry is not checked).
    Returns the decoded grant; raises Failure naming what is wrong."""
    ok = ed25519_verify(pk, signed.grant, signed.signature)
    if ok is None:
        raise Failure("no Ed25519 library: apt-get install python3-nacl")
    if not ok:
        raise Failure("grant: signature does not verify")
    g = pol_pb.PolicyGrant()
    g.ParseFromString(signed.grant)
    if g.key_id != pk[:8].hex():
        raise Failure("grant: names key %s, verifies with %s"
                      % (g.key_id, pk[:8].hex()))
    h = hashlib.sha256(grant_policy_bytes(signed.grant)).hexdigest()
    if h != g.policy_hash:
        raise Failure("grant: says hash %s, its policy bytes hash to %s"
                      % (g.policy_hash, h))
    if g.execution_id.startswith("preview-") and not allow_preview:
        raise Failure("grant: a preview (%s) runs nothing" % g.execution_id)
    if now is not None and now >= g.expires_at:
        raise Failure("grant: expired at %d" % g.expires_at)
    return g


def verify_receipt(pk, sr, result=None):
    """Check a SignedReceipt: its signature and key id, the grant in it
    (for the same task, execution and hash; its expiry is not checked, a
    receipt outlives it), and, given the ExecutionResult it came with,
    that it says what the result says.  Returns the Receipt."""
    ok = ed25519_verify(pk, RECEIPT_CONTEXT + sr.receipt, sr.signature)
    if ok is None:
        raise Failure("no Ed25519 library: apt-get install python3-nacl")
    if not ok:
        raise Failure("receipt: signature does not verify")
    r = rcpt_pb.Receipt()
    r.ParseFromString(sr.receipt)
    if r.key_id != pk[:8].hex():
        raise Failure("receipt: names key %s, verifies with %s"
                      % (r.key_id, pk[:8].hex()))
    g = verify_grant(pk, r.grant)
    if (g.task_id, g.execution_id, g.policy_hash) != (
            r.task_id, r.execution_id, r.policy_hash):
        raise Failure("receipt: carries the grant of another execution")
    if result is None:
        return r
    if (r.task_id, r.execution_id) != (result.task_id, result.execution_id):
        raise Failure("receipt: for execution %s, the result for %s"
                      % (r.execution_id, result.execution_id))
    if r.policy_hash != result.policy.hash:
        raise Failure("receipt: policy %s, the result's %s"
                      % (r.policy_hash, result.policy.hash))
    if (r.exit_code, r.signal) != (result.exit_code, result.signal):
        raise Failure("receipt: exit status differs from the result's")
    mine = [(o.name, o.type, o.bytes, o.sha256) for o in r.outputs]
    theirs = [(o.name, o.type, o.bytes, o.sha256) for o in result.outputs]
    if mine != theirs:
        raise Failure("receipt: outputs %r, the result's %r"
                      % (mine, theirs))
    return r


def cmd_vectors(args):
    """Check proto/testdata/ as every client must."""
    d = args.dir
    ok = [True]

    def rd(name):
        with open(os.path.join(d, name), "rb") as f:
            return f.read()

    def check(name, good, fn):
        try:
            fn()
            res = True
        except Failure as e:
            res = False
            why = str(e)
        if res == good:
            print("vector %s: %s" % (name, "verifies" if good else
                                     "refused (%s)" % why))
        else:
            print("vector %s: WRONG (%s)" % (name, "refused: " + why
                                            if good else "verified"))
            ok[0] = False

    pk = read_public_key(os.path.join(d, "test-signing.pub"))
    other = read_public_key(os.path.join(d, "other-signing.pub"))
    want = rd("policy.sha256").decode().strip()
    if hashlib.sha256(rd("policy.bin")).hexdigest() != want:
        print("vector policy.bin: WRONG hash")
        ok[0] = False
    else:
        print("vector policy.bin: hash %s" % want)

    def sp(name):
        m = pol_pb.SignedPolicy()
        m.ParseFromString(rd(name))
        return m

    def grant_is(name, h, key=pk):
        g = verify_grant(key, sp(name))
        if g.policy_hash != h:
            raise Failure("hash %s, want %s" % (g.policy_hash, h))

    uh = rd("policy-unknown-field.sha256").decode().strip()
    check("grant.bin", True, lambda: grant_is("grant.bin", want))
    # This client's Policy lacks field 99: an old client of that grant.
    check("grant-unknown-field.bin", True,
          lambda: grant_is("grant-unknown-field.bin", uh))
    # Why the bytes: re-encoding what this client decoded would not give
    # the signed hash (protobuf implementations drop unknown fields, or
    # write them elsewhere).
    g = pol_pb.PolicyGrant()
    g.ParseFromString(sp("grant-unknown-field.bin").grant)
    g.policy.DiscardUnknownFields()
    if hashlib.sha256(g.policy.SerializeToString()).hexdigest() == uh:
        print("vector grant-unknown-field.bin: WRONG (a re-encoding "
              "hashes the same: the vector proves nothing)")
        ok[0] = False
    check("grant-wrong-key.bin", False,
          lambda: grant_is("grant-wrong-key.bin", want))
    check("grant.bin under other-signing.pub", False,
          lambda: grant_is("grant.bin", want, other))
    check("grant-policy-twice.bin", False,
          lambda: grant_is("grant-policy-twice.bin", want))
    check("grant-preview.bin", False,
          lambda: grant_is("grant-preview.bin", want))

    def rc(name, key=pk):
        m = rcpt_pb.SignedReceipt()
        m.ParseFromString(rd(name))
        r = verify_receipt(key, m)
        if r.policy_hash != want or len(r.outputs) != 1:
            raise Failure("receipt: unexpected content")

    check("receipt.bin", True, lambda: rc("receipt.bin"))
    check("receipt-output-changed.bin", False,
          lambda: rc("receipt-output-changed.bin"))
    check("receipt-wrong-key.bin", False, lambda: rc("receipt-wrong-key.bin"))
    check("receipt.bin under other-signing.pub", False,
          lambda: rc("receipt.bin", other))
    return EXIT_OK if ok[0] else EXIT_ERR


def compile_task(args):
    task = read_task(args.taskfile)
    req = exec_pb.CompileRequest()
    req.task.CopyFrom(task)
    conn = connect(args, "compile")
    try:
        return expect(conn.call(compile=req), "compiled")
    finally:
        conn.close()


def cmd_compile(args):
    rep = compile_task(args)
    print(rep.policy_hash)
    return EXIT_OK


def read_public_key(path):
    try:
        with open(path) as f:
            text = f.read(4096)
    except OSError as e:
        raise Failure("public key %s: %s" % (path, e.strerror or e))
    parts = text.split()
    if len(parts) != 2 or parts[0] != "ed25519" or len(parts[1]) != 64:
        raise Failure("public key %s: not \"ed25519 \" and 64 hex digits"
                      % path)
    try:
        return bytes.fromhex(parts[1])
    except ValueError:
        raise Failure("public key %s: not hex" % path)


def cmd_verify_hash(args):
    rep = compile_task(args)
    ok = True
    mine = policy_hash(rep.policy)
    print("policyd hash:   %s" % rep.policy_hash)
    print("recomputed:     %s" % mine)
    if mine == rep.policy_hash:
        print("hash: equal")
    else:
        print("hash: DIFFERENT")
        ok = False

    # The normalisation is really done here: the same policy written
    # differently hashes the same, a different policy does not.
    sh = policy_hash(scramble(rep.policy))
    if sh == rep.policy_hash:
        print("scrambled sets and case: equal (normalised here)")
    else:
        print("scrambled sets and case: %s: DIFFERENT" % sh)
        ok = False
    changed = pol_pb.Policy()
    changed.CopyFrom(rep.policy)
    changed.limits.memory_mb += 1
    if policy_hash(changed) != rep.policy_hash:
        print("one more MB of memory: a different hash")
    else:
        print("one more MB of memory: the SAME hash")
        ok = False

    # The signed grant: decoded from the bytes as received; it must name
    # the same hash, and its own policy must hash to it.
    grant = pol_pb.PolicyGrant()
    try:
        grant.ParseFromString(rep.signed.grant)
    except Exception as e:
        raise Failure("the signed grant does not decode: %s" % e)
    gh = policy_hash(grant.policy)
    if grant.policy_hash == rep.policy_hash and gh == rep.policy_hash:
        print("grant: names the same hash, and its policy hashes to it")
    else:
        print("grant: hash %s, its policy hashes to %s: DIFFERENT"
              % (grant.policy_hash, gh))
        ok = False
    bh = hashlib.sha256(grant_policy_bytes(rep.signed.grant)).hexdigest()
    if bh == grant.policy_hash:
        print("grant: its policy bytes, as sent, hash to it")
    else:
        print("grant: its policy bytes hash to %s: DIFFERENT" % bh)
        ok = False
    if grant.expires_at <= int(time.time()):
        print("grant: expired at %d" % grant.expires_at)
        ok = False

    try:
        import nacl.signing
        import nacl.exceptions
    except ImportError:
        nacl = None
    if nacl is None:
        print("signature: not checked (python3-nacl is not installed; "
              "apt-get install python3-nacl)")
    else:
        pk = read_public_key(args.public_key)
        kid = pk[:8].hex()
        if grant.key_id != kid:
            print("signature: grant names key %s, %s is key %s: DIFFERENT"
                  % (grant.key_id, args.public_key, kid))
            ok = False
        try:
            nacl.signing.VerifyKey(pk).verify(rep.signed.grant,
                                             rep.signed.signature)
            print("signature: Ed25519 valid (key %s)" % kid)
        except (nacl.exceptions.BadSignatureError, ValueError) as e:
            print("signature: INVALID under %s (%s)" % (args.public_key, e))
            ok = False
    return EXIT_OK if ok else EXIT_ERR


def result_json(r):
    """The ExecutionResult as `sbxctl run` prints it (DESIGN.md)."""
    def text(b):
        return b.decode("utf-8", errors="replace")

    o = {
        "task_id": r.task_id,
        "execution_id": r.execution_id,
        "traceparent": r.traceparent,
        "policy": ({"name": r.policy.name, "version": r.policy.version,
                    "hash": r.policy.hash} if r.HasField("policy") else {}),
        "exit_code": r.exit_code,
        "signal": r.signal,
        "limits_hit": list(r.limits_hit),
        "usage": {
            "cpu_ms": r.usage.cpu_ms,
            "peak_memory_kb": r.usage.peak_memory_kb,
            "wall_ms": r.usage.wall_ms,
            "egress_bytes_out": r.usage.egress_bytes_out,
            "egress_bytes_in": r.usage.egress_bytes_in,
            "egress_requests": r.usage.egress_requests,
        },
        "stdout": text(r.stdout),
        "stderr": text(r.stderr),
        "stdout_truncated": r.stdout_truncated,
        "stderr_truncated": r.stderr_truncated,
        "outputs": [],
        "dropped": [{"name": d.name, "reason": d.reason} for d in r.dropped],
        "denials": [{"rule": d.rule, "boundary": d.boundary,
                     "detail": d.detail} for d in r.denials],
    }
    for ro in r.outputs:
        e = {"name": ro.name, "type": ro.type, "bytes": ro.bytes,
             "where": ro.where}
        if ro.sha256:
            e["sha256"] = ro.sha256
        if ro.truncated:
            e["truncated"] = True
        o["outputs"].append(e)
    return o


def new_traceparent():
    """A W3C Trace Context traceparent for a span of our own (version 00,
    random trace-id and parent-id, sampled), as a tracing library would
    make for the model turn that asked for this run."""
    while True:
        trace, parent = os.urandom(16).hex(), os.urandom(8).hex()
        if int(trace, 16) and int(parent, 16):
            return "00-%s-%s-01" % (trace, parent)


def cmd_submit(args):
    task = read_task(args.taskfile)
    if args.traceparent is not None:
        task.traceparent = args.traceparent
    elif not task.traceparent:
        task.traceparent = new_traceparent()
    req = exec_pb.RunRequest()
    req.task.CopyFrom(task)
    conn = connect(args, "run")
    try:
        r = expect(conn.call(run=req), "result")
    finally:
        conn.close()
    print(json.dumps(result_json(r), indent=2))
    if not r.HasField("receipt"):
        raise Failure("the result carries no receipt")
    pk = read_public_key(args.public_key)
    if ed25519_verify(pk, b"", b"\0" * 64) is None:
        warn("receipt: not verified (no Ed25519 library: apt-get install "
             "python3-nacl)")
    else:
        rc = verify_receipt(pk, r.receipt, r)
        warn("receipt: verified (key %s, grant for %s, %d outputs)"
             % (rc.key_id, rc.execution_id, len(rc.outputs)))
    # sbx passes it through: anything else breaks the caller's trace.
    if r.traceparent != task.traceparent:
        raise Failure("the result's traceparent %r is not the one sent (%s)"
                      % (r.traceparent[:64], task.traceparent))
    return EXIT_OK


STATUS = {
    "CAPABILITY_UNSPECIFIED": "unspecified",
    "CAPABILITY_GRANTED": "granted",
    "CAPABILITY_PENDING": "pending",
    "CAPABILITY_APPROVED": "approved",
    "CAPABILITY_DENIED": "denied",
}


def cmd_request(args):
    if (args.host is None) == (args.dataset is None):
        raise Failure("name either --host or --dataset", EXIT_USAGE)
    if args.dataset is not None and (args.method or args.path):
        raise Failure("--method and --path go with --host", EXIT_USAGE)
    if not args.why:
        raise Failure("--why is required: say why the task needs it",
                      EXIT_USAGE)
    cr = cap_pb.CapabilityRequest()
    cr.task_id = args.task_id
    cr.why = args.why
    if args.source is not None:
        try:
            with open(args.source, "rb") as f:
                src = f.read(SOURCE_MAX + 1)
        except OSError as e:
            raise Failure("--source %s: %s" % (args.source,
                                               e.strerror or e), EXIT_USAGE)
        if len(src) > SOURCE_MAX:
            raise Failure("--source %s: larger than %d bytes"
                          % (args.source, SOURCE_MAX), EXIT_USAGE)
        cr.source = src
    if args.dataset is not None:
        cr.dataset = args.dataset
    else:
        cr.host.host = args.host
        cr.host.methods.extend(args.method or [])
        cr.host.paths.extend(args.path or [])
    conn = connect(args, "capability")
    try:
        d = expect(conn.call(capability=cr), "decision")
    finally:
        conn.close()
    try:
        status = STATUS[cap_pb.CapabilityStatus.Name(d.status)]
    except (KeyError, ValueError):  # a status newer than this client
        status = "unspecified"
    print(json.dumps({
        "request_id": d.request_id,
        "status": status,
        "reason": d.reason,
        "policy_hash": d.policy_hash,
        "approver": d.approver,
        "decided_at": d.decided_at,
    }, indent=2))
    return EXIT_POLICY if status == "denied" else EXIT_OK


# ---- main ------------------------------------------------------------------

class Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        warn(message)
        sys.exit(EXIT_USAGE)


def main(argv):
    state = os.environ.get("SBX_STATE") or "./run"
    ap = Parser(prog="orchestrator.py",
                description="An sbx orchestrator that knows only the "
                "protocol (proto/README.md).")
    ap.add_argument("--socket", default=None,
                    help="policyd's orchestrator socket (default "
                    "$SBX_STATE/sockets/policyd.sock)")
    ap.add_argument("--proto-path", default=None,
                    help="the generated sbx/v1/*_pb2.py modules (default "
                    "$SBX_PROTO_PY, else build/py in the repository)")
    ap.add_argument("--timeout", type=float, default=600,
                    help="seconds to wait for a reply (default 600)")
    sub = ap.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=Parser)
    sub.required = True

    p = sub.add_parser("submit", help="run a task, print the result as JSON")
    p.add_argument("taskfile")
    p.add_argument("--traceparent", default=None,
                   help="the W3C traceparent to send (default: the task "
                   "file's, else a new one)")
    p.add_argument("--public-key", default=None,
                   help="policyd's public key file, to verify the receipt "
                   "(default $SBX_STATE/etc/policyd.pub)")
    p.set_defaults(fn=cmd_submit)
    p = sub.add_parser("vectors", help="check the test vectors "
                       "(proto/testdata)")
    p.add_argument("dir", nargs="?",
                   default=os.path.join(REPO, "proto", "testdata"))
    p.set_defaults(fn=cmd_vectors)
    p = sub.add_parser("compile", help="compile a task, print its hash")
    p.add_argument("taskfile")
    p.set_defaults(fn=cmd_compile)
    p = sub.add_parser("verify-hash", help="compile, recompute the hash "
                       "here and check the signed grant")
    p.add_argument("taskfile")
    p.add_argument("--public-key", default=None,
                   help="policyd's public key file (default "
                   "$SBX_STATE/etc/policyd.pub)")
    p.set_defaults(fn=cmd_verify_hash)
    p = sub.add_parser("request", help="file a capability request")
    p.add_argument("task_id")
    p.add_argument("--host")
    p.add_argument("--method", action="append")
    p.add_argument("--path", action="append")
    p.add_argument("--dataset")
    p.add_argument("--why")
    p.add_argument("--source")
    p.set_defaults(fn=cmd_request)

    args = ap.parse_args(argv)
    if args.socket is None:
        args.socket = os.path.join(state, "sockets", "policyd.sock")
    if getattr(args, "public_key", "") is None:
        args.public_key = os.path.join(state, "etc", "policyd.pub")
    proto = (args.proto_path or os.environ.get("SBX_PROTO_PY") or
             os.path.join(REPO, "build", "py"))
    try:
        load_protos(proto)
        return args.fn(args)
    except Failure as e:
        warn(str(e))
        return e.status
    except BrokenPipeError:
        return EXIT_ERR


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
