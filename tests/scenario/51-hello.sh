#!/bin/sh
# Every daemon socket answers hello (protocol, server name and version, the
# request types it serves) and answers a body from a newer protocol (an
# Envelope oneof field it does not know) with ERROR_UNEXPECTED on a
# connection that then serves the next request.  Each socket is probed as
# a user it admits: root, else the daemon user on its allowlist.
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

probe=$SBX_BIN/frameprobe
[ -x "$probe" ] || fail "$probe not built (make $SBX_BIN/frameprobe)"
version=$(sed -n 's/^#define SBX_VERSION[^"]*"\(.*\)"/\1/p' "$REPO/common/version.h")
users="sbx-policy sbx-launch sbx-egress sbx-broker sbx-gate sbx-approve"
if is_root; then
	command -v setpriv >/dev/null || skip "setpriv (util-linux) not installed"
	cp "$probe" "$T/frameprobe"
	chmod 0755 "$T" "$T/frameprobe"
fi

# as USER ARGS...: the probe as USER ("" is us).
as() {
	_u=$1
	shift
	if [ -z "$_u" ]; then
		run "$probe" "$@"
	else
		run setpriv --reuid "$_u" --regid "$(id -g "$_u")" \
		    --clear-groups "$T/frameprobe" "$@"
	fi
}

n=0
for sock in "$SBX_STATE"/sockets/*.sock; do
	[ -S "$sock" ] || continue
	who=
	as "" "$sock" hello
	if ! grep -q '^reply hello_reply$' "$T/out" && is_root; then
		for u in $users; do
			id "$u" >/dev/null 2>&1 || continue
			as "$u" "$sock" hello
			if grep -q '^reply hello_reply$' "$T/out"; then
				who=$u
				break
			fi
		done
	fi
	out_has '^reply hello_reply$' "$sock: no hello reply as any user"
	out_has "^server [a-z-]+ $version socket [a-z]+ protocol 1\$" \
	    "$sock: hello reply without server, version $version or socket"
	out_has '^serves [0-9]+ [a-z_]+$' "$sock: hello lists no request type"
	cp "$T/out" "$T/hello-$(basename "$sock")"
	note "$(basename "$sock") (as ${who:-$(id -un)}): $(sed -n 's/^server //p' "$T/out"), serves $(sed -n 's/^serves [0-9]* //p' "$T/out" | tr '\n' ' ')"

	as "$who" "$sock" future
	[ "$(wc -l <"$T/out")" -eq 2 ] || { show; fail "$sock: not two answers to a future body then a request"; }
	head -n 1 "$T/out" | grep -q '^error ERROR_UNEXPECTED: ' ||
	    { show; fail "$sock: a future body was not answered ERROR_UNEXPECTED"; }
	tail -n 1 "$T/out" | grep -Eq '^(reply |error )' ||
	    { show; fail "$sock: the connection did not answer after the future body"; }
	n=$((n + 1))
done
[ "$n" -ge 2 ] || fail "only $n sockets found under $SBX_STATE/sockets"

# What policyd's orchestrator socket says it serves, exactly.
h=$T/hello-policyd.sock
for want in '10 compile' '12 run' '50 audit_query' '52 audit_verify' \
    '80 key_request'; do
	grep -q "^serves $want\$" "$h" || { cat "$h"; fail "policyd.sock does not list $want"; }
done
! grep -q '^serves 60 ' "$h" || fail "the orchestrator socket lists entitlement_add"
grep -q '^server policyd ' "$h" || fail "policyd.sock is not policyd"
if [ -f "$T/hello-launchd.sock" ]; then
	grep -q '^serves 13 launch$' "$T/hello-launchd.sock" ||
	    fail "launchd.sock does not list launch"
fi
# sbxctl hello says the same.
run ctl hello "$SBX_STATE/sockets/policyd.sock"
expect_rc 0 "sbxctl hello"
out_has "^policyd $version socket orchestrator protocol 1\$" "sbxctl hello's first line"
out_has '^80 key_request$' "sbxctl hello lists key_request"
note "$n sockets answer hello and keep a connection after an unknown body"
