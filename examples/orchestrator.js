#!/usr/bin/env node
// orchestrator.js: an sbx orchestrator in Node.js, written against
// proto/README.md and the .proto files alone, with protobufjs from npm
// (examples/package.json; `make deps` runs `npm ci` in examples/).
//
//   node orchestrator.js vectors [DIR]
//       check the test vectors (proto/testdata): the policy hash is the
//       SHA-256 of the policy's exact bytes inside the grant; the grants
//       and receipts that must verify do, the others are refused
//   node orchestrator.js compile TASK.json [--preview]
//       compile; verify the grant (signature, key id, hash over the bytes
//       as sent, expiry); print the policy hash
//   node orchestrator.js run TASK.json
//       run; verify the result's signed receipt and that it says what the
//       result says; print the result as JSON
//
// TASK.json: {"id", "type", "tenant", "user", "datasets": [...],
// "code": FILE (relative to TASK.json), "outputs": [...], "traceparent"}.
// Options: --socket PATH (default $SBX_STATE/sockets/policyd.sock),
// --public-key FILE (default $SBX_STATE/etc/policyd.pub).  SBX_STATE
// defaults to ./run.  Exit status as sbxctl's: 0 done, 1 an error or a
// failed verification, 2 usage, 3 policy refused, 4 launch refused,
// 5 policyd unreachable.
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const net = require('net');
const path = require('path');
const protobuf = require('protobufjs');

const REPO = path.resolve(__dirname, '..');
const PROTOCOL_VERSION = 1;
const REPLY_MAX = 64 * 1024 * 1024;
const EXIT = { OK: 0, ERR: 1, USAGE: 2, POLICY: 3, LAUNCH: 4, UNREACHABLE: 5 };

class Failure extends Error {
  constructor(msg, status = EXIT.ERR) { super(msg); this.status = status; }
}

// ---- the generated types -------------------------------------------------

function loadTypes() {
  const root = new protobuf.Root();
  root.resolvePath = (origin, target) => path.join(REPO, 'proto', target);
  root.loadSync(['sbx/v1/envelope.proto', 'sbx/v1/receipt.proto'],
    { keepCase: true });
  const t = (n) => root.lookupType('sbx.v1.' + n);
  return {
    Envelope: t('Envelope'), SignedPolicy: t('SignedPolicy'),
    PolicyGrant: t('PolicyGrant'), Receipt: t('Receipt'),
    SignedReceipt: t('SignedReceipt'),
    ErrorCode: root.lookupEnum('sbx.v1.ErrorCode'),
  };
}
const T = loadTypes();

// 64-bit fields come as Long (or number): compare them as decimal text.
const s64 = (v) => (v === undefined || v === null ? '0' : v.toString());
const hex = (b) => Buffer.from(b || []).toString('hex');
const sha256 = (b) => crypto.createHash('sha256').update(b).digest('hex');

// ---- exact bytes, signatures, receipts -------------------------------------

// A receipt's signature is over these 15 bytes ("sbx receipt v1", NUL),
// then the receipt's bytes; a grant's over its bytes alone
// (proto/README.md, Receipts).
const RECEIPT_CONTEXT = Buffer.from('sbx receipt v1\0', 'latin1');

function varint(buf, i) {
  let v = 0n;
  for (let shift = 0n; shift < 70n; shift += 7n) {
    if (i >= buf.length) throw new Failure('grant: a varint runs off the end');
    const b = buf[i++];
    v |= BigInt(b & 0x7f) << shift;
    if (!(b & 0x80)) return [v, i];
  }
  throw new Failure('grant: a varint over ten bytes');
}

// The exact bytes of the policy (field 1) inside the grant's bytes: what
// policy_hash is the SHA-256 of.  Never a re-encoding: protobufjs drops
// the fields it does not know.
function grantPolicyBytes(grant) {
  let i = 0;
  let found = null;
  while (i < grant.length) {
    let key;
    [key, i] = varint(grant, i);
    const field = key >> 3n;
    const wt = Number(key & 7n);
    if (field === 0n) throw new Failure('grant: field number 0');
    if (wt === 0) {
      [, i] = varint(grant, i);
    } else if (wt === 1) {
      i += 8;
    } else if (wt === 5) {
      i += 4;
    } else if (wt === 2) {
      let n;
      [n, i] = varint(grant, i);
      if (BigInt(i) + n > BigInt(grant.length)) {
        throw new Failure('grant: a field runs off the end');
      }
      if (field === 1n) {
        if (found !== null) {
          throw new Failure('grant: the policy (field 1) is there twice');
        }
        found = grant.subarray(i, i + Number(n));
      }
      i += Number(n);
    } else {
      throw new Failure('grant: wire type ' + wt);
    }
    if (i > grant.length) throw new Failure('grant: a field runs off the end');
  }
  if (found === null) throw new Failure('grant: no policy');
  return found;
}

function readPublicKey(file) {
  let text;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new Failure('public key ' + file + ': ' + e.message);
  }
  const parts = text.trim().split(/\s+/);
  if (parts.length !== 2 || parts[0] !== 'ed25519' ||
      !/^[0-9a-f]{64}$/.test(parts[1])) {
    throw new Failure('public key ' + file +
      ': not "ed25519 " and 64 hex digits');
  }
  const raw = Buffer.from(parts[1], 'hex');
  // SubjectPublicKeyInfo for Ed25519 (RFC 8410) around the raw 32 bytes.
  const spki = Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'),
    raw]);
  return { raw, key: crypto.createPublicKey({ key: spki, format: 'der',
    type: 'spki' }) };
}

function ed25519Verify(pk, msg, sig) {
  if (!sig || sig.length !== 64) return false;
  return crypto.verify(null, Buffer.from(msg), pk.key, Buffer.from(sig));
}

// A SignedPolicy checked as every daemon checks it.  now === null: the
// expiry is not checked (a receipt's grant, or a test vector).
function verifyGrant(pk, signed, now, allowPreview = false) {
  const gb = Buffer.from(signed.grant || []);
  if (!ed25519Verify(pk, gb, signed.signature)) {
    throw new Failure('grant: signature does not verify');
  }
  const g = T.PolicyGrant.decode(gb);
  if (g.key_id !== pk.raw.subarray(0, 8).toString('hex')) {
    throw new Failure('grant: names key ' + g.key_id + ', verifies with ' +
      pk.raw.subarray(0, 8).toString('hex'));
  }
  const h = sha256(grantPolicyBytes(gb));
  if (h !== g.policy_hash) {
    throw new Failure('grant: says hash ' + g.policy_hash +
      ', its policy bytes hash to ' + h);
  }
  if (g.execution_id.startsWith('preview-') && !allowPreview) {
    throw new Failure('grant: a preview (' + g.execution_id +
      ') runs nothing');
  }
  if (now !== null && BigInt(now) >= BigInt(s64(g.expires_at))) {
    throw new Failure('grant: expired at ' + s64(g.expires_at));
  }
  return g;
}

// A SignedReceipt: its signature and key, the grant inside it (for the
// same task, execution and hash), and, given the result it came with, that
// it says what the result says.
function verifyReceipt(pk, sr, result) {
  const rb = Buffer.from(sr.receipt || []);
  if (!ed25519Verify(pk, Buffer.concat([RECEIPT_CONTEXT, rb]),
      sr.signature)) {
    throw new Failure('receipt: signature does not verify');
  }
  const r = T.Receipt.decode(rb);
  if (r.key_id !== pk.raw.subarray(0, 8).toString('hex')) {
    throw new Failure('receipt: names key ' + r.key_id);
  }
  if (!r.grant) throw new Failure('receipt: carries no grant');
  const g = verifyGrant(pk, r.grant, null);
  if (g.task_id !== r.task_id || g.execution_id !== r.execution_id ||
      g.policy_hash !== r.policy_hash) {
    throw new Failure('receipt: carries the grant of another execution');
  }
  if (!result) return r;
  if (r.task_id !== result.task_id ||
      r.execution_id !== result.execution_id) {
    throw new Failure('receipt: for execution ' + r.execution_id +
      ', the result for ' + result.execution_id);
  }
  if (!result.policy || r.policy_hash !== result.policy.hash) {
    throw new Failure('receipt: its policy is not the result\'s');
  }
  if (r.exit_code !== result.exit_code || r.signal !== result.signal) {
    throw new Failure('receipt: exit status differs from the result\'s');
  }
  const key = (o) => [o.name, o.type, s64(o.bytes), o.sha256].join('\0');
  const mine = (r.outputs || []).map(key);
  const theirs = (result.outputs || []).map(key);
  if (mine.join('\n') !== theirs.join('\n')) {
    throw new Failure('receipt: its outputs are not the result\'s');
  }
  return r;
}

// ---- the test vectors ------------------------------------------------------

function cmdVectors(args) {
  const dir = args[0] || path.join(REPO, 'proto', 'testdata');
  const rd = (n) => fs.readFileSync(path.join(dir, n));
  const pk = readPublicKey(path.join(dir, 'test-signing.pub'));
  const other = readPublicKey(path.join(dir, 'other-signing.pub'));
  let ok = true;
  const check = (name, good, fn) => {
    let why = '';
    let res = true;
    try { fn(); } catch (e) {
      if (!(e instanceof Failure)) throw e;
      res = false;
      why = e.message;
    }
    if (res === good) {
      console.log('vector ' + name + ': ' +
        (good ? 'verifies' : 'refused (' + why + ')'));
    } else {
      console.log('vector ' + name + ': WRONG (' +
        (good ? 'refused: ' + why : 'verified') + ')');
      ok = false;
    }
  };
  const want = rd('policy.sha256').toString().trim();
  const uh = rd('policy-unknown-field.sha256').toString().trim();
  if (sha256(rd('policy.bin')) !== want) {
    console.log('vector policy.bin: WRONG hash');
    ok = false;
  } else {
    console.log('vector policy.bin: hash ' + want);
  }
  const sp = (n) => T.SignedPolicy.decode(rd(n));
  const grantIs = (n, h, key = pk) => {
    const g = verifyGrant(key, sp(n), null);
    if (g.policy_hash !== h) throw new Failure('hash ' + g.policy_hash);
  };
  check('grant.bin', true, () => grantIs('grant.bin', want));
  // protobufjs here knows no field 99: an old client of that grant.
  check('grant-unknown-field.bin', true,
    () => grantIs('grant-unknown-field.bin', uh));
  // Why the bytes: a re-encoding of what was decoded hashes otherwise.
  const g = T.PolicyGrant.decode(sp('grant-unknown-field.bin').grant);
  const re = T.PolicyGrant.encode(g).finish();
  if (sha256(grantPolicyBytes(re)) === uh) {
    console.log('vector grant-unknown-field.bin: WRONG (a re-encoding ' +
      'hashes the same)');
    ok = false;
  }
  check('grant-wrong-key.bin', false,
    () => grantIs('grant-wrong-key.bin', want));
  check('grant.bin under other-signing.pub', false,
    () => grantIs('grant.bin', want, other));
  check('grant-policy-twice.bin', false,
    () => grantIs('grant-policy-twice.bin', want));
  check('grant-preview.bin', false, () => grantIs('grant-preview.bin', want));
  const rc = (n, key = pk) => {
    const r = verifyReceipt(key, T.SignedReceipt.decode(rd(n)), null);
    if (r.policy_hash !== want || r.outputs.length !== 1) {
      throw new Failure('receipt: unexpected content');
    }
    // The receipt replayed against a result for another execution.
    const res = { task_id: r.task_id, execution_id: r.execution_id,
      policy: { hash: r.policy_hash }, exit_code: r.exit_code,
      signal: r.signal, outputs: r.outputs };
    verifyReceipt(key, T.SignedReceipt.decode(rd(n)), res);
    let replay = false;
    try {
      verifyReceipt(key, T.SignedReceipt.decode(rd(n)),
        Object.assign({}, res, { execution_id: 'x-other' }));
    } catch (e) { replay = e instanceof Failure; }
    if (!replay) throw new Failure('a replayed receipt was taken');
  };
  check('receipt.bin', true, () => rc('receipt.bin'));
  check('receipt-output-changed.bin', false,
    () => rc('receipt-output-changed.bin'));
  check('receipt-wrong-key.bin', false, () => rc('receipt-wrong-key.bin'));
  check('receipt.bin under other-signing.pub', false,
    () => rc('receipt.bin', other));
  return ok ? EXIT.OK : EXIT.ERR;
}

// ---- transport ---------------------------------------------------------------

// One request, one reply: a 4-byte big-endian length, then an Envelope.
function call(sockPath, body, timeoutMs) {
  return new Promise((resolve, reject) => {
    const env = T.Envelope.create(Object.assign({ version: PROTOCOL_VERSION,
      request_id: process.pid * 65536 + 1 }, body));
    const data = Buffer.from(T.Envelope.encode(env).finish());
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const sock = net.createConnection(sockPath);
    let buf = Buffer.alloc(0);
    let done = false;
    const finish = (err, v) => {
      if (done) return;
      done = true;
      sock.destroy();
      if (err) reject(err); else resolve(v);
    };
    sock.setTimeout(timeoutMs, () => finish(new Failure('policyd at ' +
      sockPath + ' did not answer in time')));
    sock.on('connect', () => sock.write(Buffer.concat([len, data])));
    sock.on('error', (e) => {
      // A refused peer is closed unread: EPIPE or a reset, or ECONNREFUSED
      // / ENOENT when nothing listens.
      finish(new Failure('policyd unreachable at ' + sockPath + ': ' +
        e.code, EXIT.UNREACHABLE));
    });
    sock.on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      if (buf.length < 4) return;
      const n = buf.readUInt32BE(0);
      if (n === 0 || n > REPLY_MAX) {
        finish(new Failure('policyd sent a frame of ' + n + ' bytes'));
        return;
      }
      if (buf.length < 4 + n) return;
      try {
        finish(null, T.Envelope.decode(buf.subarray(4, 4 + n)));
      } catch (e) {
        finish(new Failure('policyd sent a reply that does not decode: ' +
          e.message));
      }
    });
    sock.on('end', () => finish(new Failure('policyd at ' + sockPath +
      ' closed the connection without a reply', EXIT.UNREACHABLE)));
  });
}

function expect(rep, body) {
  if (rep.error) {
    const code = T.ErrorCode.valuesById[rep.error.code] || 'ERROR_UNSPECIFIED';
    const status = code === 'ERROR_POLICY' || code === 'ERROR_LIMIT' ?
      EXIT.POLICY : code === 'ERROR_LAUNCH' ? EXIT.LAUNCH :
        code === 'ERROR_UNAVAILABLE' ? EXIT.UNREACHABLE : EXIT.ERR;
    throw new Failure(code + ': ' + rep.error.message +
      (rep.error.rule ? ' (rule ' + rep.error.rule + ')' : ''), status);
  }
  if (!rep[body]) throw new Failure('policyd answered without ' + body);
  return rep[body];
}

function readTask(file) {
  let t;
  try {
    t = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    throw new Failure(file + ': ' + e.message, EXIT.USAGE);
  }
  const task = { id: t.id, type: t.type, tenant: t.tenant, user: t.user,
    datasets: t.datasets || [], outputs: t.outputs || [] };
  if (t.traceparent) task.traceparent = t.traceparent;
  if (t.code) {
    task.code_name = path.basename(t.code);
    task.code = fs.readFileSync(path.resolve(path.dirname(file), t.code));
  }
  return task;
}

async function cmdCompile(opts) {
  const task = readTask(opts.task);
  const rep = expect(await call(opts.socket, { compile: { task,
    preview: opts.preview } }, opts.timeout), 'compiled');
  const pk = readPublicKey(opts.publicKey);
  const g = verifyGrant(pk, rep.signed, Math.floor(Date.now() / 1000),
    opts.preview);
  if (g.policy_hash !== rep.policy_hash) {
    throw new Failure('compile: the reply says ' + rep.policy_hash +
      ', the grant ' + g.policy_hash);
  }
  if (opts.preview !== g.execution_id.startsWith('preview-')) {
    throw new Failure('compile: execution ' + g.execution_id +
      (opts.preview ? ' is no preview' : ' is a preview'));
  }
  console.log(rep.policy_hash);
  console.error('orchestrator.js: grant verified (key ' + g.key_id +
    ', execution ' + g.execution_id + ')');
  return EXIT.OK;
}

async function cmdRun(opts) {
  const task = readTask(opts.task);
  const r = expect(await call(opts.socket, { run: { task } }, opts.timeout),
    'result');
  const out = {
    task_id: r.task_id, execution_id: r.execution_id,
    policy: r.policy ? { name: r.policy.name, version: r.policy.version,
      hash: r.policy.hash } : {},
    exit_code: r.exit_code, signal: r.signal,
    outputs: (r.outputs || []).map((o) => ({ name: o.name, type: o.type,
      bytes: s64(o.bytes), sha256: o.sha256 })),
  };
  console.log(JSON.stringify(out, null, 2));
  if (!r.receipt) throw new Failure('the result carries no receipt');
  const rc = verifyReceipt(readPublicKey(opts.publicKey), r.receipt, r);
  console.error('orchestrator.js: receipt verified (key ' + rc.key_id +
    ', execution ' + rc.execution_id + ', ' + rc.outputs.length +
    ' outputs, policy ' + rc.policy_hash + ')');
  return EXIT.OK;
}

function usage(why) {
  if (why) console.error('orchestrator.js: ' + why);
  console.error('usage: orchestrator.js [--socket S] [--public-key F] ' +
    '(vectors [DIR] | compile TASK.json [--preview] | run TASK.json)');
  return EXIT.USAGE;
}

async function main(argv) {
  const state = process.env.SBX_STATE || './run';
  const opts = { socket: path.join(state, 'sockets', 'policyd.sock'),
    publicKey: path.join(state, 'etc', 'policyd.pub'), preview: false,
    timeout: 600000 };
  const rest = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--socket' && i + 1 < argv.length) {
      opts.socket = argv[++i];
    } else if (argv[i] === '--public-key' && i + 1 < argv.length) {
      opts.publicKey = argv[++i];
    } else if (argv[i] === '--preview') {
      opts.preview = true;
    } else {
      rest.push(argv[i]);
    }
  }
  const cmd = rest.shift();
  if (cmd === 'vectors' && rest.length <= 1) return cmdVectors(rest);
  if ((cmd === 'compile' || cmd === 'run') && rest.length === 1) {
    opts.task = rest[0];
    return cmd === 'compile' ? cmdCompile(opts) : cmdRun(opts);
  }
  return usage(cmd ? 'bad arguments to ' + cmd : 'no command');
}

main(process.argv.slice(2)).then((rc) => { process.exitCode = rc; },
  (e) => {
    if (!(e instanceof Failure)) throw e;
    console.error('orchestrator.js: ' + e.message);
    process.exitCode = e.status;
  });
