#!/bin/sh
# sbxctl run end to end (root: launchd-sbx runs the sandbox under gVisor):
# the example task runs, its summary comes back on stdout with the same
# policy hash compile gives; a program's own exit code and a wall-clock
# kill are reported, not turned into errors; `sbxctl audit TASK` shows
# policyd's compile and launchd-sbx's launch and exit under one hash, and
# `audit verify` checks both chains.
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

is_root || skip "launchd-sbx needs root: no launch scenarios"
[ -S "$SBX_STATE/sockets/launchd.sock" ] || skip "launchd-sbx is not running"
command -v jq >/dev/null || skip "jq not installed"

# The example, under its own task id.
id=sc-run-$$
sed "s/id: t-1,/id: $id,/" "$EX/task.yaml" >"$T/task.yaml"
sed "s|api.fx-rates.internal:8417|api.fx-rates.internal:${SBX_FX_PORT:-8417}|" "$EX/main.py" >"$T/main.py"
run ctl compile "$T/task.yaml"
expect_rc 0 "compile of the example"
chash=$(sed -n 's/^hash: *//p' "$T/out")
[ -n "$chash" ] || { show; fail "compile printed no hash"; }

run ctl run "$T/task.yaml"
expect_rc 0 "run of the example"
cp "$T/out" "$T/run.json"
jq -e . "$T/run.json" >/dev/null || { show; fail "run did not print JSON"; }
[ "$(jq -r .exit_code "$T/run.json")" = 0 ] || { show; fail "example exit_code not 0"; }
[ "$(jq -r .policy.hash "$T/run.json")" = "$chash" ] ||
    { show; fail "run's policy hash differs from compile's ($chash)"; }
[ "$(jq -r .task_id "$T/run.json")" = "$id" ] || { show; fail "task_id"; }
plain_stdout "$T/run.json" | grep -q 'invoices, 3 months' ||
    { show; fail "the summary is not on stdout"; }
plain_stdout "$T/run.json" | grep -q '^rates: ' ||
    { show; fail "the task did not say which rates it used"; }
for k in cpu_ms peak_memory_kb wall_ms; do
	[ "$(jq -r ".usage.$k" "$T/run.json")" -gt 0 ] ||
	    { show; fail "usage.$k is not reported"; }
done
if wired_gate; then
	# What gated released is the subject of 90-worked-example.
	[ "$(jq -r '[.outputs[].name] | sort | join(" ")' "$T/run.json")" = "eur_totals.csv monthly.png" ] ||
	    { show; fail "the declared outputs were not released"; }
else
	[ "$(jq -c .outputs "$T/run.json")" = "[]" ] ||
	    { show; fail "outputs released without a gate"; }
fi
xid=$(jq -r .execution_id "$T/run.json")
note "example ran: $(plain_stdout "$T/run.json" | sed -n 2p), hash $chash"

# Audit: both daemons, one hash.
run ctl audit "$id"
expect_rc 0 "audit $id"
grep -E "policyd +compile .*$xid +$chash" "$T/out" >/dev/null ||
    { show; fail "no policyd compile record for $xid"; }
grep -E "launchd-sbx +launch .*$xid +$chash" "$T/out" >/dev/null ||
    { show; fail "no launchd-sbx launch record for $xid"; }
grep -E "launchd-sbx +exit .*$xid +$chash" "$T/out" >/dev/null ||
    { show; fail "no launchd-sbx exit record for $xid"; }
note "audit $id: compile, launch and exit under $chash"

run ctl audit verify
expect_rc 0 "audit verify"
out_has '^policyd: ok' "policyd's chain is not reported ok"
out_has '^launchd-sbx: ok' "launchd-sbx's chain is not reported ok"
note "audit verify: both chains ok"

# A program's own exit code is a result, not an error.
printf 'import sys\nprint("bye")\nsys.exit(3)\n' >"$T/exit3.py"
sed -e "s/id: t-1,/id: $id-x3,/" -e 's/^code: .*/code: exit3.py/' \
    "$EX/task.yaml" >"$T/exit3.yaml"
run ctl run "$T/exit3.yaml"
expect_rc 0 "run of a program that exits 3"
[ "$(jq -r .exit_code "$T/out")" = 3 ] || { show; fail "exit_code is not 3"; }
[ "$(plain_stdout "$T/out")" = bye ] || { show; fail "stdout is not \"bye\""; }
note "exit 3 reported as exit_code 3, sbxctl exit 0"

# The wall clock, enforced from outside: a user whose plan allows 2 s.
run ctl entitlement add --tenant acme --user wally --dataset supplier-2026-q3 \
    --limit wall_seconds=2
expect_rc 0 "entitlement for wally"
printf 'while True:\n    pass\n' >"$T/spin.py"
cat >"$T/spin.yaml" <<EOT
task: {id: $id-wall, type: analytics, tenant: acme, user: wally}
datasets: [supplier-2026-q3]
code: spin.py
outputs: []
EOT
t0=$(date +%s)
run ctl run "$T/spin.yaml"
t1=$(date +%s)
expect_rc 0 "run of a busy loop"
[ "$(jq -c .limits_hit "$T/out")" = '["wall"]' ] ||
    { show; fail "limits_hit is not [\"wall\"]"; }
[ $((t1 - t0)) -lt 30 ] || fail "the busy loop ran $((t1 - t0)) s under a 2 s wall"
note "busy loop killed at the wall: limits_hit [\"wall\"], signal $(jq -r .signal "$T/out"), $((t1 - t0)) s"
