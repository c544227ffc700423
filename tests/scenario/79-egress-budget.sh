#!/bin/sh
# network.max_out_kb is the task's across all its executions, durably
# (issue 10, item 6).  One task of the example type (256 KiB) runs three
# times: the first sends 50 GETs of about 1.9 KiB each, the second sends
# until egressd says egress-budget-exhausted, then policyd is restarted
# and the third tries again.  Asserted: the second is stopped by the
# budget once the two together have sent what the task may (not a
# fresh 256 KiB of its own); the three runs' bytes out never sum past
# 256 KiB; after the restart the third is denied at its first request
# (policyd.db, not memory, holds what the task spent); each run's spend
# is audited as policyd's "egress" record.
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

is_root || skip "launchd-sbx needs root: no launch scenarios"
[ -S "$SBX_STATE/sockets/launchd.sock" ] || skip "launchd-sbx is not running"
command -v jq >/dev/null || skip "jq not installed"
wired_egress || skip "launchd-sbx is not wired to egressd"

id=sc-egbudget-$$
budget=262144
code() {	# code FILE MAX: GET until MAX answers or a denial
	cat >"$T/$1" <<EOT
import json, urllib.request, urllib.error
url = "https://api.fx-rates.internal:${SBX_FX_PORT:-8417}/v1/rates?pad=" + "p" * 1800
ok = 0
rule = "-"
for i in range($2):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            r.read()
            ok += 1
    except urllib.error.HTTPError as e:
        try:
            rule = json.loads(e.read()).get("rule")
        except ValueError:
            rule = "status %d" % e.code
        break
print("ok=%d rule=%s" % (ok, rule))
EOT
}
code spend.py 50
code drain.py 400
task() {	# task FILE CODE
	cat >"$T/$1" <<EOT
task: {id: $id, type: analytics, tenant: acme, user: alice}
datasets: [supplier-2026-q3]
code: $2
outputs: []
EOT
}
task spend.yaml spend.py
task drain.yaml drain.py

out_of() { jq -r .usage.egress_bytes_out "$1"; }

run ctl run "$T/spend.yaml"
expect_rc 0 "first run"
cp "$T/out" "$T/r1.json"
[ "$(plain_stdout "$T/r1.json")" = "ok=50 rule=-" ] ||
    { show; fail "the first run did not send its 50 requests"; }
b1=$(out_of "$T/r1.json")
note "run 1: 50 requests, $b1 bytes out"

run ctl run "$T/drain.yaml"
expect_rc 0 "second run"
cp "$T/out" "$T/r2.json"
s2=$(plain_stdout "$T/r2.json")
b2=$(out_of "$T/r2.json")
case $s2 in
*"rule=egress-budget-exhausted") ;;
*) show; fail "the second run was not stopped by the budget: $s2" ;;
esac
[ $((b1 + b2)) -le $budget ] ||
    { show; fail "two runs of one task sent $((b1 + b2)) bytes, over its $budget"; }
# A fresh budget would have let it send about as much as the first could.
[ "$b2" -lt $((budget - b1 + 4096)) ] ||
    { show; fail "the second run got a budget of its own ($b2 bytes)"; }
note "run 2: $s2, $b2 bytes out; together $((b1 + b2)) of $budget"

# policyd restarts: what the task spent is in policyd.db.
stop_daemon policyd
daemon_up
run ctl run "$T/drain.yaml"
expect_rc 0 "third run, after policyd's restart"
cp "$T/out" "$T/r3.json"
s3=$(plain_stdout "$T/r3.json")
b3=$(out_of "$T/r3.json")
[ $((b1 + b2 + b3)) -le $budget ] ||
    { show; fail "three runs sent $((b1 + b2 + b3)) bytes, over the task's $budget"; }
[ "$s3" = "ok=0 rule=egress-budget-exhausted" ] ||
    { show; fail "after policyd's restart the task had budget again: $s3"; }
note "run 3 after policyd's restart: $s3"

run ctl audit "$id"
expect_rc 0 "audit $id"
[ "$(grep -cE 'policyd +egress ' "$T/out" || true)" -eq 3 ] ||
    { show; fail "expected policyd's egress record for each of the 3 runs"; }
grep -Eq "policyd +egress .*sent $b1 bytes upstream" "$T/out" ||
    { show; fail "run 1's spend is not audited"; }
note "each run's spend audited"
