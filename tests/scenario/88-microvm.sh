#!/bin/sh
# Issue 16: the worked example in a microvm through the whole deployment
# (deploy/examples/task-microvm.yaml, template analytics-readonly-vm: the
# worked example's policy under isolation: microvm).  launchd-sbx stages
# it as for the other tiers, the monitor runs sbx-vmrt, which boots the
# guest under QEMU (TCG here) as the sandbox's user in an empty network
# namespace; the code reaches the FX API only through egressd (guestfwd to
# the execution's socket), which adds the credential the VM never sees;
# the POST to an external host is denied with its rule; the CSV comes back
# through the guest's output archive and gated; launchd-sbx's launch
# record names the tier, and every audit chain verifies.  One VM run.
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

is_root || skip "the microvm tier needs root (launchd-sbx, daemon users)"
[ -S "$SBX_STATE/sockets/launchd.sock" ] || skip "launchd-sbx is not running"
command -v jq >/dev/null || skip "jq not installed"
[ -x /usr/bin/qemu-system-x86_64 ] || skip "qemu-system-x86_64 missing (make deps)"
[ -f "$REPO/build/vm/vmlinuz" ] || skip "no microvm kernel in build/vm (make vm)"
grep -q '^  microvm: {path:' "$SBX_STATE/etc/launchd-sbx.yaml" ||
    fail "sbx-up did not configure runtimes.microvm although build/vm has the kernel"
grep -q 'tier microvm: ' "$SBX_STATE/log/launchd-sbx.log" ||
    { grep 'microvm' "$SBX_STATE/log/launchd-sbx.log"; fail "launchd-sbx did not make the microvm tier available"; }

# sbx-vmrt itself refuses what is not a sandbox's spec, before any VM:
# a root user, a root file system the monitor did not bind from the image
# cache, an id that is a path.
vmrt() {
	"$SBX_BIN/sbx-vmrt" --qemu=/usr/bin/qemu-system-x86_64 \
	    --kernel="$REPO/build/vm/vmlinuz" --initrd="$REPO/build/vm/initrd.img" \
	    --forwarder=/usr/bin/socat --accel=tcg --root "$T/vmrt-state" "$@"
}
b=$T/bundle
mkdir -p "$b/in" "$b/code" "$b/scratch" "$b/rootfs"
spec() {	# uid
	cat >"$b/config.json" <<EOT
{"process": {"user": {"uid": $1, "gid": $1}, "args": ["/run/sbx/init", "--", "/usr/bin/python3", "/code/main.py"]},
 "root": {"path": "$b/rootfs"}, "linux": {"cgroupsPath": "/sbx-vmrt-test/x"},
 "mounts": [{"destination": "/in", "source": "$b/in"}, {"destination": "/code", "source": "$b/code"},
            {"destination": "/scratch", "source": "$b/scratch"}]}
EOT
}
spec 0
vmrt create --bundle "$b" --pid-file "$b/pid" vmrt-test >"$T/vmrt.out" 2>&1 && fail "sbx-vmrt ran a spec whose user is root"
grep -q 'not a microvm tier spec' "$T/vmrt.out" || { cat "$T/vmrt.out"; fail "sbx-vmrt's refusal of a root user does not say why"; }
spec 65534
vmrt create --bundle "$b" --pid-file "$b/pid" vmrt-test >"$T/vmrt.out" 2>&1 && fail "sbx-vmrt ran a root it did not find bound from the image cache"
grep -q 'not an image.s rootfs bound by the monitor' "$T/vmrt.out" || { cat "$T/vmrt.out"; fail "sbx-vmrt's refusal of a stray root does not say why"; }
vmrt create --bundle "$b" --pid-file "$b/pid" ../x >"$T/vmrt.out" 2>&1 && fail "sbx-vmrt took a path as an id"
grep -q 'bad id' "$T/vmrt.out" || { cat "$T/vmrt.out"; fail "sbx-vmrt's refusal of a path as an id does not say why"; }
[ ! -e "$b/pid" ] && [ ! -d "$b/vm-vmrt-test" ] || fail "a refused create left a pid file or VM directory"
note "sbx-vmrt refuses a root user, a stray root file system and a path as an id, leaving nothing"

id=sc-vm-$$
sed -e "s/id: t-vm-1,/id: $id,/" "$EX/task-microvm.yaml" >"$T/task.yaml"
grep -q "id: $id," "$T/task.yaml" || fail "the microvm task file changed shape"
sed "s|api.fx-rates.internal:8417|api.fx-rates.internal:${SBX_FX_PORT:-8417}|" \
    "$EX/main.py" >"$T/main.py"
cp "$EX/steptable.py" "$T/" 2>/dev/null || true
fxlog=$SBX_STATE/log/fxapi.log
fxbefore=$(wc -l <"$fxlog")

t0=$(date +%s)
run ctl run "$T/task.yaml"
t1=$(date +%s)
expect_rc 0 "run of the worked example in a microvm"
cp "$T/out" "$T/run.json"
jq -e . "$T/run.json" >/dev/null || { show; fail "run did not print JSON"; }
plain_stdout "$T/run.json" >"$T/stdout"
[ "$(jq -r .exit_code "$T/run.json")" = 0 ] || { show; fail "exit_code is not 0"; }
note "the worked example ran in a microvm in $((t1 - t0)) s"

# The FX API, through egressd, with the credential the code never had.
grep -q '^rates: live from api.fx-rates.internal' "$T/stdout" ||
    { show; fail "the task did not get its rates from the FX API"; }
tail -n +"$((fxbefore + 1))" "$fxlog" >"$T/fxapi.log"
grep -q 'GET /v1/rates 200 credential=yes scheme=https$' "$T/fxapi.log" ||
    { cat "$T/fxapi.log"; fail "the FX API saw no authorised GET /v1/rates over HTTPS"; }
! grep -q 'credential=no' "$T/fxapi.log" ||
    { cat "$T/fxapi.log"; fail "a request reached the FX API without the credential"; }
secret=$(cat "$SBX_STATE/fxapi/token" 2>/dev/null || true)
if [ -n "$secret" ]; then
	! grep -qF "$secret" "$T/run.json" || fail "the credential is visible in the run's output"
fi
note "FX API reached through egressd, credential injected outside the VM"

# The host not allowed: denied at egress with its rule.
jq -e '[.denials[] | select(.rule == "host-not-allowed" and .boundary == "egress")] | length == 1' \
    "$T/run.json" >/dev/null || { show; fail "no host-not-allowed denial with boundary egress"; }
grep -Eq '^injected: POST https://upload.supplier-sync.example/ingest: denied' "$T/stdout" ||
    { show; fail "the code was not told its POST was denied"; }
! grep -q EXFILTRATED "$T/stdout" || { show; fail "an exfiltration attempt succeeded"; }
note "denials: $(jq -r '[.denials[] | "\(.rule)/\(.boundary)"] | join(", ")' "$T/run.json")"

# The outputs came back through the archive and gated.
jq -e '[.outputs[] | select(.name == "eur_totals.csv" and .type == "text/csv" and .bytes > 0)] | length == 1' \
    "$T/run.json" >/dev/null || { show; fail "eur_totals.csv not released"; }
jq -r '.outputs[] | select(.name == "eur_totals.csv") | .content' "$T/run.json" >"$T/csv.raw"
if ! grep -q '^month,eur' "$T/csv.raw"; then
	base64 -d "$T/csv.raw" >"$T/csv.dec" 2>/dev/null && mv "$T/csv.dec" "$T/csv.raw"
fi
grep -q '^2026-09,' "$T/csv.raw" || { cat "$T/csv.raw"; fail "eur_totals.csv content is not the monthly totals"; }
jq -e '[.outputs[].name] | index("stray.tar") == null' "$T/run.json" >/dev/null ||
    { show; fail "stray.tar was released"; }
note "released: $(jq -r '[.outputs[] | "\(.name) \(.type)"] | join(", ")' "$T/run.json")"

# The audit: launch and exit under the tier, chains verify.
xid=$(jq -r .execution_id "$T/run.json")
run ctl -j audit "$id"
expect_rc 0 "audit -j $id"
cp "$T/out" "$T/audit.json"
jq -e --arg x "$xid" '[.events[] | select(.execution_id == $x and .daemon == "launchd-sbx" and .action == "launch" and (.detail | test("microvm")))] | length == 1' \
    "$T/audit.json" >/dev/null || { cat "$T/audit.json"; fail "no launch record of $xid naming the microvm tier"; }
jq -e --arg x "$xid" '[.events[] | select(.execution_id == $x and .daemon == "launchd-sbx" and .action == "exit")] | length == 1' \
    "$T/audit.json" >/dev/null || { cat "$T/audit.json"; fail "no exit record of $xid"; }
# The demo's step table from this run: every step shown but the
# capability request (step 4), which this test does not file.
/usr/bin/python3 "$EX/steptable.py" "$T/run.json" "$T/audit.json" >"$T/table" 2>&1 && trc=0 || trc=$?
[ "$trc" = 1 ] && [ "$(grep -c 'NOT SHOWN' "$T/table")" = 1 ] &&
    grep -q 'NOT SHOWN: no pending capability request' "$T/table" ||
    { cat "$T/table"; fail "the step table of the VM run is not the demo's (status $trc)"; }
note "step table: steps 1, 2, 3 and 5 shown from the VM run"
run ctl audit verify
expect_rc 0 "audit verify"
for d in policyd launchd-sbx brokerd; do
	out_has "^$d: ok" "$d's chain is not reported ok"
done
out_lacks 'FAIL|broken|mismatch' "a chain does not verify"
note "audit: launch (tier microvm) and exit for $xid; chains verify"

# The wall clock, from outside the VM: a user whose plan allows 5 s (the
# guest boots in more under TCG).  The whole VM dies: no QEMU of this
# deployment's is left.
run ctl entitlement add --tenant acme --user vmwally --dataset supplier-2026-q3 \
    --limit wall_seconds=5
expect_rc 0 "entitlement for vmwally"
printf 'while True:\n    pass\n' >"$T/spin.py"
cat >"$T/spin.yaml" <<EOT
task: {id: $id-wall, type: analytics-vm, tenant: acme, user: vmwally}
datasets: [supplier-2026-q3]
code: spin.py
outputs: []
EOT
t0=$(date +%s)
run ctl run "$T/spin.yaml"
t1=$(date +%s)
expect_rc 0 "run of a busy loop in a microvm"
[ "$(jq -c .limits_hit "$T/out")" = '["wall"]' ] ||
    { show; fail "limits_hit is not [\"wall\"]"; }
[ $((t1 - t0)) -lt 40 ] || fail "the VM ran $((t1 - t0)) s under a 5 s wall"
sleep 1
left=0
for p in $(pgrep -x qemu-system-x86 || true); do
	case $(readlink "/proc/$p/cwd" 2>/dev/null) in
	"$SBX_STATE"/*) left=$((left + 1)) ;;
	esac
done
[ "$left" = 0 ] || fail "$left QEMU process(es) of this deployment outlived the wall clock"
note "VM killed at the wall: limits_hit [\"wall\"], $((t1 - t0)) s, no QEMU left"
