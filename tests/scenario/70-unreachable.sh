#!/bin/sh
# With policyd down, sbxctl says which socket it could not reach and exits
# 5: an orchestrator reads that as "deny", never as "allow".
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

daemon_down
run ctl compile "$EX/task.yaml"
st=$rc
daemon_up
rc=$st
expect_rc 5 "compile with policyd down"
err_has 'policyd\.sock' "stderr does not name the socket"
note "unreachable: $(head -n 1 "$T/err")"
run ctl audit verify
expect_rc 0 "audit verify after restart"
run ctl compile "$EX/task-denied.yaml"
expect_rc 3 "policyd serves again after restart"
