#!/bin/sh
# Fail closed: with launchd-sbx stopped, sbxctl run exits 5 (unavailable),
# policyd audits "run-failed" with the rule, and nothing ran (no launch
# record).  The driver's sbx-up starts launchd-sbx again afterwards.
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

is_root || skip "launchd-sbx needs root: no launch scenarios"
[ -f "$SBX_STATE/launchd-sbx.pid" ] || skip "launchd-sbx is not running"

pid=$(cat "$SBX_STATE/launchd-sbx.pid")
kill -TERM "$pid"
i=0
while kill -0 "$pid" 2>/dev/null; do
	i=$((i + 1))
	[ $i -lt 100 ] || fail "launchd-sbx did not stop"
	sleep 0.1
done

id=sc-rundown-$$
task_file "$T/task.yaml" "$id" supplier-2026-q3
run ctl run "$T/task.yaml"
case $rc in
4|5) ;;
*) show; fail "run with launchd-sbx stopped: exit $rc, expected 5 (or 4)" ;;
esac
err_has 'launchd' "the error does not name launchd-sbx"
note "launchd-sbx stopped: exit $rc: $(cat "$T/err")"

run ctl audit "$id"
out_has 'policyd +run-failed +launchd-' "policyd did not audit run-failed"
out_lacks 'launchd-sbx +launch' "a launch is recorded although launchd-sbx was down"
note "run-failed audited, nothing launched"

# Start it again for the scenarios after this one.
"$REPO/deploy/sbx-up" >"$T/up.log" 2>&1 || { cat "$T/up.log"; fail "sbx-up"; }
