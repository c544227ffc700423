#!/bin/sh
# Template versions are immutable (issue 13 item 1): a template file whose
# content changes under a version policyd has already loaded is refused on
# SIGHUP -- the log names the file, the version and both hashes, and the
# running template keeps its hash -- and at start, where policyd does not
# start; the same content again is accepted, and the change as a new
# version would be.  The pins live in policyd.db and survive restarts.
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

[ -f "$SBX_STATE/policyd.pid" ] || skip "policyd is not running"
pid=$(cat "$SBX_STATE/policyd.pid")
log=$SBX_STATE/log/policyd.log
f=$(grep -l '^version: *7' "$SBX_STATE"/templates/*.yaml | head -n 1)
[ -n "$f" ] || fail "no version 7 template file in $SBX_STATE/templates"
cp -p "$f" "$T/v7.orig"
restore() { cp -p "$T/v7.orig" "$f"; }
trap restore EXIT

run ctl template show analytics-readonly@7
expect_rc 0 "template show v7"
h7=$(sed -n 's/^# hash //p' "$T/out")
[ -n "$h7" ] || { show; fail "no hash in template show"; }

# The same version, other content: refused on SIGHUP, the old one stays.
sed 's/^executions_per_task: *[0-9]*/executions_per_task: 3/' "$T/v7.orig" >"$f"
cmp -s "$f" "$T/v7.orig" && fail "could not change $f"
n0=$(wc -l <"$log")
kill -HUP "$pid"
i=0
until tail -n +"$((n0 + 1))" "$log" | grep -q 'reload: .*keeping'; do
	i=$((i + 1)); [ $i -lt 50 ] || { tail -n 20 "$log"; fail "no refused reload in the log"; }
	sleep 0.1
done
said=$(tail -n +"$((n0 + 1))" "$log" | grep 'has changed' | head -n 1)
echo "$said" | grep -q "$f: template analytics-readonly version 7 has changed" ||
    { tail -n 20 "$log"; fail "the refusal does not name the file and version"; }
echo "$said" | grep -q "as $h7" || fail "the refusal does not name the pinned hash: $said"
new=$(echo "$said" | sed -n 's/.*now hashes to \([0-9a-f]*\),.*/\1/p')
[ -n "$new" ] && [ "$new" != "$h7" ] || fail "the refusal does not name the new hash: $said"
run ctl template show analytics-readonly@7
out_has "^# hash $h7\$" "the running v7 changed after a refused reload"
note "SIGHUP with v7 changed: refused, v7 still $h7"

# At start: policyd refuses to start on the changed version.
kill -TERM "$pid"
i=0
while kill -0 "$pid" 2>/dev/null; do
	i=$((i + 1)); [ $i -lt 100 ] || fail "policyd did not stop"
	sleep 0.1
done
"$SBX_BIN/policyd" -d -f "$SBX_STATE/etc/policyd.yaml" >"$T/start.out" 2>&1 &
spid=$!
i=0
while kill -0 "$spid" 2>/dev/null; do
	i=$((i + 1))
	if [ $i -ge 100 ]; then
		kill "$spid"
		fail "policyd started with a changed template version"
	fi
	sleep 0.1
done
wait "$spid" && fail "policyd exited 0 with a changed template version"
grep -q "version 7 has changed" "$T/start.out" || { cat "$T/start.out"; fail "the start refusal does not say why"; }
grep -q "not started" "$T/start.out" || { cat "$T/start.out"; fail "no 'not started'"; }
note "start with v7 changed: refused ($(grep -c 'has changed' "$T/start.out") version)"

# Restored: sbx-up starts it again, v7 as it was.
restore
daemon_up
run ctl template show analytics-readonly@7
out_has "^# hash $h7\$" "v7 after the restart"
note "the unchanged file starts again with v7 $h7"
