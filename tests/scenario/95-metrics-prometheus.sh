#!/bin/sh
# The whole deployment's counters as one Prometheus exposition (issue 13
# item 9): `sbxctl metrics --prometheus` after the scenarios before it
# (runs, denials, releases) passes `promtool check metrics` with no
# complaint, every daemon sbx-up started answered (sbx_daemon_up 1), and
# each family is declared once.
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

command -v promtool >/dev/null ||
    fail "promtool is missing (make deps installs Debian's prometheus package)"

run ctl metrics --prometheus
expect_rc 0 "metrics --prometheus"
want=policyd
is_root && want="policyd launchd-sbx egressd brokerd gated"
for d in $want; do
	out_has "^sbx_daemon_up\\{daemon=\"$d\"\\} 1\$" "$d did not answer"
done
dups=$(grep -o '^# TYPE [^ ]*' "$T/out" | sort | uniq -d)
[ -z "$dups" ] || { show; fail "families declared twice: $dups"; }
cp "$T/out" "$T/metrics.txt"
run promtool check metrics <"$T/metrics.txt"
[ "$rc" -eq 0 ] && ! [ -s "$T/out" ] && ! [ -s "$T/err" ] ||
    { show; fail "promtool check metrics complains"; }
note "$(grep -c '^sbx_' "$T/metrics.txt") samples from $want pass promtool"
