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

# A sibling prefix is a widening: v6 allows /v1/rates, and egressd's
# matcher does not let /v1/ratesx through it (issue 13 item 4: the diff
# once compared raw string prefixes and called it covered).
f6=$(grep -l '^version: *6' "$SBX_STATE"/templates/*.yaml | head -n 1)
[ -n "$f6" ] || fail "no version 6 template file in $SBX_STATE/templates"
sed 's|paths: \[/v1/rates\]|paths: [/v1/rates, /v1/ratesx]|' "$f6" > "$T/v6-sibling.yaml"
grep -q '/v1/ratesx' "$T/v6-sibling.yaml" || fail "could not add /v1/ratesx to $f6"
run ctl template diff analytics-readonly@6 "$T/v6-sibling.yaml"
expect_rc 1 "diff v6 against v6 with /v1/ratesx"
out_has 'paths: /v1/ratesx added \(widening\)' "the sibling prefix /v1/ratesx is not marked a widening"
sed 's|paths: \[/v1/rates\]|paths: [/v1/rates, /v1/rates/eur]|' "$f6" > "$T/v6-under.yaml"
run ctl template diff analytics-readonly@6 "$T/v6-under.yaml"
expect_rc 0 "diff v6 against v6 with /v1/rates/eur"
note "a sibling prefix widens, a path under the old prefix does not"

# v6 is v7 with less: going back only narrows.
run ctl template diff analytics-readonly@7 analytics-readonly@6
expect_rc 0 "diff v7 v6"
out_lacks '\(widening\)' "diff v7 v6 marks a widening"
tail -n 1 "$T/out" | grep -q 'no widening' || { show; fail "v7 v6 last line"; }

run ctl template diff analytics-readonly@6 no-such-template@1
[ "$rc" -ne 0 ] || fail "diff against a missing template succeeded"
err_has 'no-such-template' "the missing template is not named"
note "diff exit statuses hold"
