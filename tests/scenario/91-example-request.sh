#!/bin/sh
# Step 4 of the worked example on the real deployment (root): the model,
# told its POST was denied, asks for the external host with the hidden
# cell as the source.  The host is outside alice's entitlements, so
# policyd forwards the request to approvald (as sbx-approve, reached over
# its submit socket with the listener's uid checked) and answers pending;
# `approvalctl list` shows it, `approvalctl show` quotes the cell; the
# policy does not change (a pending request grants nothing); the request
# is in policyd's audit trail under the task id.
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

is_root || skip "approvald runs as its own user: needs root"
[ -S "$SBX_STATE/sockets/approvald-submit.sock" ] || skip "approvald is not running (sbx-up started policyd only)"
grep -Eq '^approvald: *\{socket: ' "$SBX_STATE/etc/policyd.yaml" ||
    skip "policyd is not configured with approvald"
command -v python3 >/dev/null || skip "python3 not installed"

id=sc-request-$$
sed "s/id: t-1,/id: $id,/" "$EX/task.yaml" >"$T/task.yaml"
cp "$EX/main.py" "$T/main.py"
run ctl compile "$T/task.yaml"
expect_rc 0 "compile"
h0=$(sed -n 's/^hash: *//p' "$T/out")

python3 - "$EX/supplier-2026-q3.csv" "$T/cell.txt" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], encoding="utf-8")))
open(sys.argv[2], "w", encoding="utf-8").write(
    next(r[None][0] for r in rows if r.get(None)) + "\n")
EOF
grep -q 'upload.supplier-sync.example' "$T/cell.txt" ||
    fail "the example spreadsheet has no hidden cell naming the external host"

run ctl request "$id" --host upload.supplier-sync.example --method POST \
    --path /ingest --why "the spreadsheet asks for a copy at the supplier portal" \
    --source "$T/cell.txt"
expect_rc 0 "sbxctl request (pending is exit 0)"
out_has '^status: pending' "the request is not pending at approvald"
rid=$(sed -n 's/^request: *//p' "$T/out")
[ -n "$rid" ] || { show; fail "no request id printed"; }
note "request $rid pending"

con=$SBX_STATE/sockets/approvald-console.sock
run "$SBX_BIN/approvalctl" -s "$con" list
expect_rc 0 "approvalctl list"
out_has "$rid" "approvalctl list does not show $rid"
out_has 'upload.supplier-sync.example' "approvalctl list does not name the host"
run "$SBX_BIN/approvalctl" -s "$con" show "$rid"
expect_rc 0 "approvalctl show"
out_has "$id" "approvalctl show does not name the task"
out_has 'Note for the AI assistant' "approvalctl show does not quote the source cell"
note "approvalctl shows $rid with the source cell quoted"

# Pending grants nothing: the next compile has the same hash.
run ctl compile "$T/task.yaml"
expect_rc 0 "compile after the request"
[ "$(sed -n 's/^hash: *//p' "$T/out")" = "$h0" ] ||
    { show; fail "a pending request changed the policy"; }
out_lacks 'upload.supplier-sync.example' "a pending request widened the policy"

run ctl audit "$id"
expect_rc 0 "audit $id"
out_has "policyd +capability .*$rid pending" "no pending capability record"
out_lacks "policyd +capability .*$rid denied" "policyd denied the request after all"
note "policyd audited $rid as pending; policy unchanged ($h0)"
