#!/bin/sh
# Runs last: it breaks policyd's audit chain on purpose, and every
# scenario before it expects `audit verify` to pass.
# audit verify passes on the running log; after a record is changed in the
# database behind policyd's back (trigger dropped, detail edited), verify
# exits 1 and names the seq.  Runs last: the chain stays broken.
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

command -v sqlite3 >/dev/null || skip "sqlite3 not installed"
run ctl audit verify
expect_rc 0 "audit verify on an untouched log"
out_has '^policyd: ok [0-9]+ records' "verify output"
note "$(cat "$T/out")"

db=$SBX_STATE/policyd/policyd.db
seq=$(sqlite3 "$db" "SELECT min(seq) FROM audit WHERE action = 'compile';")
[ -n "$seq" ] || fail "no compile record to tamper with"
daemon_down
sqlite3 "$db" "DROP TRIGGER audit_no_update;
    UPDATE audit SET detail = 'tampered' WHERE seq = $seq;" ||
    { daemon_up; fail "could not tamper with $db"; }
[ "$(sqlite3 "$db" "SELECT detail FROM audit WHERE seq = $seq;")" = tampered ] ||
    { daemon_up; fail "tamper did not take"; }
# sqlite3 ran as us: leave no file the daemon's user cannot open.
if is_root && id sbx-policy >/dev/null 2>&1; then
	for f in "$db" "$db-wal" "$db-shm"; do
		[ ! -e "$f" ] || chown sbx-policy: "$f"
	done
fi
daemon_up

run ctl audit verify
expect_rc 1 "audit verify on a tampered log"
out_has "^policyd: BROKEN at seq $seq" "verify does not name seq $seq"
note "$(cat "$T/out")"
