#!/bin/sh
# Signing key rotation as policyd.8 describes it: the deployment is
# stopped, policyd's public key moved to etc/policyd-previous.pub (which
# sbx-up names in policyd's config and every verifier's), the signing key
# moved away, and the deployment started again: policyd makes a new key.
# `sbxctl keys` (a KeyRequest on the orchestrator socket) then returns the
# new key as current and the old one as previous, each with its key id
# (the first 8 bytes of the key, hex), and, with launchd-sbx, the worked
# example runs through every verifier.  Afterwards the previous key is
# dropped again (the deployment keeps the new key).
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

pub=$SBX_STATE/etc/policyd.pub
prev=$SBX_STATE/etc/policyd-previous.pub
sk=$(sed -n 's/^signing_key: *//p' "$SBX_STATE/etc/policyd.yaml")
[ -n "$sk" ] && [ -f "$sk" ] || fail "no signing key named in policyd.yaml"

old=$(sed -n 's/^ed25519 //p' "$pub")
oldid=$(printf '%s' "$old" | cut -c1-16)
run ctl keys
expect_rc 0 "sbxctl keys"
[ "$(cat "$T/out")" = "$oldid current ed25519 $old" ] ||
    { show; fail "keys before the rotation: want only $oldid current"; }
if command -v jq >/dev/null; then
	run ctl -j keys
	jq -e --arg k "$oldid" '.keys | length == 1 and .[0].key_id == $k and .[0].current' "$T/out" >/dev/null ||
	    { show; fail "sbxctl -j keys"; }
fi

restore() {
	daemon_down
	rm -f "$prev"
	daemon_up
}
trap restore EXIT

daemon_down
mv "$pub" "$prev"
mv "$sk" "$T/old-signing.key"
daemon_up
for f in policyd launchd-sbx egressd gated brokerd; do
	[ -f "$SBX_STATE/etc/$f.yaml" ] || continue
	grep -Eq "^(policy_public_key_previous|public_key_previous|previous_public_key): $prev\$" \
	    "$SBX_STATE/etc/$f.yaml" || fail "$f.yaml does not name the previous key"
done

new=$(sed -n 's/^ed25519 //p' "$pub")
newid=$(printf '%s' "$new" | cut -c1-16)
[ "$new" != "$old" ] || fail "policyd did not make a new key"
run ctl keys
expect_rc 0 "sbxctl keys after the rotation"
[ "$(sed -n 1p "$T/out")" = "$newid current ed25519 $new" ] ||
    { show; fail "the new key is not first and current"; }
[ "$(sed -n 2p "$T/out")" = "$oldid previous ed25519 $old" ] ||
    { show; fail "the old key is not second and previous"; }
[ "$(wc -l <"$T/out")" -eq 2 ] || { show; fail "more than two keys"; }
note "keys: $newid current, $oldid previous"

# Grants are signed by the new key now.
id=sc-rot-$$
task_file "$T/task.yaml" "$id" supplier-2026-q3
run ctl compile "$T/task.yaml"
expect_rc 0 "compile after the rotation"

if is_root && [ -S "$SBX_STATE/sockets/launchd.sock" ] &&
    command -v jq >/dev/null; then
	# The worked example: launchd-sbx, egressd, brokerd and gated each
	# verify the grant, with a previous key configured.
	sed "s/id: t-1,/id: $id-run,/" "$EX/task.yaml" >"$T/task.yaml"
	sed "s|api.fx-rates.internal:8417|api.fx-rates.internal:${SBX_FX_PORT:-8417}|" \
	    "$EX/main.py" >"$T/main.py"
	run ctl run "$T/task.yaml"
	expect_rc 0 "the example after the rotation"
	[ "$(jq -r .exit_code "$T/out")" = 0 ] || { show; fail "exit_code"; }
	plain_stdout "$T/out" | grep -q '^rates: ' ||
	    { show; fail "the example did not get its rates (egress, broker)"; }
	note "the example ran under the new key: $(plain_stdout "$T/out" | sed -n 2p)"
fi
