#!/bin/sh
# executions_per_task through sbxctl run, with runs in parallel: the
# template's 15 runs all run (concurrently: policyd's launches overlap),
# and the 16th is refused by policy (exit 3) without reaching launchd-sbx.
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

is_root || skip "launchd-sbx needs root: no launch scenarios"
[ -S "$SBX_STATE/sockets/launchd.sock" ] || skip "launchd-sbx is not running"
command -v jq >/dev/null || skip "jq not installed"

id=sc-runcap-$$
printf 'print("run")\n' >"$T/main.py"
cat >"$T/task.yaml" <<EOT
task: {id: $id, type: analytics, tenant: acme, user: alice}
datasets: [supplier-2026-q3]
code: main.py
outputs: []
EOT
i=1
while [ $i -le 15 ]; do
	"$SBX_BIN/sbxctl" -s "$SBX_STATE" run "$T/task.yaml" \
	    >"$T/run$i.json" 2>"$T/run$i.err" &
	eval "pid$i=\$!"
	i=$((i + 1))
done
i=1 bad=0
while [ $i -le 15 ]; do
	eval "wait \$pid$i" || { bad=$((bad + 1)); cat "$T/run$i.err"; }
	[ "$(jq -r .exit_code "$T/run$i.json" 2>/dev/null)" = 0 ] &&
	    [ "$(plain_stdout "$T/run$i.json")" = run ] ||
	    { bad=$((bad + 1)); cat "$T/run$i.json" "$T/run$i.err"; }
	i=$((i + 1))
done
[ $bad -eq 0 ] || fail "$bad of 15 concurrent runs did not run cleanly"
n=$(cat "$T"/run*.json | jq -r .execution_id | sort -u | wc -l)
[ "$n" -eq 15 ] || fail "15 runs gave $n distinct execution ids"
note "15 concurrent runs ran, 15 execution ids"

run ctl run "$T/task.yaml"
expect_rc 3 "the 16th run of a task capped at 15"
err_has 'executions-exhausted' "refusal does not name executions-exhausted"
run ctl audit "$id"
[ "$(grep -cE 'launchd-sbx +launch' "$T/out" || true)" -eq 15 ] ||
    { show; fail "expected exactly 15 launch records"; }
note "16th run refused (exit 3): $(cat "$T/err")"
