#!/bin/sh
# Issue 14 item 4, orchestrators scoped to tenants (root: two Unix users
# act as two orchestrators).  policyd runs on a copy of the deployment's
# policyd.yaml whose orchestrators: binds sbx-test-orch-acme to tenant
# acme and root to "*", and whose orchestrator socket also admits
# sbx-test-orch-none, which no entry names.  acme's orchestrator compiles
# for acme, is refused (tenant-not-allowed, naming the tenant) for
# globex, cannot touch a task id root bound to globex (no execution
# spent, no record added to that task, the other tenant not named), sees
# only its own tasks in an audit query for all records, and cannot file
# a capability request on globex's task; sbx-test-orch-none is refused
# everything.  Every refusal is audited with the peer's uid.
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

is_root || skip "needs root to act as other uids (setpriv, useradd)"
command -v setpriv >/dev/null || skip "setpriv (util-linux) not installed"
command -v useradd >/dev/null || skip "useradd not installed"
probe=$SBX_BIN/frameprobe
[ -x "$probe" ] || fail "$probe not built (make $SBX_BIN/frameprobe)"

ACME=sbx-test-orch-acme
NONE=sbx-test-orch-none
for u in $ACME $NONE; do
	id "$u" >/dev/null 2>&1 ||
	    useradd --system --no-create-home --shell /usr/sbin/nologin "$u"
done

# What the test users run, from a directory they can read (CI clones
# into a 0700 directory): sbxctl, a state directory holding only the
# orchestrator socket (so sbxctl asks policyd alone) and frameprobe.
chmod 0755 "$T"
O=$T/orch
mkdir -p "$O/state/sockets" "$O/state/etc"
cp "$SBX_BIN/sbxctl" "$O/sbxctl"
ln -sf "$SBX_STATE/sockets/policyd.sock" "$O/state/sockets/policyd.sock"
cp "$SBX_STATE/etc/policyd.pub" "$O/state/etc/policyd.pub"
cp "$probe" "$O/frameprobe"
printf 'print("hello")\n' >"$O/main.py"
chmod -R a+rX "$O"

# as USER CMD...: CMD as USER, no groups.
as() {
	_u=$1
	shift
	run setpriv --reuid "$_u" --regid "$(id -g "$_u")" --clear-groups "$@"
}
# octl USER ARGS...: sbxctl as USER on the orchestrator socket alone.
octl() {
	_u=$1
	shift
	as "$_u" "$O/sbxctl" -s "$O/state" "$@"
}
# task ID TENANT USER: a task file, in $O/ID.yaml.
task() {
	cat >"$O/$1.yaml" <<EOT
task: {id: $1, type: analytics, tenant: $2, user: $3}
datasets: [supplier-2026-q3]
code: main.py
outputs: [eur_totals.csv]
EOT
	chmod 0644 "$O/$1.yaml"
}
# allq USER: an audit query for all records, as USER: "task ID ACTION
# RULE ACTOR" a record.
allq() {
	as "$1" "$O/frameprobe" "$O/state/sockets/policyd.sock" audit-all
}

# globex/gina may read what acme/alice may.
run ctl entitlement add --tenant globex --user gina --dataset supplier-2026-q3
expect_rc 0 "entitlement add globex/gina"

restore() {
	ctl entitlement remove --tenant globex --user gina >/dev/null 2>&1 || true
	for u in $ACME $NONE; do userdel "$u" >/dev/null 2>&1 || true; done
	stop_daemon policyd
	daemon_up
}
trap restore EXIT

# The deployment's config, the test users added to the orchestrator
# socket's allowlist, and the bindings.
conf=$T/orch.yaml
awk -v a="$ACME" -v n="$NONE" '
/^  orchestrator:/ { inorch = 1 }
/^  admin:/ { inorch = 0 }
inorch && /^    allow:/ { print "    allow: {users: [root, " a ", " n "], groups: [sbx-orch]}"; next }
{ print }' "$SBX_STATE/etc/policyd.yaml" >"$conf"
cat >>"$conf" <<EOT
orchestrators:
  - {user: $ACME, tenants: [acme]}
  - {user: root, tenants: ["*"]}
EOT
grep -q "users: \[root, $ACME" "$conf" || { cat "$conf"; fail "the allowlist edit did not take"; }
restart_policyd "$conf"

# root ("*") binds a task to globex; acme's orchestrator one to acme.
G=sc-orch-g-$$
A=sc-orch-a-$$
task "$G" globex gina
run ctl compile "$O/$G.yaml"
expect_rc 0 "root's compile for globex"
task "$A" acme alice
octl $ACME compile "$O/$A.yaml"
expect_rc 0 "acme's orchestrator compiling for acme"
note "root compiled $G for globex, $ACME compiled $A for acme"

# Another tenant: refused, the tenant named, nothing bound.
X=sc-orch-x-$$
task "$X" globex gina
octl $ACME compile "$O/$X.yaml"
[ "$rc" -ne 0 ] || { show; fail "acme's orchestrator compiled for globex"; }
err_has 'tenant-not-allowed' "the refusal has no rule tenant-not-allowed"
err_has 'may not act for tenant "globex"' "the refusal does not name the tenant"
note "$ACME refused for tenant globex (tenant-not-allowed)"

# The same task id as globex's task, claimed for acme: refused before
# anything is counted, and without naming globex (not task-mismatch).
task "$G" acme alice
octl $ACME compile "$O/$G.yaml"
[ "$rc" -ne 0 ] || { show; fail "acme's orchestrator compiled globex's task id"; }
err_has 'tenant-not-allowed' "a task id of globex: not refused with tenant-not-allowed"
! grep -q 'globex' "$T/err" || { show; fail "the refusal names the other tenant"; }
octl $ACME run "$O/$G.yaml"
[ "$rc" -ne 0 ] || { show; fail "acme's orchestrator ran globex's task id"; }
err_has 'tenant-not-allowed' "a run of globex's task id: not refused with tenant-not-allowed"
run ctl audit "$G"
expect_rc 0 "audit $G (admin)"
n=$(grep -c ' policyd \+compile ' "$T/out" || true)
[ "$n" -eq 1 ] || { show; fail "globex's task has $n compile records, expected 1"; }
out_lacks ' deny ' "a refused orchestrator added a record to globex's task"
note "$ACME cannot spend $G's executions (one compile record, no deny)"

# Audit: globex's task refused by id; the query for all records holds
# acme's task and nothing of globex's.
octl $ACME audit "$G"
[ "$rc" -ne 0 ] || { show; fail "acme's orchestrator read globex's audit"; }
err_has 'tenant-not-allowed' "audit of globex's task: not tenant-not-allowed"
allq $ACME
expect_rc 0 "acme's audit query for all records"
out_has '^reply audit_records$' "acme's audit query for all records was not answered"
out_has "^task $A compile " "acme's task missing from its own audit query"
out_lacks "^task $G " "acme's orchestrator saw globex's task"
out_lacks "^task - " "acme's orchestrator saw records of no task"
allq root
expect_rc 0 "root's audit query for all records"
out_has "^task $G compile " "root (\"*\") does not see globex's task"
out_has "^task - deny tenant-not-allowed" "root does not see the refusals"
note "$ACME's audit: $A only; root's: everything"

# A capability request on globex's task.
octl $ACME request "$G" --dataset supplier-2026-q3 --why "mine now"
[ "$rc" -ne 0 ] || { show; fail "acme's orchestrator filed a request on globex's task"; }
err_has 'tenant-not-allowed' "request on globex's task: not tenant-not-allowed"
note "$ACME's capability request on $G refused"

# Allowed on the socket, in no entry: refused everything.
octl $NONE compile "$O/$A.yaml"
[ "$rc" -ne 0 ] || { show; fail "$NONE compiled with no orchestrators: entry"; }
err_has 'in no orchestrators: entry' "$NONE's refusal does not say why"
octl $NONE audit "$A"
[ "$rc" -ne 0 ] || { show; fail "$NONE read an audit with no orchestrators: entry"; }
note "$NONE (no entry) refused compile and audit"

# Each refusal audited with the peer's uid.
ua=$(id -u $ACME)
un=$(id -u $NONE)
run ctl audit verify
expect_rc 0 "audit verify"
allq root
n=$(grep -c '^task - deny tenant-not-allowed' "$T/out" || true)
[ "$n" -ge 7 ] || { show; fail "$n tenant-not-allowed records, expected 7 or more"; }
grep -q "^task - deny tenant-not-allowed uid:$ua\$" "$T/out" ||
    { show; fail "no refusal audited as uid:$ua"; }
grep -q "^task - deny tenant-not-allowed uid:$un\$" "$T/out" ||
    { show; fail "no refusal audited as uid:$un"; }
note "refusals audited as uid:$ua and uid:$un"
