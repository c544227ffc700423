#!/bin/sh
# template diff: v7 against v6 lists the widenings and exits 1; a template
# against itself (from policyd or from its file) exits 0; the other way
# round only narrows.
# shellcheck source=tests/scenario/lib
. "$(dirname "$0")/lib"

run ctl template list
expect_rc 0 "template list"
out_has '^analytics-readonly +7 ' "template list lacks analytics-readonly 7"
out_has '^analytics-readonly +6 ' "template list lacks analytics-readonly 6"

run ctl template diff analytics-readonly@6 analytics-readonly@7
expect_rc 1 "diff v6 v7"
[ "$(wc -l <"$T/out")" -ge 2 ] || { show; fail "diff v6 v7 lists no change"; }
tail -n 1 "$T/out" | grep -q 'widens' || { show; fail "last line does not say it widens"; }
note "v6 -> v7: $(tail -n 1 "$T/out")"

run ctl template diff analytics-readonly@7 analytics-readonly@7
expect_rc 0 "diff v7 v7"
tail -n 1 "$T/out" | grep -q 'no widening' || { show; fail "v7 v7"; }

# A file parsed locally against the loaded version of itself (the copy
# policyd loaded: sbx-up pins the image digest that `make image` built).
f=$(grep -l '^version: *7' "$SBX_STATE"/templates/*.yaml | head -n 1)
[ -n "$f" ] || fail "no version 7 template file in $SBX_STATE/templates"
run ctl template diff "$f" analytics-readonly@7
expect_rc 0 "diff file v7 against loaded v7"

# v6 is v7 with less: going back only narrows.
run ctl template diff analytics-readonly@7 analytics-readonly@6
expect_rc 0 "diff v7 v6"
out_lacks '\(widening\)' "diff v7 v6 marks a widening"
tail -n 1 "$T/out" | grep -q 'no widening' || { show; fail "v7 v6 last line"; }

run ctl template diff analytics-readonly@6 no-such-template@1
[ "$rc" -ne 0 ] || fail "diff against a missing template succeeded"
err_has 'no-such-template' "the missing template is not named"
note "diff exit statuses hold"
