#!/bin/sh
# Outputs written under umask 077 (root: the whole deployment, gated as
# sbx-gate): the example's code writes its declared CSV and JSON 0600, as
# many programs do, and closes its working directory (/scratch) to 0700;
# both are released with their content, not dropped as unreadable; what was
# not declared stays the sandbox's own (an undeclared 0600 file is listed
# as undeclared, never read), and a declared name that is a symbolic link
# to a host file is dropped as a link while the host file keeps its owner
# and mode (launchd-sbx hands over only what lies beneath the scratch,
# following no link).
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

is_root || skip "outputs through gated need root (launchd-sbx, daemon users)"
[ -S "$SBX_STATE/sockets/launchd.sock" ] || skip "launchd-sbx is not running"
command -v jq >/dev/null || skip "jq not installed"
wired_gate || skip "launchd-sbx is not wired to gated (sbx-up left gate: out)"

# A host file only root may touch: the link's target.
victim=$T/victim
echo "host secret" >"$victim"
chmod 0600 "$victim"
before=$(stat -c '%u:%g:%a' "$victim")

id=sc-umask-$$
cat >"$T/main.py" <<EOP
import os
os.umask(0o077)
with open("/scratch/eur_totals.csv", "w") as f:
    f.write("month,eur\\n2026-07,1200.50\\n")
with open("/scratch/monthly.json", "w") as f:
    f.write('{"months": 3}\\n')
with open("/scratch/notes.csv", "w") as f:
    f.write("undeclared,1\\n")
os.symlink("$victim", "/scratch/link.csv")
os.chmod("/scratch", 0o700)
print("wrote", oct(os.stat("/scratch/eur_totals.csv").st_mode & 0o777))
EOP
cat >"$T/task.yaml" <<EOT
task: {id: $id, type: analytics, tenant: acme, user: alice}
datasets: [supplier-2026-q3]
code: main.py
outputs: [eur_totals.csv, monthly.json, link.csv]
EOT

run ctl run "$T/task.yaml"
expect_rc 0 "run of the umask 077 task"
cp "$T/out" "$T/run.json"
[ "$(jq -r .exit_code "$T/run.json")" = 0 ] || { show; fail "exit_code is not 0"; }
plain_stdout "$T/run.json" | grep -q '^wrote 0o600$' ||
    { show; fail "the code did not write its output 0600"; }

# Released, with their content.
for n in eur_totals.csv monthly.json; do
	jq -e --arg n "$n" '.outputs[] | select(.name == $n)' "$T/run.json" \
	    >/dev/null || { show; fail "$n (written 0600) was not released"; }
done
jq -e '.dropped[] | select(.reason == "unreadable")' "$T/run.json" \
    >/dev/null && { show; fail "an output was dropped as unreadable"; }
jq -r '.outputs[] | select(.name == "eur_totals.csv") | .content' "$T/run.json" >"$T/csv.raw"
# sbxctl prints bytes either as text or as base64: accept either.
if ! grep -q '^month,eur' "$T/csv.raw"; then
	base64 -d "$T/csv.raw" >"$T/csv.dec" 2>/dev/null && mv "$T/csv.dec" "$T/csv.raw"
fi
grep -q '^2026-07,1200.50$' "$T/csv.raw" ||
    { show; fail "the released eur_totals.csv lost its content"; }

# Nothing more: the undeclared file is listed, the link refused as one.
jq -e '.dropped[] | select(.name == "notes.csv" and .reason == "undeclared")' \
    "$T/run.json" >/dev/null || { show; fail "notes.csv is not dropped as undeclared"; }
jq -e '.dropped[] | select(.name == "link.csv" and .reason == "symlink")' \
    "$T/run.json" >/dev/null || { show; fail "link.csv is not dropped as a symlink"; }
[ "$(stat -c '%u:%g:%a' "$victim")" = "$before" ] ||
    fail "the link's host target changed owner or mode: $(stat -c '%u:%g:%a' "$victim")"
note "0600 outputs in a 0700 /scratch released; undeclared file and link untouched"
