#!/bin/sh
# executions_per_task holds: the template's cap (15 for
# analytics-readonly@7) compiles succeed, the next is refused with rule
# executions-exhausted, and a new task id starts afresh.
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

run ctl template show analytics-readonly@7
expect_rc 0 "template show"
cap=$(sed -n 's/^executions_per_task: *//p' "$T/out")
case $cap in ''|*[!0-9]*) fail "no executions_per_task in the template" ;; esac
[ "$cap" -le 200 ] || skip "executions_per_task is $cap: too many to loop"

id=sc-cap-$$
task_file "$T/task.yaml" "$id" supplier-2026-q3
i=1
while [ $i -le "$cap" ]; do
	run ctl compile "$T/task.yaml"
	expect_rc 0 "compile $i of $cap"
	i=$((i + 1))
done
run ctl compile "$T/task.yaml"
expect_rc 3 "compile $((cap + 1)) of a task capped at $cap"
err_has 'executions-exhausted' "refusal does not name executions-exhausted"
note "compile $((cap + 1)) refused: $(cat "$T/err")"

run ctl audit "$id"
[ "$(grep -c ' compile ' "$T/out")" -eq "$cap" ] ||
    { show; fail "expected $cap compile records"; }
grep -E 'deny +executions-exhausted' "$T/out" >/dev/null ||
    { show; fail "the refusal is not audited"; }

task_file "$T/task2.yaml" "$id-b" supplier-2026-q3
run ctl compile "$T/task2.yaml"
expect_rc 0 "a new task after another was exhausted"
note "cap holds at $cap, audited, other tasks unaffected"
