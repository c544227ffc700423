#!/bin/sh
# A peer whose uid and groups are not on the socket's allowlist is
# disconnected without a byte of reply, on both sockets, and the daemon
# goes on serving allowed clients.  The driver sets the socket files to
# 0666 so the allowlist, not the file mode, is what refuses.
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

is_root || skip "needs root to act as another uid (setpriv)"
probe=$SBX_BIN/frameprobe
[ -x "$probe" ] || fail "$probe not built (make $SBX_BIN/frameprobe)"
command -v setpriv >/dev/null || skip "setpriv (util-linux) not installed"
ng=$(id -gn nobody 2>/dev/null || echo nogroup)
# nobody may not be able to traverse the checkout (CI clones into a 0700
# directory): run a copy from our own 0755 scratch directory.
cp "$probe" "$T/frameprobe"
chmod 0755 "$T" "$T/frameprobe"

for s in policyd.sock policyd-admin.sock; do
	for m in silent ok; do
		run setpriv --reuid nobody --regid "$ng" --clear-groups \
		    "$T/frameprobe" "$SBX_STATE/sockets/$s" "$m"
		[ "$rc" -ne 2 ] || { show; fail "nobody could not even connect to $s: mode?"; }
		out_has '^closed-without-reply$' "$s answered uid nobody ($m)"
	done
	note "$s closes on uid nobody without a reply"
done

# The same probe as root gets its answer.
run "$probe" "$SBX_STATE/sockets/policyd.sock" ok
out_has '^reply audit_verified' "root's probe was not answered"
run ctl compile "$EX/task.yaml"
expect_rc 0 "compile after refused peers"
note "allowed clients still served"
