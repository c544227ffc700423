#!/bin/sh
# Bad frames get their Error and close only that connection; after each,
# an ordinary compile still works.
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

probe=$SBX_BIN/frameprobe
[ -x "$probe" ] || fail "$probe not built (make $SBX_BIN/frameprobe)"
id=sc-frames-$$
task_file "$T/task.yaml" "$id" supplier-2026-q3

check() {
	mode=$1 want=$2
	run "$probe" "$SBX_STATE/sockets/policyd.sock" "$mode"
	out_has "^error $want" "$mode frame: expected error $want"
	note "$mode: $(cat "$T/out")"
	run ctl compile "$T/task.yaml"
	expect_rc 0 "compile after a $mode frame"
}
check garbage ERROR_MALFORMED
check oversize ERROR_FRAME_TOO_LARGE
check truncated ERROR_TRUNCATED
check badversion ERROR_UNSUPPORTED_VERSION
# An envelope without a body is not a request this socket takes.
check empty-body 'ERROR_(UNEXPECTED|MALFORMED|INVALID)'

# The admin socket is held to the same rules.
run "$probe" "$SBX_STATE/sockets/policyd-admin.sock" garbage
out_has '^error ERROR_MALFORMED' "admin socket: garbage frame"
run ctl template list
expect_rc 0 "template list after a garbage frame"
