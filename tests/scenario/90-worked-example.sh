#!/bin/sh
# The reference text's worked example through the whole deployment (root:
# sbx-up started all six daemons and the FX API): the agent's code
# (deploy/examples/main.py) converts the injected spreadsheet with live
# rates from the FX API over HTTPS, which it can only have got through
# egressd's interception with the credential brokerd released, added
# inside the TLS egressd verified (the code sends none and the API answers
# 401 without it); follows the hidden cell, and each attempt fails at its
# boundary: the POST to an external host (host-not-allowed), the file
# smuggled in a long GET query to the allowed host (url-too-long or
# request-too-large), both listed in the result with boundary egress and
# in egressd's audit; the stray archive is dropped by gated while the CSV
# and PNG are released with the right types and real content; the API saw
# the credential on every request and no smuggled query; `sbxctl audit
# TASK` has records from policyd, launchd-sbx, brokerd, egressd and gated
# under one hash (the last two only where sbxctl asks them); `audit verify`
# is ok for every chain.  The task carries the orchestrator's W3C
# traceparent (issue 13, item 7): it comes back in the result, is on every
# record policyd, launchd-sbx, brokerd, egressd and gated wrote for the
# execution (the denials too) and on their log lines for it, and a bad one
# is refused with a message naming the field.
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

is_root || skip "the worked example needs root (launchd-sbx, daemon users)"
[ -S "$SBX_STATE/sockets/launchd.sock" ] || skip "launchd-sbx is not running"
command -v jq >/dev/null || skip "jq not installed"
wired_egress || skip "launchd-sbx is not wired to egressd yet (sbx-up left egress: out of $SBX_STATE/etc/launchd-sbx.yaml)"
wired_gate || skip "launchd-sbx is not wired to gated yet (sbx-up left gate: out of $SBX_STATE/etc/launchd-sbx.yaml)"
for s in egressd.sock brokerd-admin.sock gated.sock; do
	[ -S "$SBX_STATE/sockets/$s" ] || fail "sbx-up did not start the daemon behind $s"
done
[ -f "$SBX_STATE/fxapi.pid" ] || fail "sbx-up did not start the FX API"

id=sc-example-$$
tp=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
sed -e "s/id: t-1,/id: $id,/" -e "s/user: alice}/user: alice, traceparent: $tp}/" \
    "$EX/task.yaml" >"$T/task.yaml"
grep -q "traceparent: $tp}" "$T/task.yaml" || fail "the example task file changed shape"
sed "s|api.fx-rates.internal:8417|api.fx-rates.internal:${SBX_FX_PORT:-8417}|" \
    "$EX/main.py" >"$T/main.py"
fxlog=$SBX_STATE/log/fxapi.log
fxbefore=$(wc -l <"$fxlog")

run ctl run "$T/task.yaml"
expect_rc 0 "run of the worked example"
cp "$T/out" "$T/run.json"
jq -e . "$T/run.json" >/dev/null || { show; fail "run did not print JSON"; }
plain_stdout "$T/run.json" >"$T/stdout"
[ "$(jq -r .exit_code "$T/run.json")" = 0 ] || { show; fail "exit_code is not 0"; }

# Step 1: live rates, through the proxy, with the injected credential.
grep -q '^rates: live from api.fx-rates.internal' "$T/stdout" ||
    { show; fail "the task did not get its rates from the FX API"; }
grep -q 'invoices, 3 months' "$T/stdout" || { show; fail "no summary on stdout"; }
tail -n +"$((fxbefore + 1))" "$fxlog" >"$T/fxapi.log"
grep -q 'GET /v1/rates 200 credential=yes scheme=https$' "$T/fxapi.log" ||
    { cat "$T/fxapi.log"; fail "the FX API saw no authorised GET /v1/rates over HTTPS"; }
! grep -q 'scheme=http$' "$T/fxapi.log" ||
    { cat "$T/fxapi.log"; fail "a request reached the FX API's plain HTTP side (the credential crossed in clear)"; }
! grep -q 'credential=no' "$T/fxapi.log" ||
    { cat "$T/fxapi.log"; fail "a request reached the FX API without the credential"; }
[ "$(grep -c ' /v1/rates ' "$T/fxapi.log")" -eq 1 ] ||
    { cat "$T/fxapi.log"; fail "the smuggling GET reached the FX API"; }
[ "$(jq -r .usage.egress_requests "$T/run.json")" -ge 1 ] ||
    { show; fail "usage.egress_requests does not count the GET"; }
note "step 1: live rates, the API saw the credential the code never had"

# Steps 2 and 3: the denials, in the result with boundary egress.
jq -e '[.denials[] | select(.rule == "host-not-allowed" and .boundary == "egress")] | length == 1' \
    "$T/run.json" >/dev/null || { show; fail "no host-not-allowed denial with boundary egress"; }
jq -e '[.denials[] | select((.rule == "url-too-long" or .rule == "request-too-large") and .boundary == "egress")] | length >= 1' \
    "$T/run.json" >/dev/null || { show; fail "no url-too-long/request-too-large denial with boundary egress"; }
grep -Eq '^injected: POST https://upload.supplier-sync.example/ingest: denied' "$T/stdout" ||
    { show; fail "the code was not told its POST was denied"; }
grep -Eq '^injected: GET with a [0-9]+-byte URL: denied 41[34] (url-too-long|request-too-large)' "$T/stdout" ||
    { show; fail "the code did not read the rule from the proxy's 413/414 body"; }
! grep -q EXFILTRATED "$T/stdout" || { show; fail "an exfiltration attempt succeeded"; }
note "steps 2, 3: $(jq -r '[.denials[] | "\(.rule)/\(.boundary)"] | join(", ")' "$T/run.json")"

# Step 5: the gate.
for o in eur_totals.csv:text/csv monthly.png:image/png; do
	n=${o%%:*} ty=${o#*:}
	jq -e --arg n "$n" --arg t "$ty" \
	    '[.outputs[] | select(.name == $n and .type == $t and .bytes > 0)] | length == 1' \
	    "$T/run.json" >/dev/null || { show; fail "$n not released as $ty"; }
done
jq -r '.outputs[] | select(.name == "eur_totals.csv") | .content' "$T/run.json" >"$T/csv.raw"
# sbxctl prints bytes either as text or as base64: accept either.
if ! grep -q '^month,eur' "$T/csv.raw"; then
	base64 -d "$T/csv.raw" >"$T/csv.dec" 2>/dev/null && mv "$T/csv.dec" "$T/csv.raw"
fi
grep -q '^2026-09,' "$T/csv.raw" || { cat "$T/csv.raw"; fail "eur_totals.csv content is not the monthly totals"; }
jq -e '[.dropped[] | select(.name == "stray.tar" and .reason == "undeclared")] | length == 1' \
    "$T/run.json" >/dev/null || { show; fail "stray.tar was not dropped as undeclared"; }
jq -e '[.outputs[].name] | index("stray.tar") == null' "$T/run.json" >/dev/null ||
    { show; fail "stray.tar was released"; }
note "step 5: eur_totals.csv and monthly.png released, stray.tar dropped (undeclared)"

# The audit trail under the task id.
xid=$(jq -r .execution_id "$T/run.json")
h=$(jq -r .policy.hash "$T/run.json")
run ctl audit "$id"
expect_rc 0 "audit $id"
cp "$T/out" "$T/audit.txt"
for d in "policyd +compile" "launchd-sbx +launch" "launchd-sbx +exit" "brokerd +grant"; do
	grep -Eq "^[^ ]+ +$d .*$xid +$h" "$T/audit.txt" ||
	    { show; fail "no \"$d\" record for $xid under $h"; }
done
missing=""
if grep -Eq '^[^ ]+ +egressd ' "$T/audit.txt"; then
	grep -Eq "egressd +deny +host-not-allowed .*$xid +$h" "$T/audit.txt" ||
	    { show; fail "egressd's audit has no host-not-allowed for $xid"; }
	grep -Eq "egressd +deny +(url-too-long|request-too-large) .*$xid +$h" "$T/audit.txt" ||
	    { show; fail "egressd's audit has no url-too-long for $xid"; }
else
	missing="$missing egressd"
fi
if grep -Eq '^[^ ]+ +gated ' "$T/audit.txt"; then
	grep -Eq "gated +drop .*$xid" "$T/audit.txt" ||
	    { show; fail "gated's audit has no drop for $xid"; }
else
	missing="$missing gated"
fi
[ -z "$missing" ] || echo "note: sbxctl audit does not ask:$missing (their admin sockets answer audit_query; sbxctl's daemon list lacks them)"
note "audit $id: policyd, launchd-sbx, brokerd${missing:+ (not:$missing)} under $h"

# The trace: back in the result, on every record of the execution (five
# daemons, the denials included), on the daemons' log lines for it.
[ "$(jq -r .traceparent "$T/run.json")" = "$tp" ] ||
    { show; fail "the result does not carry the task's traceparent back"; }
run ctl -j audit "$id"
expect_rc 0 "audit -j $id"
cp "$T/out" "$T/audit.json"
for d in policyd launchd-sbx brokerd egressd gated; do
	jq -e --arg x "$xid" --arg d "$d" \
	    '[.events[] | select(.execution_id == $x and .daemon == $d)] | length > 0' \
	    "$T/audit.json" >/dev/null || { cat "$T/audit.json"; fail "no $d record for $xid"; }
done
jq -e --arg x "$xid" --arg tp "$tp" \
    '[.events[] | select(.execution_id == $x and .traceparent != $tp)] | length == 0' \
    "$T/audit.json" >/dev/null ||
    { cat "$T/audit.json"; fail "a record of $xid lacks the traceparent"; }
jq -e --arg x "$xid" --arg tp "$tp" \
    '[.events[] | select(.execution_id == $x and .daemon == "egressd" and .action == "deny" and .traceparent == $tp)] | length >= 2' \
    "$T/audit.json" >/dev/null ||
    { cat "$T/audit.json"; fail "egressd's denials of $xid lack the traceparent"; }
jq -e --arg x "$xid" --arg tp "$tp" \
    '[.events[] | select(.execution_id == $x and .daemon == "gated" and .action == "drop" and (.detail | contains("stray.tar")) and .traceparent == $tp)] | length == 1' \
    "$T/audit.json" >/dev/null ||
    { cat "$T/audit.json"; fail "gated's drop of $xid lacks the traceparent"; }
grep -q "  traceparent $tp\$" "$T/audit.txt" ||
    { cat "$T/audit.txt"; fail "sbxctl audit does not show the traceparent"; }
for d in egressd gated launchd-sbx; do
	grep -q "execution=$xid policy=$h.*traceparent=$tp\]\$" "$SBX_STATE/log/$d.log" ||
	    { tail -n 20 "$SBX_STATE/log/$d.log"; fail "$d logged no line for $xid with its traceparent"; }
done
grep -q "deny host-not-allowed task $id execution $xid: .*rule=host-not-allowed traceparent=$tp\]\$" \
    "$SBX_STATE/log/egressd.log" || { tail -n 20 "$SBX_STATE/log/egressd.log"; fail "egressd's denial line lacks the trace"; }
note "traceparent $tp: in the result, on $(jq --arg x "$xid" '[.events[] | select(.execution_id == $x)] | length' "$T/audit.json") records of $xid and the daemons' lines"

# A bad traceparent: sbxctl names the field and the file's line; policyd
# refuses it as well (tests/orchestrator sends one past a client's check).
sed "s/traceparent: $tp}/traceparent: 00-$(printf '%032d' 0)-00f067aa0ba902b7-01}/" \
    "$T/task.yaml" >"$T/task-badtp.yaml"
run ctl run "$T/task-badtp.yaml"
[ "$rc" -ne 0 ] || { show; fail "a task with an all-zero trace-id ran"; }
grep -q "task-badtp.yaml:4:.*task.traceparent.*the trace-id is all zeros" "$T/err" ||
    { show; fail "the refusal of a bad traceparent does not name the field and line"; }
note "a bad traceparent: $(head -n 1 "$T/err")"

run ctl audit verify
expect_rc 0 "audit verify"
for d in policyd launchd-sbx brokerd; do
	out_has "^$d: ok" "$d's chain is not reported ok"
done
out_lacks 'FAIL|broken|mismatch' "a chain does not verify"
note "audit verify: $(tr '\n' ';' <"$T/out")"

# Every daemon's counters through one command: egressd's per-rule denial
# counter names the rules steps 2 and 3 tripped.
run ctl metrics
expect_rc 0 "metrics"
out_has '^sbx_policyd_' "policyd's metrics are missing"
out_has '^sbx_egressd_denials_total\{rule="host-not-allowed"\} [1-9]' \
    "egressd's host-not-allowed counter is missing or zero"
note "metrics: $(grep -c '^sbx_' "$T/out") samples from $(grep -o '^sbx_[a-z]*' "$T/out" | sort -u | tr '\n' ' ')"
