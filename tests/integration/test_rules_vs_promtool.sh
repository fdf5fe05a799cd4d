#!/usr/bin/env bash
# `gpulse rules test` agrees with `promtool test rules` (DESIGN.md,
# "Contracts"): on every unit-test file of tests/rules/ both pass or both
# fail, and where both fail on expressions they report the same
# expressions, expectations and results. The corpus must hold at least 5
# passing and 5 failing files, so that this test can fail. At least 12 of the files hold alert_rule_test cases (firing,
# pending, keep_firing_for, templates, ALERTS series), some passing and
# some failing; for those both tools must print the same alert failures
# (alertname, time, expected and got alerts with labels and expanded
# annotations). `gpulse rules check` agrees with `promtool check rules`
# on the rule files there, bad templates included, naming FILE:LINE:COL.
set -euo pipefail

: "${GPULSE:?}" "${GPULSE_SOURCE_DIR:?}"
CORPUS="$GPULSE_SOURCE_DIR/tests/rules"
source "$(dirname "$0")/need.sh"
need promtool "Debian package prometheus"
WORK=$(mktemp -d /tmp/gpulse-rules.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# The failure details both tools print, without blank lines or the
# wording of errors that differ by design (PromQL parse-error text).
details() {
	grep -E '^ *(expr|exp|got): |^ *(name|alertname): |^ *(exp|got):\[|^ *[0-9]+:$|^ *(Labels|Annotations):|^ *\],? *$' "$1" |
		grep -v ', err: ' || true
}

cd "$CORPUS"
npass=0
nfail=0
apass=0
afail=0
for f in *.test.yml alert_unsupported.yml; do
	p=pass
	g=pass
	promtool test rules "$f" >"$WORK/p.out" 2>&1 || p=fail
	"$GPULSE" rules test "$f" >"$WORK/g.out" 2>&1 || g=fail
	if [ "$p" != "$g" ]; then
		echo "--- promtool:" >&2; cat "$WORK/p.out" >&2
		echo "--- gpulse:" >&2; cat "$WORK/g.out" >&2
		fail "$f: promtool says $p, gpulse says $g"
	fi
	if [ "$p" = fail ] && ! diff <(details "$WORK/p.out") <(details "$WORK/g.out") >"$WORK/d.out"; then
		cat "$WORK/d.out" >&2
		fail "$f: both fail, but report different failures"
	fi
	if [ "$p" = pass ]; then npass=$((npass + 1)); else nfail=$((nfail + 1)); fi
	if grep -q '^ *alert_rule_test:' "$f"; then
		if [ "$p" = pass ]; then apass=$((apass + 1)); else afail=$((afail + 1)); fi
	fi
done
[ $((apass + afail)) -ge 12 ] || fail "only $((apass + afail)) test files with alert_rule_test"
[ "$apass" -ge 4 ] && [ "$afail" -ge 4 ] || fail "alert tests: $apass pass, $afail fail (want 4 of each)"
echo "alert tests: promtool and gpulse agree on all $((apass + afail)) files ($apass pass, $afail fail)"
[ "$npass" -ge 5 ] || fail "only $npass passing test files in the corpus"
[ "$nfail" -ge 5 ] || fail "only $nfail failing test files in the corpus"
[ $((npass + nfail)) -ge 15 ] || fail "only $((npass + nfail)) test files in the corpus"
echo "rules test: promtool and gpulse agree on all $((npass + nfail)) files ($npass pass, $nfail fail)"

nchk=0
nbad=0
for f in *.rules.yml; do
	p=pass
	g=pass
	promtool check rules "$f" >/dev/null 2>&1 || p=fail
	"$GPULSE" rules check "$f" >"$WORK/g.out" 2>&1 || g=fail
	[ "$p" = "$g" ] || fail "check $f: promtool says $p, gpulse says $g: $(cat "$WORK/g.out")"
	if [ "$g" = fail ]; then
		nbad=$((nbad + 1))
		grep -qE "^$f:[0-9]+:[0-9]+: " "$WORK/g.out" || fail "check $f: no FILE:LINE:COL in: $(cat "$WORK/g.out")"
	fi
	nchk=$((nchk + 1))
done
[ "$nbad" -ge 3 ] && [ $((nchk - nbad)) -ge 3 ] || fail "check corpus: $nbad invalid of $nchk"
"$GPULSE" rules check gpu.rules.yml | grep -q "SUCCESS: 4 rules found" || fail "rules check count"
echo "rules check: promtool and gpulse agree on all $nchk rule files ($nbad invalid)"

# A bad template names its place and Go's reason, as promtool's does.
"$GPULSE" rules check bad_template.rules.yml >"$WORK/t.out" 2>&1 && fail "bad templates passed"
grep -q '^bad_template.rules.yml:10:20: group "templates", rule 1, "Unclosed": annotation "summary": template: __alert_Unclosed:1: unclosed action$' "$WORK/t.out" ||
	fail "bad template message: $(cat "$WORK/t.out")"
grep -q 'function "nosuchfunc" not defined' "$WORK/t.out" || fail "unknown template function not named"
# Both tools give the same reason for every bad template (gpulse adds the
# place after the file name).
for f in bad_template*.rules.yml; do
	promtool check rules "$f" 2>&1 | sed -nE "s/^$f: (group .*template: .*)/\1/p" >"$WORK/pr.out" || true
	"$GPULSE" rules check "$f" 2>&1 | sed -nE "s/^$f:[0-9]+:[0-9]+: (group .*template: .*)/\1/p" >"$WORK/gr.out" || true
	[ -s "$WORK/pr.out" ] || fail "$f: promtool reported no template error"
	diff "$WORK/pr.out" "$WORK/gr.out" >"$WORK/d.out" || { cat "$WORK/d.out" >&2; fail "$f: template errors differ"; }
done

# Unreadable and invalid test files fail, naming the place.
if "$GPULSE" rules test "$WORK/none.yml" >"$WORK/n.out" 2>&1; then fail "missing file passed"; fi
printf 'tests:\n  - interval: 1m\n    bogus: 1\n' >"$WORK/bad.yml"
if "$GPULSE" rules test "$WORK/bad.yml" >"$WORK/b.out" 2>&1; then fail "invalid file passed"; fi
grep -q "bad.yml:3:5: field bogus not found" "$WORK/b.out" || fail "no FILE:LINE:COL: $(cat "$WORK/b.out")"
echo "ok"
