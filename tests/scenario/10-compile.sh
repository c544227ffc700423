#!/bin/sh
# The example task compiles: a 64-hex hash, only the entitled host in the
# policy, the same hash and a new execution id on a second compile, and the
# compile records (with that hash) in the task's audit trail.
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

run ctl template show analytics-readonly@7
expect_rc 0 "template show analytics-readonly@7"
cp "$T/out" "$T/template.yaml"

run ctl compile "$EX/task.yaml"
expect_rc 0 "compile deploy/examples/task.yaml"
cp "$T/out" "$T/first.yaml"
hash=$(sed -n 's/^hash: //p' "$T/out")
exec1=$(sed -n 's/^execution: //p' "$T/out")
echo "$hash" | grep -Eq '^[0-9a-f]{64}$' || fail "hash \"$hash\" is not 64 hex digits"
[ -n "$exec1" ] || fail "no execution line"
grep -Eq '^expires: [0-9]{4}-[0-9]{2}-[0-9]{2}T' "$T/out" || fail "no expires line"
note "compiled, hash $hash, execution $exec1"

# alice may call api.fx-rates.internal only; the template offers more.
hosts_in "$T/first.yaml" >"$T/hosts"
[ "$(cat "$T/hosts")" = "api.fx-rates.internal" ] ||
    { cat "$T/first.yaml"; fail "policy hosts are [$(tr '\n' ' ' <"$T/hosts")], expected only api.fx-rates.internal"; }
hosts_in "$T/template.yaml" >"$T/thosts"
grep -qx api.fx-rates.internal "$T/thosts" ||
    fail "template analytics-readonly@7 does not offer api.fx-rates.internal"
grep -q '^ *- *dataset: *"*supplier-2026-q3' "$T/first.yaml" ||
    grep -q 'supplier-2026-q3' "$T/first.yaml" || fail "dataset missing from the policy"
note "policy holds only the entitled host"

run ctl compile "$EX/task.yaml"
expect_rc 0 "second compile"
hash2=$(sed -n 's/^hash: //p' "$T/out")
exec2=$(sed -n 's/^execution: //p' "$T/out")
[ "$hash" = "$hash2" ] || fail "same task compiled to $hash then $hash2"
[ "$exec1" != "$exec2" ] || fail "both compiles got execution id $exec1"
note "same hash, executions $exec1 and $exec2"

run ctl audit t-1
expect_rc 0 "audit t-1"
for x in "$exec1" "$exec2"; do
	grep -E "compile.*$x.*$hash" "$T/out" >/dev/null ||
	    { show; fail "no compile record for $x with hash $hash"; }
done
note "audit t-1 shows both compile records with the hash"

# bob (deploy/examples/entitlements.yaml) may read payroll-2026 but call no
# host: the template's host rule and the credential bound to it are gone.
printf 'print("hi")\n' >"$T/main.py"
cat >"$T/bob.yaml" <<EOT
task: {id: sc-bob-$$, type: analytics, tenant: acme, user: bob}
datasets: [payroll-2026]
code: main.py
outputs: [eur_totals.csv]
EOT
run ctl compile "$T/bob.yaml"
expect_rc 0 "compile of bob's task"
[ -z "$(hosts_in "$T/out")" ] || { show; fail "bob's policy names a host: $(hosts_in "$T/out" | tr '\n' ' ')"; }
out_lacks 'fx-readonly' "bob's policy keeps the credential of a dropped host"
out_has 'payroll-2026' "bob's policy lacks his dataset"
out_has 'memory_mb: 512' "bob's memory is not clamped to his plan (512)"
note "bob's policy: no host, no credential, memory clamped to 512"
