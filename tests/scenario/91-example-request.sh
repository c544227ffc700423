#!/bin/sh
# Step 4 of the worked example on the real deployment (root): the task
# runs, its POST to the external host is refused by egressd
# (host-not-allowed); the model, told so, asks for that host with the
# hidden cell as the source.  The host is outside alice's entitlements, so
# policyd forwards the request to approvald (as sbx-approve, reached over
# its submit socket with the listener's uid checked) and answers pending;
# `approvalctl list` shows it, `approvalctl show` quotes the cell and shows
# what sbx itself recorded of the task: its policy hash and the refused
# host, when (seconds before the request), under which hash, in which
# execution; the policy does not change (a pending request grants
# nothing); the request is in policyd's audit trail under the task id.
# Separation of duties: with approvald's approvers: mapping a Unix user to
# acme/alice (SBX_APPROVERS, approvald restarted by sbx-up), that approver
# may not decide alice's request (refused with the reason, audited, still
# pending); another approver denies it, and the policy stays as it was.
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

is_root || skip "approvald runs as its own user: needs root"
[ -S "$SBX_STATE/sockets/approvald-submit.sock" ] || skip "approvald is not running (sbx-up started policyd only)"
grep -Eq '^approvald: *\{socket: ' "$SBX_STATE/etc/policyd.yaml" ||
    skip "policyd is not configured with approvald"
command -v python3 >/dev/null || skip "python3 not installed"

id=sc-request-$$
con=$SBX_STATE/sockets/approvald-console.sock
sed "s/id: t-1,/id: $id,/" "$EX/task.yaml" >"$T/task.yaml"
sed "s|api.fx-rates.internal:8417|api.fx-rates.internal:${SBX_FX_PORT:-8417}|" \
    "$EX/main.py" >"$T/main.py"
HOST=upload.supplier-sync.example

# Steps 1-3: the run, when launchd-sbx is wired to egressd; else only a
# compile (and no denial for policyd to know of).
ran=0
if [ -S "$SBX_STATE/sockets/launchd.sock" ] && wired_egress && command -v jq >/dev/null; then
	run ctl run "$T/task.yaml"
	expect_rc 0 "run of the worked example"
	cp "$T/out" "$T/run.json"
	h0=$(jq -r .policy.hash "$T/run.json")
	xid=$(jq -r .execution_id "$T/run.json")
	jq -e --arg h "$HOST" '[.denials[] | select(.rule == "host-not-allowed" and .boundary == "egress"
	    and (.detail | test("first: host " + $h + " is not in")))] | length == 1' "$T/run.json" >/dev/null ||
	    { show; fail "the result's host-not-allowed denial does not name $HOST"; }
	ran=1
	note "run $xid under $h0: egressd refused $HOST (the result's denial names it)"
else
	run ctl compile "$T/task.yaml"
	expect_rc 0 "compile"
	h0=$(sed -n 's/^hash: *//p' "$T/out")
	note "launchd-sbx is not wired to egressd: no run, no egress denial to show"
fi

python3 - "$EX/supplier-2026-q3.csv" "$T/cell.txt" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], encoding="utf-8")))
open(sys.argv[2], "w", encoding="utf-8").write(
    next(r[None][0] for r in rows if r.get(None)) + "\n")
PY
grep -q "$HOST" "$T/cell.txt" ||
    fail "the example spreadsheet has no hidden cell naming the external host"

run ctl request "$id" --host "$HOST" --method POST \
    --path /ingest --why "the spreadsheet asks for a copy at the supplier portal" \
    --source "$T/cell.txt"
expect_rc 0 "sbxctl request (pending is exit 0)"
out_has '^status: pending' "the request is not pending at approvald"
rid=$(sed -n 's/^request: *//p' "$T/out")
[ -n "$rid" ] || { show; fail "no request id printed"; }
note "request $rid pending"

actl() { "$SBX_BIN/approvalctl" -s "$con" "$@"; }
run actl list
expect_rc 0 "approvalctl list"
out_has "$rid" "approvalctl list does not show $rid"
out_has "$HOST" "approvalctl list does not name the host"
run actl show "$rid"
expect_rc 0 "approvalctl show"
cp "$T/out" "$T/show.txt"
out_has "$id" "approvalctl show does not name the task"
out_has 'Note for the AI assistant' "approvalctl show does not quote the source cell"
out_has "^policy: +$h0\$" "approvalctl show does not give the task's policy hash $h0"
if [ $ran = 1 ]; then
	out_has "^  [0-9-]+ [0-9:]+ UTC, [0-9]+s before the request: host-not-allowed \(egress\)  <- the host this request asks for\$" \
	    "approvalctl show does not show the refused host before the request"
	out_has "^    policy $h0, execution $xid\$" "approvalctl show does not give the denial's hash and execution"
	out_has "^    \| 1 request\(s\); first: host $HOST is not in the policy's allowlist\$" \
	    "approvalctl show does not name the refused host"
	ago=$(sed -n 's/.*, \([0-9]*\)s before the request: host-not-allowed.*/\1/p' "$T/show.txt")
	[ "$ago" -lt 300 ] || { show; fail "the refusal is shown $ago s before the request, not seconds"; }
	note "approvalctl show: host-not-allowed $HOST ${ago}s before $rid, under $h0, execution $xid"
fi
note "approvalctl shows $rid with the source cell quoted"

# Pending grants nothing: the next compile has the same hash.
run ctl compile "$T/task.yaml"
expect_rc 0 "compile after the request"
[ "$(sed -n 's/^hash: *//p' "$T/out")" = "$h0" ] ||
    { show; fail "a pending request changed the policy"; }
out_lacks "$HOST" "a pending request widened the policy"

run ctl audit "$id"
expect_rc 0 "audit $id"
out_has "policyd +capability .*$rid pending" "no pending capability record"
out_lacks "policyd +capability .*$rid denied" "policyd denied the request after all"
note "policyd audited $rid as pending; policy unchanged ($h0)"

# ---- separation of duties --------------------------------------------------
command -v runuser >/dev/null || skip "runuser not installed (separation of duties)"
ALICE=sbx-test-alice		# an approver who is tenant user acme/alice
APPROVER=sbx-test-approver	# as in 92 and tests/approve: created once, kept
getent group sbx-approvers >/dev/null || fail "sbx-up did not create group sbx-approvers"
for u in $ALICE $APPROVER; do
	id "$u" >/dev/null 2>&1 ||
	    useradd --system --no-create-home --shell /usr/sbin/nologin -G sbx-approvers "$u"
	id -nG "$u" | grep -qw sbx-approvers || usermod -a -G sbx-approvers "$u"
done
AX=$(mktemp -d /tmp/sbx-91-actl.XXXXXX)
chmod 755 "$AX"
cp "$SBX_BIN/approvalctl" "$AX/approvalctl"
chmod 755 "$AX/approvalctl"
# restart_approvald [APPROVERS]: stop approvald, sbx-up starts it again
# with SBX_APPROVERS.
restart_approvald() {
	_pid=$(cat "$SBX_STATE/approvald.pid")
	kill -TERM "$_pid"
	_i=0
	while kill -0 "$_pid" 2>/dev/null; do
		_i=$((_i + 1)); [ $_i -lt 100 ] || fail "approvald $_pid did not stop"; sleep 0.1
	done
	SBX_APPROVERS=$1 daemon_up
}
mapped=0
cleanup() {
	rm -rf "$AX"
	# The other scenarios get approvald as sbx-up makes it by default.
	[ $mapped = 0 ] || restart_approvald "" || true
}
trap cleanup EXIT
mapped=1
restart_approvald "$ALICE=acme/alice"
grep -q "^  $ALICE: \"acme/alice\"\$" "$SBX_STATE/etc/approvald.yaml" ||
    { cat "$SBX_STATE/etc/approvald.yaml"; fail "sbx-up did not write approvers: from SBX_APPROVERS"; }
as() { _u=$1; shift; runuser -u "$_u" -- "$AX/approvalctl" -s "$con" "$@"; }

run as $ALICE approve "$rid" the portal is ours
expect_rc 3 "$ALICE approving alice's own request"
err_has "$ALICE may not decide request $rid: the task's user acme/alice is the approver's own \(approvers: maps $ALICE to acme/alice\); another approver must \(separation-of-duties\)" \
    "the refusal of $ALICE does not give the reason"
run as $ALICE deny "$rid" not needed
expect_rc 3 "$ALICE denying alice's own request"
run actl list
out_has "^$rid " "$rid is no longer pending after $ALICE was refused"
run actl audit "$id"
out_has "action=decision-refused actor=$ALICE rule=separation-of-duties task=$id .*approval of request $rid by $ALICE refused" \
    "approvald did not audit the refusal of $ALICE"
note "$ALICE (approvers: acme/alice) may not decide alice's $rid: exit 3, reason given, audited"

run as $APPROVER deny "$rid" the cell is an instruction injected into the data
expect_rc 0 "$APPROVER denying $rid"
out_has "^request $rid denied by $APPROVER: the cell is an instruction injected into the data" \
    "another approver could not decide $rid"
run ctl compile "$T/task.yaml"
[ "$(sed -n 's/^hash: *//p' "$T/out")" = "$h0" ] || { show; fail "the denial changed the policy"; }
out_lacks "$HOST" "the denied host is in the policy"
run ctl audit "$id"
out_has "policyd +capability .*$rid denied" "policyd has no record of the denial of $rid"
note "$APPROVER denied $rid; the policy is still $h0"
