// tests/differential/node_server.js: the Node.js upstream of the
// differential harness (tests/differential/run).  Node's own http module
// (llhttp) with its defaults parses every request; the handler records
// what it got, one JSON line a request, and answers "ok".  A request
// llhttp refuses is recorded as an error on its connection.
//
//   node node_server.js PORT LOG
//
// Each line: {"conn": N, "peer": PORT, "n": I, "method", "target",
// "host", "hosts", "body", "version", "route"} ("route": the path the
// WHATWG URL of the request has, what Node applications route on), {"conn", "peer", "n", "error"}
// for a request refused, or {"conn", "peer", "closed": true} once the
// connection is closed (after every other line of it).
// Invariant 12 (DESIGN.md) is checked against these lines: what egressd
// forwards must be read the same way here as by nginx and Python.
"use strict";
const http = require("http");
const fs = require("fs");

const port = Number(process.argv[2]);
const log = process.argv[3];
let nconn = 0;

// Synchronous appends: the line is on disk before the answer is written,
// so a client that has read its answer can read the log.
function record(o) {
	fs.appendFileSync(log, JSON.stringify(o) + "\n");
}

// Node's defaults but for the head size: at least egressd's (16 KiB), so
// a refusal here is about parsing, not size.
const srv = http.createServer({ maxHeaderSize: 65536 }, (req, res) => {
	const s = req.socket;
	s.sbxN = (s.sbxN || 0) + 1;
	const n = s.sbxN;
	let body = 0;
	req.on("data", (d) => { body += d.length; });
	req.on("end", () => {
		const hosts = [];
		for (let i = 0; i < req.rawHeaders.length; i += 2)
			if (req.rawHeaders[i].toLowerCase() === "host")
				hosts.push(req.rawHeaders[i + 1]);
		// The path a Node application routes on: the WHATWG URL.
		let route = null;
		try {
			route = new URL(req.url, "http://" +
			    (req.headers.host || "invalid")).pathname;
		} catch (e) {
			route = null;
		}
		record({ conn: s.sbxId, peer: s.sbxPeer, n: n,
		    method: req.method, target: req.url, route: route,
		    host: req.headers.host === undefined ? null :
		    req.headers.host, hosts: hosts, body: body,
		    version: req.httpVersion });
		res.setHeader("Content-Type", "text/plain");
		res.end("ok\n");
	});
	req.on("error", (e) => {
		record({ conn: s.sbxId, peer: s.sbxPeer, n: n,
		    error: e.code || String(e) });
	});
});
srv.on("connection", (s) => {
	s.sbxId = ++nconn;
	// The harness waits for this line before it reads the others.
	s.on("close", () => setImmediate(() =>
	    record({ conn: s.sbxId, peer: s.sbxPeer,
	    closed: true })));
	s.sbxPeer = s.remotePort;
});
srv.on("clientError", (err, s) => {
	record({ conn: s.sbxId, peer: s.sbxPeer, n: (s.sbxN || 0) + 1,
	    error: err.code || String(err) });
	if (s.writable)
		s.end("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n" +
		    "Content-Length: 0\r\n\r\n");
	else
		s.destroy();
});
srv.listen(port, "127.0.0.1", () => {
	process.stdout.write("ready\n");
});
process.on("SIGTERM", () => process.exit(0));
