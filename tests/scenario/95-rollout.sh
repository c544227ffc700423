#!/bin/sh
# Issue 13 item 2, gradual rollout (root: real runs through launchd-sbx,
# egressd and gated).  Two task types roll out a new version of their own
# template at 50 %:
#  - roll-rise: the canary narrows the FX API's path to /v9/, so the
#    legitimate GET /v1/rates is refused (path-not-allowed) under it and
#    not under stable: the rate rises, and the canary is halted;
#  - roll-fall: stable refuses GET /v2/rates, the canary silently allows
#    it: the rate falls to 0, and the canary is halted too.
# Each task lands where the bucket of (type, id) says (computed here with
# SHA-256 as rollout.c does); a retry stays on its version, a halted
# canary's task moves to stable; the halt is one rollout-halted audit
# event under the task that tipped it, with both rates and the threshold,
# counted in sbx_policyd_rollout_halts_total, and survives a restart; a
# halted canary is not promoted; set-percent resumes it (audited with the
# operator's uid); unknown types are refused; a different canary version
# in the configuration is a new rollout; a rollout naming a version
# policyd does not have is refused at start with the type and version.
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

is_root || skip "runs need root (launchd-sbx, daemon users)"
[ -S "$SBX_STATE/sockets/launchd.sock" ] || skip "launchd-sbx is not running"
command -v jq >/dev/null || skip "jq not installed"
command -v python3 >/dev/null || skip "python3 not installed"
wired_egress || skip "launchd-sbx is not wired to egressd (sbx-up left egress: out)"

conf=$SBX_STATE/etc/policyd.yaml
tdir=$SBX_STATE/templates
v7=$tdir/analytics-readonly.yaml
grep -q 'paths: \[/v1/\]' "$v7" || fail "$v7 has no FX rule with paths [/v1/]"

# ---- templates: each probe template's v1 is v7 under another name ----
mk() {	# NAME VERSION SED-EXPR
	sed -e "s/^policy: .*/policy: $1/" -e "s/^version: .*/version: $2/" \
	    -e "$3" "$v7" >"$tdir/$1-v$2.yaml"
	chmod 0644 "$tdir/$1-v$2.yaml"
}
mk probe-rise 1 's/^executions_per_task: .*/executions_per_task: 5/'
mk probe-rise 2 's|paths: \[/v1/\]|paths: [/v9/]|'
mk probe-fall 1 's/^executions_per_task: .*/executions_per_task: 5/'
mk probe-fall 2 's|paths: \[/v1/\]|paths: [/v1/, /v2/]|'
cleanup() {
	rm -f "$tdir"/probe-rise-v*.yaml "$tdir"/probe-fall-v*.yaml
}
trap cleanup EXIT

# A configuration with the two rollouts, and rollout: {threshold,
# min_executions} small enough for a test.
rconf() {	# OUT RISE-STABLE RISE-CANARY
	sed -e "/^task_types:/a\\
  roll-rise: {template: probe-rise, stable: $2, canary: $3, percent: 50}\\
  roll-fall: {template: probe-fall, stable: 1, canary: 2, percent: 50}" \
	    -e '/^security_review:/a\
rollout: {threshold: 0.5, min_executions: 3}' "$conf" >"$1"
}
rconf "$T/roll.yaml" 1 2
rconf "$T/bad.yaml" 1 7

# ---- a canary version policyd does not have: refused, named ----
run "$SBX_BIN/policyd" -n -f "$T/bad.yaml"
[ "$rc" -ne 0 ] || { show; fail "policyd -n took a rollout to a missing version"; }
err_has 'task_types\.roll-rise: rollout canary: template probe-rise has no version 7' \
    "the refusal does not name the task type and the version"
note "a rollout to probe-rise@7 (not loaded): refused, naming roll-rise and version 7"

restore() {
	cleanup
	stop_daemon policyd
	daemon_up
}
trap restore EXIT
restart_policyd "$T/roll.yaml"

# bucket TYPE ID: rollout.c's, 0..99.
bucket() {
	python3 -c 'import hashlib, sys
h = hashlib.sha256(sys.argv[1].encode() + b"\0" + sys.argv[2].encode()).digest()
print(int.from_bytes(h[:4], "big") % 100)' "$1" "$2"
}
# ids TYPE SIDE N [TAG]: N task ids that land on SIDE (stable or canary)
# at 50 %.
ids() {
	_n=0 _k=0
	while [ $_n -lt "$3" ]; do
		_id=rb-$1${4:-}-$$-$_k
		_b=$(bucket "$1" "$_id")
		if { [ "$2" = canary ] && [ "$_b" -lt 50 ]; } ||
		    { [ "$2" = stable ] && [ "$_b" -ge 50 ]; }; then
			echo "$_id"
			_n=$((_n + 1))
		fi
		_k=$((_k + 1))
	done
}
# runtask TYPE ID CODE: run it; the result in $T/out, its version echoed.
runtask() {
	cat >"$T/t.yaml" <<EOT
task: {id: $2, type: $1, tenant: acme, user: alice}
datasets: [supplier-2026-q3]
code: $3
outputs: [eur_totals.csv]
EOT
	run ctl run "$T/t.yaml"
	expect_rc 0 "run of $2 ($1)"
	jq -r .policy.version "$T/out"
}
port=${SBX_FX_PORT:-8417}
cat >"$T/get-v1.py" <<EOT
import urllib.request, urllib.error
try:
    urllib.request.urlopen("https://api.fx-rates.internal:$port/v1/rates?base=USD", timeout=10).read()
    print("ok")
except urllib.error.HTTPError as e:
    print("refused", e.code)
EOT
sed 's|/v1/rates|/v2/rates|' "$T/get-v1.py" >"$T/get-v2.py"
denied() { jq -e --arg r "$1" '[.denials[] | select(.rule == $r)] | length > 0' "$T/out" >/dev/null; }

run ctl rollout status
expect_rc 0 "rollout status"
out_has '^rollout roll-rise: template probe-rise, stable 1, canary 2 at 50%$' \
    "status does not show roll-rise at 50 %"
out_has '^rollout roll-fall: template probe-fall, stable 1, canary 2 at 50%$' \
    "status does not show roll-fall at 50 %"

# ---- rise: canary refuses what stable allows ----
halts() { ctl metrics 2>/dev/null | sed -n 's/^sbx_policyd_rollout_halts_total //p'; }
m0=$(halts)
[ "${m0:-x}" = 0 ] || fail "sbx_policyd_rollout_halts_total is ${m0:-absent} at start, not 0"
set -- $(ids roll-rise stable 3) $(ids roll-rise canary 3)
rs1=$1 rc1=$4
i=0
for id in "$@"; do
	i=$((i + 1))
	want=1
	[ $i -gt 3 ] && want=2
	v=$(runtask roll-rise "$id" get-v1.py)
	[ "$v" = "$want" ] || { show; fail "task $id ran probe-rise@$v, its bucket says @$want"; }
	if [ "$want" = 2 ]; then
		denied path-not-allowed || { show; fail "canary run $id was not refused /v1/rates"; }
	else
		! denied path-not-allowed || { show; fail "stable run $id was refused /v1/rates"; }
	fi
done
last=$id
lastx=$(jq -r .execution_id "$T/out")
lasth=$(jq -r .policy.hash "$T/out")
note "roll-rise: 3 tasks on stable@1 (no denial), 3 on canary@2 (path-not-allowed), as their buckets say"

run ctl rollout status roll-rise
expect_rc 0 "rollout status roll-rise"
out_has '^rollout roll-rise: template probe-rise, stable 1, canary 2 at 0% \(HALTED\)$' \
    "roll-rise was not halted by the rising rate"
out_has 'rule path-not-allowed denied 1.000 of 3 executions under canary 2 and 0.000 of 3 under stable 1, a difference above threshold 0.500' \
    "the halt's reason does not give the rule, both rates and the threshold"
out_has '^  path-not-allowed +0 \(0\.0%\) +3 \(100\.0%\)' "status does not show the rule side by side"
cp "$T/out" "$T/rise-status"
run ctl audit "$last"
expect_rc 0 "audit $last"
out_has "policyd +rollout-halted +path-not-allowed +$lastx +$lasth +task type roll-rise: probe-rise canary 2 halted" \
    "no rollout-halted audit event under the execution that tipped it"
m1=$(halts)
[ "$m1" = 1 ] || fail "sbx_policyd_rollout_halts_total is $m1 after the halt, not 1"
ctl metrics 2>/dev/null | grep -q '^sbx_policyd_rollout_denials_total{template="probe-rise",version="2",rule="path-not-allowed"} 3$' ||
    fail "no per-version denial count for probe-rise@2"
if command -v promtool >/dev/null; then
	ctl metrics 2>/dev/null >"$T/metrics"
	# Only the rollout metrics are this test's (others are checked
	# elsewhere).
	if ! promtool check metrics <"$T/metrics" >"$T/promtool" 2>&1 &&
	    grep -q rollout "$T/promtool"; then
		cat "$T/promtool"
		fail "promtool finds fault with the rollout metrics"
	fi
fi
note "roll-rise halted: audit under $last ($lastx), metric 0 -> 1"

# A halted canary's task moves to stable; a retry of a stable one stays.
v=$(runtask roll-rise "$rc1" get-v1.py)
[ "$v" = 1 ] || { show; fail "canary task $rc1 ran @$v after the halt, not stable 1"; }
v=$(runtask roll-rise "$rs1" get-v1.py)
[ "$v" = 1 ] || { show; fail "stable task $rs1 ran @$v on retry"; }
new=$(ids roll-rise canary 1 new)
v=$(runtask roll-rise "$new" get-v1.py)
[ "$v" = 1 ] || { show; fail "a new canary-bucket task ran @$v under a halted canary"; }
note "after the halt: canary task $rc1 and a new one run stable@1"

# ---- people: no promote of a halted canary; unknown types ----
run ctl rollout promote roll-rise
[ "$rc" -ne 0 ] || { show; fail "promote of a halted canary succeeded"; }
err_has 'canary 2 was halted' "the promote refusal does not say why"
run ctl rollout halt no-such-type
[ "$rc" -ne 0 ] || { show; fail "halt of an unknown type succeeded"; }
err_has 'task type "no-such-type" has no rollout' "the refusal does not name the type"
# The orchestrator socket takes no rollout command.
run "$SBX_BIN/sbxctl" -s "$SBX_STATE" -A "$SBX_STATE/sockets/policyd.sock" rollout set-percent roll-rise 100
[ "$rc" -ne 0 ] || { show; fail "the orchestrator socket took a rollout command"; }
err_has 'not accepted on this socket' "the orchestrator socket's refusal does not say why"
run ctl rollout set-percent roll-rise 101
expect_rc 2 "set-percent 101"
err_has 'want a whole number from 0 to 100' "set-percent 101 is not range-checked"

# ---- a restart keeps the halt ----
restart_policyd "$T/roll.yaml"
run ctl rollout status roll-rise
out_has 'stable 1, canary 2 at 0% \(HALTED\)$' "the halt did not survive a restart"
out_has '^  executions +[0-9]+ +3$' "the canary's count did not survive a restart"
note "after a restart: still halted, counts kept"

# set-percent resumes it, audited with the operator's uid.
run ctl rollout set-percent roll-rise 20
expect_rc 0 "set-percent roll-rise 20"
out_has 'stable 1, canary 2 at 20%$' "set-percent did not resume the canary"
out_has 'by uid:0' "the change does not name the operator"
run ctl rollout halt roll-rise
expect_rc 0 "halt roll-rise"
out_has 'canary 2 at 0% \(HALTED\)$' "halt did not halt"
note "set-percent 20 resumed it, halt stopped it again (by uid:0)"

# ---- fall: canary silently stops refusing ----
# (The halt counter is this process's: policyd restarted above.)
m2=$(halts)
set -- $(ids roll-fall stable 3) $(ids roll-fall canary 3)
i=0
for id in "$@"; do
	i=$((i + 1))
	want=1
	[ $i -gt 3 ] && want=2
	v=$(runtask roll-fall "$id" get-v2.py)
	[ "$v" = "$want" ] || { show; fail "task $id ran probe-fall@$v, its bucket says @$want"; }
	if [ "$want" = 1 ]; then
		denied path-not-allowed || { show; fail "stable run $id was not refused /v2/rates"; }
	else
		! denied path-not-allowed || { show; fail "canary run $id was refused /v2/rates"; }
	fi
done
run ctl rollout status roll-fall
out_has 'stable 1, canary 2 at 0% \(HALTED\)$' "roll-fall was not halted by the falling rate"
out_has 'rule path-not-allowed denied 0.000 of 3 executions under canary 2 and 1.000 of 3 under stable 1' \
    "the fall's reason does not give both rates"
[ "$(halts)" = $((m2 + 1)) ] ||
    fail "sbx_policyd_rollout_halts_total did not count the second halt"
note "roll-fall: canary@2 stopped refusing /v2/rates: halted"

# ---- SIGHUP without the canary's file: refused, the templates stay ----
mv "$tdir/probe-fall-v2.yaml" "$T/probe-fall-v2.yaml"
log=$SBX_STATE/log/policyd.log
n0=$(wc -l <"$log")
kill -HUP "$(cat "$SBX_STATE/policyd.pid")"
i=0
until tail -n +"$((n0 + 1))" "$log" | grep -q 'reload: .*keeping'; do
	i=$((i + 1)); [ $i -lt 50 ] || { tail -n 20 "$log"; fail "no refused reload in the log"; }
	sleep 0.1
done
tail -n +"$((n0 + 1))" "$log" | grep -q 'task_types\.roll-fall: rollout canary: template probe-fall has no version 2' ||
    { tail -n 20 "$log"; fail "the refused reload does not name the type and the version"; }
mv "$T/probe-fall-v2.yaml" "$tdir/probe-fall-v2.yaml"
run ctl template show probe-fall@2
expect_rc 0 "probe-fall@2 after the refused reload"
note "SIGHUP with probe-fall@2 gone: refused, naming roll-fall and version 2"

# ---- a different canary version in the configuration: a new rollout ----
rconf "$T/swap.yaml" 2 1
restart_policyd "$T/swap.yaml"
run ctl rollout status roll-rise
out_has '^rollout roll-rise: template probe-rise, stable 2, canary 1 at 50%$' \
    "a changed rollout did not start afresh at the configured percent"
run ctl rollout status roll-fall
out_has 'canary 2 at 0% \(HALTED\)$' "the unchanged roll-fall lost its halt"
note "stable 2 canary 1 in the configuration: a new rollout at 50 %; roll-fall still halted"

run ctl rollout status
cp "$T/out" "$T/final-status"
