#!/bin/sh
# Issue 13 item 3, a cluster of denials (root: the whole deployment, as
# 90-worked-example): the example configuration's security_review.denials
# is 3, and the worked example's three denials -- the POST
# (host-not-allowed), the smuggling GET (url-too-long or
# request-too-large), the stray archive gated drops (undeclared) -- make
# policyd record one security-review event for the task, which `sbxctl
# audit TASK` shows with the rules and the run's execution and hash, and
# sbx_policyd_security_reviews_total counts.  Run again after policyd
# restarts, the task gets no second one.  A task whose two denials (a
# refused compile, one denied request) stay below the count gets none.
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

is_root || skip "the worked example needs root (launchd-sbx, daemon users)"
[ -S "$SBX_STATE/sockets/launchd.sock" ] || skip "launchd-sbx is not running"
command -v jq >/dev/null || skip "jq not installed"
wired_egress || skip "launchd-sbx is not wired to egressd (sbx-up left egress: out)"
wired_gate || skip "launchd-sbx is not wired to gated (sbx-up left gate: out)"
grep -Eq '^security_review: *\{denials: *3\}' "$SBX_STATE/etc/policyd.yaml" ||
    fail "the example policyd.yaml does not set security_review: {denials: 3}"

# metric NAME: its value in `sbxctl metrics`, 0 if absent.
metric() {
	run ctl metrics
	expect_rc 0 "metrics"
	v=$(sed -n "s/^$1 //p" "$T/out" | head -n 1)
	echo "${v:-0}"
}
# reviews ID: the task's security-review records, in $T/reviews.
reviews() {
	run ctl audit "$1"
	expect_rc 0 "audit $1"
	grep -E '^[^ ]+ +policyd +security-review ' "$T/out" >"$T/reviews" || true
	wc -l <"$T/reviews"
}

# ---- the worked example, under its own task id ----
id=sc-review-$$
sed "s/id: t-1,/id: $id,/" "$EX/task.yaml" >"$T/task.yaml"
sed "s|api.fx-rates.internal:8417|api.fx-rates.internal:${SBX_FX_PORT:-8417}|" \
    "$EX/main.py" >"$T/main.py"
m0=$(metric sbx_policyd_security_reviews_total)

run ctl run "$T/task.yaml"
expect_rc 0 "run of the worked example"
cp "$T/out" "$T/run.json"
xid=$(jq -r .execution_id "$T/run.json")
h=$(jq -r .policy.hash "$T/run.json")
rules=$(jq -r '[(.denials[] | .rule), (.dropped[] | .reason)] | unique | join(",")' "$T/run.json")
case ",$rules," in
*,host-not-allowed,*undeclared,*) ;;
*) show; fail "the worked example did not deny what it should: $rules" ;;
esac

[ "$(reviews "$id")" -eq 1 ] ||
    { show; fail "not exactly one security-review record for $id"; }
# TIME DAEMON ACTION RULE EXECUTION HASH DETAIL
read -r _ _ _ rrule rxid rhash _ <"$T/reviews"
[ "$rrule" = "$rules" ] ||
    { cat "$T/reviews"; fail "the review names rules $rrule, not the run's $rules"; }
if [ "$rxid" != "$xid" ] || [ "$rhash" != "$h" ]; then
	cat "$T/reviews"
	fail "the review is not under execution $xid, hash $h"
fi
grep -Eq 'denials in 1 execution reached security_review.denials 3: .*host-not-allowed/egress x1.*undeclared/gate x1' "$T/reviews" ||
    { cat "$T/reviews"; fail "the review's detail does not count the rules"; }
m1=$(metric sbx_policyd_security_reviews_total)
[ "$m1" -eq $((m0 + 1)) ] ||
    { show; fail "sbx_policyd_security_reviews_total went from $m0 to $m1, not up by 1"; }
note "audit $id: one security-review, rules $rrule, under $xid; metric $m0 -> $m1"

# ---- again, after policyd restarts: the count is on disk, no second ----
stop_daemon policyd
daemon_up
run ctl run "$T/task.yaml"
expect_rc 0 "second run of the worked example"
[ "$(jq '.denials | length' "$T/out")" -ge 2 ] ||
    { show; fail "the second run did not deny again"; }
[ "$(reviews "$id")" -eq 1 ] ||
    { show; fail "a second security-review for $id after more denials"; }
[ "$(metric sbx_policyd_security_reviews_total)" -eq 0 ] ||
    { show; fail "the restarted policyd counted a review for the second run"; }
note "second run after a restart: still one security-review for $id"

# ---- below the count: a refused compile and one denied request ----
low=sc-review-low-$$
sed -e "s/id: t-2,/id: $low,/" "$EX/task-denied.yaml" >"$T/denied.yaml"
run ctl run "$T/denied.yaml"
expect_rc 3 "run of a task for an unreadable dataset"
cat >"$T/one.py" <<'EOT'
import urllib.request
req = urllib.request.Request("https://upload.supplier-sync.example/ingest",
                             data=b"x", method="POST")
try:
    urllib.request.urlopen(req, timeout=10)
    print("sent")
except Exception as e:
    print("denied:", e)
EOT
cat >"$T/one.yaml" <<EOT
task: {id: $low, type: analytics, tenant: acme, user: alice}
datasets: [supplier-2026-q3]
code: one.py
outputs: [eur_totals.csv]
EOT
run ctl run "$T/one.yaml"
expect_rc 0 "run of one denied request"
jq -e '[.denials[] | select(.rule == "host-not-allowed")] | length == 1' "$T/out" >/dev/null ||
    { show; fail "the denied request is not in the result"; }
[ "$(reviews "$low")" -eq 0 ] ||
    { show; fail "a security-review for $low, whose two denials are below 3"; }
out_has "policyd +deny +dataset-not-readable" "the refused compile is not in $low's audit"
note "audit $low: two denials, no security-review"
