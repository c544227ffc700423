#!/bin/sh
# launchd-sbx split along the privilege line (launchd-sbx(8) SECURITY): in
# a running deployment the launcher runs as sbx-launch with no capability
# and no way back to root, the one root process sbx started is
# sbx-monitor, which maps none of the parsers (protobuf-c, YAML, SQLite,
# jansson), and the launcher's user, tried directly, cannot mount, signal
# the other daemons or the monitor, read the monitor's memory, read
# policyd's signing key or brokerd's store, or put anything in the run
# directory the monitor stages sandboxes in.  A run still works.
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

is_root || skip "launchd-sbx needs root: no privilege split to check"
pidfile=$SBX_STATE/launchd-sbx.pid
[ -s "$pidfile" ] || skip "launchd-sbx is not running"
command -v setpriv >/dev/null || skip "setpriv (util-linux) not installed"
command -v jq >/dev/null || skip "jq not installed"
lpid=$(cat "$pidfile")
[ -d "/proc/$lpid" ] || fail "launchd-sbx (pid $lpid) is not running"

field() { awk -v k="$2:" '$1 == k { $1 = ""; sub(/^ /, ""); print; exit }' "/proc/$1/status"; }
lu=$(id -u sbx-launch) || fail "no user sbx-launch"
lg=$(id -g sbx-launch)

# ---- the launcher --------------------------------------------------------
set -- $(field "$lpid" Uid)
[ "$1 $2 $3 $4" = "$lu $lu $lu $lu" ] ||
    fail "launchd-sbx's uids are $*, want sbx-launch ($lu) in all four"
set -- $(field "$lpid" Gid)
[ "$1 $2 $3 $4" = "$lg $lg $lg $lg" ] ||
    fail "launchd-sbx's gids are $*, want sbx-launch's ($lg) in all four"
groups=$(field "$lpid" Groups)
[ -z "$groups" ] || [ "$groups" = "$lg" ] ||
    fail "launchd-sbx keeps supplementary groups: $groups"
for c in CapPrm CapEff CapAmb; do
	v=$(field "$lpid" $c)
	[ "$v" = 0000000000000000 ] || fail "launchd-sbx holds capabilities ($c $v)"
done
note "launchd-sbx runs as sbx-launch ($lu:$lg), no groups, no capabilities"

# ---- the monitor: the only root process, and it parses nothing ----------
mpid=""
for p in $(pgrep -P "$lpid" 2>/dev/null); do
	[ "$(cat "/proc/$p/comm" 2>/dev/null)" = sbx-monitor ] && mpid=$p
done
[ -n "$mpid" ] || fail "no sbx-monitor child of launchd-sbx ($lpid)"
set -- $(field "$mpid" Uid)
[ "$2" = 0 ] || fail "sbx-monitor is not root (euid $2)"
for lib in libprotobuf-c libyaml libsqlite3 libjansson libevent libssl \
    libcrypto libsodium; do
	! grep -q "/$lib[.-]" "/proc/$mpid/maps" ||
	    fail "the root monitor maps $lib"
done
# Every other sbx daemon of this deployment runs as its own user.
for d in policyd egressd brokerd gated approvald; do
	f=$SBX_STATE/$d.pid
	[ -s "$f" ] || continue
	p=$(cat "$f")
	[ -d "/proc/$p" ] || continue
	set -- $(field "$p" Uid)
	[ "$2" != 0 ] || fail "$d (pid $p) runs as root"
done
note "the one root sbx process is sbx-monitor (pid $mpid), mapping no parser library"

# ---- what the launcher's user cannot do ---------------------------------
as_launch() { setpriv --reuid sbx-launch --regid sbx-launch --clear-groups "$@"; }
mkdir -p "$T/mnt"
run as_launch mount -t tmpfs none "$T/mnt"
[ "$rc" -ne 0 ] || { umount "$T/mnt"; fail "sbx-launch mounted a tmpfs"; }
run as_launch unshare -m true
# An unprivileged user namespace would be its own business; a mount
# namespace of the host's is not.
if [ "$rc" -eq 0 ]; then
	run as_launch unshare -m mount -t tmpfs none "$T/mnt"
	[ "$rc" -ne 0 ] || fail "sbx-launch mounted inside a mount namespace"
fi
note "sbx-launch cannot mount"

for d in egressd gated brokerd policyd; do
	f=$SBX_STATE/$d.pid
	[ -s "$f" ] || continue
	run as_launch kill -0 "$(cat "$f")"
	[ "$rc" -ne 0 ] || fail "sbx-launch can signal $d"
done
run as_launch kill -0 "$mpid"
[ "$rc" -ne 0 ] || fail "sbx-launch can signal the root monitor"
run as_launch cat "/proc/$mpid/environ"
[ "$rc" -ne 0 ] || fail "sbx-launch reads the monitor's environment"
run as_launch dd if="/proc/$mpid/mem" of=/dev/null bs=1 count=1 skip=4096
[ "$rc" -ne 0 ] || fail "sbx-launch reads the monitor's memory"
note "sbx-launch cannot signal egressd, gated, brokerd, policyd or the monitor, nor read the monitor"

key=$SBX_STATE/policyd/signing.key
[ -f "$key" ] || fail "no signing key at $key"
run as_launch cat "$key"
[ "$rc" -ne 0 ] || fail "sbx-launch read policyd's signing key"
if [ -d "$SBX_STATE/brokerd" ]; then
	for f in $(find "$SBX_STATE/brokerd" -type f); do
		run as_launch cat "$f"
		[ "$rc" -ne 0 ] || fail "sbx-launch read brokerd's $f"
	done
	run as_launch ls "$SBX_STATE/brokerd"
	[ "$rc" -ne 0 ] || fail "sbx-launch lists brokerd's state"
fi
note "sbx-launch cannot read policyd's signing key or brokerd's store"

rd=$SBX_STATE/launchd-run
[ "$(stat -c '%u %a' "$rd")" = "0 711" ] ||
    fail "the run directory $rd is $(stat -c '%U %a' "$rd"), want root 711"
run as_launch mkdir "$rd/x-planted"
[ "$rc" -ne 0 ] || { rmdir "$rd/x-planted"; fail "sbx-launch made a directory in the monitor's run directory"; }
run as_launch ls "$rd"
[ "$rc" -ne 0 ] || fail "sbx-launch lists the run directory"
note "sbx-launch cannot plant or list anything in the run directory"

# ---- and a run still works ----------------------------------------------
id=sc-privsep-$$
task_file "$T/task.yaml" "$id" supplier-2026-q3
run ctl run "$T/task.yaml"
expect_rc 0 "a run with the launcher unprivileged"
[ "$(jq -r .exit_code "$T/out")" = 0 ] || { show; fail "the run did not exit 0"; }
plain_stdout "$T/out" | grep -qx hello || { show; fail "the program's output is not on stdout"; }
note "a run end to end with the launcher as sbx-launch"
