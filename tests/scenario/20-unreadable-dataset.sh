#!/bin/sh
# A dataset the user may not read: exit 3 naming the dataset, a denial in
# the audit trail with rule dataset-not-readable, and no compile record.
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

id=sc-unreadable-$$
task_file "$T/task.yaml" "$id" payroll-2026
run ctl compile "$T/task.yaml"
expect_rc 3 "compile of a task with an unreadable dataset"
err_has 'dataset-not-readable' "stderr does not name the rule"
err_has 'payroll-2026' "stderr does not name the dataset"
[ ! -s "$T/out" ] || { show; fail "a refused compile printed a policy"; }
note "refused: $(cat "$T/err")"

# The example's refused task as well.
run ctl compile "$EX/task-denied.yaml"
expect_rc 3 "compile deploy/examples/task-denied.yaml"

run ctl audit "$id"
expect_rc 0 "audit $id"
grep -E 'deny +dataset-not-readable' "$T/out" >/dev/null ||
    { show; fail "no deny record with rule dataset-not-readable"; }
out_lacks ' compile ' "a compile record exists for a refused task"
note "audit shows the denial and no compile record"
