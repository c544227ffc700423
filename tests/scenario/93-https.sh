#!/bin/sh
# Real clients inside the sandbox over HTTPS, through sbx-init's bridge and
# egressd's TLS interception (root: sbx-up started all six daemons and the
# FX API, which serves api.fx-rates.internal over HTTPS with a certificate
# from a test CA that egressd trusts through upstream_cas).  The task's
# Python code fetches https://api.fx-rates.internal:PORT/v1/rates with
# urllib and, when the image has it, with `curl -sS`, trusting only what
# sbx-init points them at (the task CA): no verification is turned off
# anywhere.  Asserted: both get the JSON rates (so egressd verified the
# upstream against the test CA and injected the token, which the code
# never had: the API answers 401 without it); the certificate the sandbox
# sees is minted by the task CA, not the FX test CA (the tunnel is
# intercepted); the API logged each GET over https with the credential;
# a GET to a path the rule does not allow, inside the same kind of tunnel,
# gets a 403 whose JSON body names path-not-allowed and the policy hash,
# never reaches the API, and is in the result's denials with boundary
# egress; the same URL in plain http is refused credential-needs-tls
# (the credential is never sent in clear) and reaches nothing.
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

is_root || skip "the HTTPS example needs root (launchd-sbx, daemon users)"
[ -S "$SBX_STATE/sockets/launchd.sock" ] || skip "launchd-sbx is not running"
command -v jq >/dev/null || skip "jq not installed"
wired_egress || skip "launchd-sbx is not wired to egressd yet (sbx-up left egress: out of $SBX_STATE/etc/launchd-sbx.yaml)"
[ -S "$SBX_STATE/sockets/egressd.sock" ] || fail "sbx-up did not start egressd"
[ -f "$SBX_STATE/fxapi.pid" ] || fail "sbx-up did not start the FX API"

# The FX API's HTTPS port (sbx-up's SBX_FX_PORT).
tlsport=${SBX_FX_PORT:-8417}
host=api.fx-rates.internal
grep -q "^upstream_cas: .*fxapi-ca.pem" "$SBX_STATE/etc/egressd.yaml" ||
    fail "egressd.yaml does not trust the FX test CA (upstream_cas)"
grep -Eq "^127\.0\.0\.1 +$host\$" "$SBX_STATE/etc/egressd-hosts" ||
    fail "egressd's hosts file does not map $host"

# A user of this test's own, entitled to the FX host, so its tasks do not
# count against the worked example's.
run ctl entitlement add --tenant acme --user https-probe \
    --dataset supplier-2026-q3 --host "$host"
expect_rc 0 "entitlement for acme/https-probe"

id=sc-https-$$
cat >"$T/task.yaml" <<EOT
task: {id: $id, type: analytics, tenant: acme, user: https-probe}
datasets: [supplier-2026-q3]
code: main.py
outputs: []
EOT
cat >"$T/main.py" <<EOT
# Fetch the FX rates over HTTPS the way agent code does: through the
# proxy sbx-init names, trusting the CA bundle sbx-init names.
import json, os, shutil, socket, ssl, subprocess, sys
import urllib.error, urllib.parse, urllib.request

BASE = "https://$host:$tlsport"
URL = BASE + "/v1/rates?base=USD"


def say(tag, obj):
    print(tag + " " + json.dumps(obj, sort_keys=True), flush=True)


say("env", {k: os.environ.get(k) for k in
            ("HTTPS_PROXY", "SSL_CERT_FILE", "CURL_CA_BUNDLE")})

# 1. urllib, default context: verification on, SSL_CERT_FILE's bundle.
try:
    with urllib.request.urlopen(URL, timeout=30) as r:
        say("urllib", {"status": r.status, "body": json.load(r)})
except urllib.error.HTTPError as e:
    say("urllib", {"status": e.code, "error": e.read().decode("utf-8", "replace")})
except Exception as e:
    say("urllib", {"status": 0, "error": repr(e)})

# 2. curl from the image, if it has one.
if shutil.which("curl"):
    p = subprocess.run(["curl", "-sS", "--max-time", "30", URL],
                       capture_output=True, text=True)
    say("curl", {"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr})
else:
    say("curl", {"absent": True})

# 3. Who signed the certificate the sandbox sees: a CONNECT through the
# proxy by hand, verified like urllib verifies.
try:
    px = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
    s = socket.create_connection((px.hostname, px.port), timeout=30)
    s.sendall(("CONNECT $host:$tlsport HTTP/1.1\r\n"
               "Host: $host:$tlsport\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        if not b:
            break
        head += b
    t = ssl.create_default_context().wrap_socket(s, server_hostname="$host")
    cert = t.getpeercert()
    t.close()
    say("cert", {"connect": head.split(b"\r\n")[0].decode(),
                 "issuer": dict(x[0] for x in cert["issuer"]),
                 "san": [v for k, v in cert.get("subjectAltName", ())]})
except Exception as e:
    say("cert", {"error": repr(e)})

# 4. A path the rule does not allow, inside the tunnel.
try:
    with urllib.request.urlopen(BASE + "/v2/keys", timeout=30) as r:
        say("denied", {"status": r.status, "body": r.read().decode()})
except urllib.error.HTTPError as e:
    say("denied", {"status": e.code,
                   "type": e.headers.get("Content-Type"),
                   "body": e.read().decode("utf-8", "replace")})
except Exception as e:
    say("denied", {"status": 0, "error": repr(e)})

# 5. The same URL in plain http: a credential is bound to the host, so
# egressd refuses to send it in clear (no scheme: http in the policy).
try:
    with urllib.request.urlopen("http://$host:$tlsport/v1/rates?base=USD",
                                timeout=30) as r:
        say("plain", {"status": r.status, "body": r.read().decode()})
except urllib.error.HTTPError as e:
    say("plain", {"status": e.code,
                  "body": e.read().decode("utf-8", "replace")})
except Exception as e:
    say("plain", {"status": 0, "error": repr(e)})
EOT

# The compiled policy has the HTTPS rule, on the HTTPS port with the
# loopback CIDR, and the credential bound to it.
run ctl compile "$T/task.yaml"
expect_rc 0 "compile of the HTTPS task"
# entry SECTION: the entry for $host in that list of the policy, one line.
entry() {
	awk -v s="$1:" -v h="$host" '
	    { ind = match($0, /[^ ]/) - 1 }
	    ind <= 2 && !/^ *- / { in_s = ($1 == s); on = 0; next }
	    in_s && /^ *- / { on = ($0 ~ "host: *\"?" h "\"?$") }
	    in_s && on { printf "%s ", $0 }' "$T/out"
}
entry allow | grep -q "port: $tlsport" ||
    { show; fail "the policy has no rule for $host on port $tlsport"; }
entry allow | grep -q "cidrs: \[127\.0\.0\.0/8\]" ||
    { show; fail "the policy's rule for $host lacks the loopback CIDR"; }
entry credentials | grep -q "secret: fx-readonly" ||
    { show; fail "the policy binds no credential to $host"; }
! entry credentials | grep -q "scheme: *http" ||
    { show; fail "the policy lets the credential for $host go over plain HTTP"; }
note "policy: $(entry allow | tr -s ' ')"

fxlog=$SBX_STATE/log/fxapi.log
fxbefore=$(wc -l <"$fxlog")
# The example's tier is gvisor: egressd answers sbx-init's handoff offer
# no, and every connection is relayed (tests/launch/run has runc's).
handoffs() { ctl metrics --prometheus 2>/dev/null | sed -n 's/^sbx_egressd_handoffs_total //p'; }
hbefore=$(handoffs)

run ctl run "$T/task.yaml"
expect_rc 0 "run of the HTTPS task"
hafter=$(handoffs)
if grep -q '^isolation: gvisor' "$SBX_STATE/templates/analytics-readonly.yaml" 2>/dev/null; then
	[ -n "$hafter" ] && [ "$hafter" = "$hbefore" ] ||
	    fail "egressd took connections from a gvisor sandbox ($hbefore -> $hafter)"
	note "gvisor: no handoff, every connection relayed ($hafter handoffs)"
fi
cp "$T/out" "$T/run.json"
jq -e . "$T/run.json" >/dev/null || { show; fail "run did not print JSON"; }
plain_stdout "$T/run.json" >"$T/stdout"
[ "$(jq -r .exit_code "$T/run.json")" = 0 ] || { show; fail "exit_code is not 0"; }
hash=$(jq -r .policy.hash "$T/run.json")
# line TAG: the JSON the task printed after "TAG ".
line() { sed -n "s/^$1 //p" "$T/stdout" | head -n 1; }
for t in env urllib curl cert denied plain; do
	[ -n "$(line $t)" ] || { show; fail "the task printed no \"$t\" line"; }
done

# sbx-init's environment for the clients.
line env | jq -e '.SSL_CERT_FILE == "/run/sbx/ca.pem" and .CURL_CA_BUNDLE == "/run/sbx/ca.pem" and (.HTTPS_PROXY | startswith("http://"))' >/dev/null ||
    { show; fail "sbx-init did not point the clients at the proxy and the task CA: $(line env)"; }

# rates_ok JSON: the FX API's answer for base USD.
rates_ok() {
	jq -e '.base == "USD" and .source == "api.fx-rates.internal" and
	    .rates.USD == 1 and (.rates.EUR > 0.9) and (.rates | length) == 5' >/dev/null
}
line urllib | jq -e '.status == 200' >/dev/null ||
    { show; fail "urllib over HTTPS failed: $(line urllib)"; }
line urllib | jq .body | rates_ok ||
    { show; fail "urllib did not get the JSON rates: $(line urllib)"; }
note "urllib: 200, $(line urllib | jq -c .body.rates)"

if line curl | jq -e '.absent == true' >/dev/null; then
	echo "note: the image has no curl: only urllib was tried"
	ncl=1
else
	line curl | jq -e '.rc == 0 and .stderr == ""' >/dev/null ||
	    { show; fail "curl -sS over HTTPS failed: $(line curl)"; }
	line curl | jq -r .stdout | rates_ok ||
	    { show; fail "curl did not get the JSON rates: $(line curl)"; }
	note "curl -sS: exit 0, the JSON rates"
	ncl=2
fi

# Intercepted: the sandbox sees a leaf from its task CA for the host.
line cert | jq -e --arg h "$host" '.connect == "HTTP/1.1 200 Connection established" or (.connect | test("^HTTP/1.[01] 200"))' >/dev/null ||
    { show; fail "CONNECT through the bridge was not answered 200: $(line cert)"; }
line cert | jq -e --arg h "$host" '(.issuer.commonName | test("sbx task CA")) and (.san | index($h) != null)' >/dev/null ||
    { show; fail "the sandbox's certificate is not the task CA's for $host: $(line cert)"; }
! line cert | grep -q 'FX API test CA' ||
    { show; fail "the sandbox saw the FX test CA: the tunnel was not intercepted"; }
note "intercepted: leaf issued by \"$(line cert | jq -r .issuer.commonName)\""

# The disallowed path: 403 with the JSON denial, in the result.
line denied | jq -e '.status == 403' >/dev/null ||
    { show; fail "GET /v2/keys inside the tunnel was not refused with 403: $(line denied)"; }
line denied | jq -r .body >"$T/denial.json"
jq -e --arg h "$hash" '.rule == "path-not-allowed" and (.detail | length > 0) and .policy_hash == $h' \
    "$T/denial.json" >/dev/null ||
    { show; cat "$T/denial.json"; fail "the 403 body is not {rule: path-not-allowed, detail, policy_hash: $hash}"; }
line denied | jq -e '.type | test("application/json")' >/dev/null ||
    { show; fail "the denial is not served as application/json: $(line denied)"; }
jq -e '[.denials[] | select(.rule == "path-not-allowed" and .boundary == "egress")] | length == 1' \
    "$T/run.json" >/dev/null ||
    { show; fail "the result's denials do not list path-not-allowed with boundary egress"; }
note "GET /v2/keys: 403 $(jq -c . "$T/denial.json")"

# The credentialed host in plain http: refused before any connection,
# with its own rule.
line plain | jq -e '.status == 403' >/dev/null ||
    { show; fail "a plain-http GET to the credentialed host was not refused with 403: $(line plain)"; }
line plain | jq -r .body | jq -e --arg h "$hash" '.rule == "credential-needs-tls" and .policy_hash == $h' >/dev/null ||
    { show; fail "the plain-http refusal does not name credential-needs-tls: $(line plain)"; }
jq -e '[.denials[] | select(.rule == "credential-needs-tls" and .boundary == "egress")] | length == 1' \
    "$T/run.json" >/dev/null ||
    { show; fail "the result's denials do not list credential-needs-tls with boundary egress"; }
note "GET http://$host:$tlsport/...: 403 credential-needs-tls"

# What reached the API: each allowed GET over https, with the credential,
# and nothing else (not the denied path, nothing without the token).
tail -n +"$((fxbefore + 1))" "$fxlog" >"$T/fxapi.log"
n=$(grep -c 'GET /v1/rates 200 credential=yes scheme=https' "$T/fxapi.log" || true)
[ "$n" -eq "$ncl" ] ||
    { cat "$T/fxapi.log"; fail "the FX API logged $n authorised HTTPS GETs, expected $ncl"; }
! grep -q 'credential=no' "$T/fxapi.log" ||
    { cat "$T/fxapi.log"; fail "a request reached the FX API without the credential"; }
! grep -q '/v2/' "$T/fxapi.log" ||
    { cat "$T/fxapi.log"; fail "the denied path reached the FX API"; }
! grep -q 'scheme=http$' "$T/fxapi.log" ||
    { cat "$T/fxapi.log"; fail "a request reached the FX API's plain HTTP side"; }
[ "$(jq -r .usage.egress_requests "$T/run.json")" -ge "$ncl" ] ||
    { show; fail "usage.egress_requests does not count the HTTPS GETs"; }
note "the FX API saw $n GET /v1/rates over https, each with the injected token"

# The token never entered the sandbox: not in what the code printed.
tok=$(cat "$SBX_STATE/fxapi/token")
! grep -qF "${tok#Bearer }" "$T/run.json" ||
    fail "the FX token appears in the run's result"
note "the token is nowhere in the result"
