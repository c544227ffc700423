#!/bin/sh
# launchd-sbx's launch socket admits policyd's uid (sbx-policy) alone: a
# stranger (uid nobody) and root itself are closed on without a byte of
# reply, and policyd's runs still work afterwards.
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

is_root || skip "launchd-sbx needs root: no launch scenarios"
sock=$SBX_STATE/sockets/launchd.sock
[ -S "$sock" ] || skip "launchd-sbx is not running"
command -v setpriv >/dev/null || skip "setpriv (util-linux) not installed"
probe=$SBX_BIN/frameprobe
[ -x "$probe" ] || fail "$probe not built"
ng=$(id -gn nobody 2>/dev/null || echo nogroup)
cp "$probe" "$T/frameprobe"
chmod 0755 "$T" "$T/frameprobe"

for m in silent ok; do
	run setpriv --reuid nobody --regid "$ng" --clear-groups \
	    "$T/frameprobe" "$sock" "$m"
	[ "$rc" -ne 2 ] || { show; fail "nobody could not even connect: mode?"; }
	out_has '^closed-without-reply$' "the launch socket answered uid nobody ($m)"
	# root is not on the launch socket's list either.
	run "$probe" "$sock" "$m"
	out_has '^closed-without-reply$' "the launch socket answered root ($m)"
done
note "launch socket closes on nobody and root without a reply"

id=sc-peer-$$
task_file "$T/task.yaml" "$id" supplier-2026-q3
run ctl run "$T/task.yaml"
expect_rc 0 "a run through policyd after refused peers"
note "policyd's runs still served"
