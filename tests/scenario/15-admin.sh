#!/bin/sh
# The operator's side of sbxctl: entitlements added, listed, removed and
# round-tripped through import; bad files rejected whole with every error
# as file:line:col: key; metrics count compiles and denials.
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

run ctl entitlement add --tenant acme --user sc-carol --dataset d-one \
    --dataset d-two --host h.example --limit cpus=1.5 --limit memory_mb=300
expect_rc 0 "entitlement add"
run ctl entitlement list --tenant acme --user sc-carol
expect_rc 0 "entitlement list"
out_has 'user: sc-carol' "list lacks sc-carol"
out_has 'datasets: \[d-one, d-two\]' "list lacks the datasets"
out_has 'hosts: \[h.example\]' "list lacks the host"
out_has 'cpus: 1.5' "list lacks cpus 1.5"
out_has 'memory_mb: 300' "list lacks memory_mb 300"
cp "$T/out" "$T/carol.yaml"

run ctl entitlement remove --tenant acme --user sc-carol --dataset d-one
expect_rc 0 "entitlement remove of one dataset"
run ctl entitlement list --tenant acme --user sc-carol
out_has 'datasets: \[d-two\]' "d-one was not removed"

# What list prints, import reads back (and replaces the row with).
run ctl entitlement import "$T/carol.yaml"
expect_rc 0 "import of list output"
run ctl entitlement list --tenant acme --user sc-carol
out_has 'datasets: \[d-one, d-two\]' "import did not restore d-one"

run ctl entitlement remove --tenant acme --user sc-carol
expect_rc 0 "entitlement remove of the whole row"
run ctl entitlement list --tenant acme --user sc-carol
out_lacks 'sc-carol' "sc-carol still listed after removal"
note "add, list, remove, import round trip"

# A bad file: every error, with line, column and key; nothing imported.
cat >"$T/bad.yaml" <<'EOT'
entitlements:
  - tenant: acme
    user: sc-dave
    datasets: [fine]
    plan: {cpus: 1.2345, memory_mb: lots, gpus: 1}
  - tenant: "no spaces"
    user: sc-erin
  - user: sc-frank
EOT
run ctl entitlement import "$T/bad.yaml"
expect_rc 1 "import of a bad file"
for e in '5:[0-9]+: entitlements\[0\]\.plan\.cpus' \
    '5:[0-9]+: entitlements\[0\]\.plan\.memory_mb' \
    '5:[0-9]+: entitlements\[0\]\.plan\.gpus' \
    '6:[0-9]+: entitlements\[1\]\.tenant' \
    '8:[0-9]+: entitlements\[2\]\.tenant'; do
	err_has "bad.yaml:$e" "no error matching $e"
done
run ctl entitlement list --tenant acme --user sc-dave
out_lacks 'sc-dave' "a rejected file was partly imported"
note "bad entitlements file: all 5 errors, nothing imported"

cat >"$T/badtask.yaml" <<'EOT'
task: {id: t 1, type: analytics, tenant: acme}
datasets: supplier-2026-q3
code: missing.py
colour: blue
EOT
run ctl compile "$T/badtask.yaml"
expect_rc 1 "compile of a bad task file"
for e in '1:[0-9]+: task\.id' '1:[0-9]+: task\.user' '2:[0-9]+: datasets' \
    '3:[0-9]+: code' '4:[0-9]+: colour'; do
	err_has "badtask.yaml:$e" "no error matching $e"
done
note "bad task file: all 5 errors"

run ctl entitlement add --tenant acme --user x --limit gpus=1
expect_rc 2 "unknown --limit key"
run ctl frobnicate
expect_rc 2 "unknown command"

run ctl metrics
expect_rc 0 "metrics"
out_has '^sbx_policyd_compiles_total [0-9]+' "no compiles counter"
out_has '^sbx_policyd_executions_total [0-9]+' "no executions counter"
note "metrics served"
