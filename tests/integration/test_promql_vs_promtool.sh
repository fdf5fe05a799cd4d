#!/usr/bin/env bash
# The PromQL engine agrees with real Prometheus: the conformance driver
# evaluates every expression of tests/promql/conformance.spec with gpulse
# and writes the answers as exp_samples of a promtool rule unit-test file
# over the same input_series; `promtool test rules` (Prometheus's own
# engine) must accept it. promtool compares floats exactly, and it loads
# series in a random order, so sums over several series can differ from
# run to run in the last bit: a reported difference passes only when the
# labels are equal and every value is within a relative 1e-9 (the project's
# query_range tolerance). A deliberately wrong file must fail, so this
# test can fail.
set -euo pipefail

: "${GPULSE_BUILD_DIR:?}" "${GPULSE_SOURCE_DIR:?}"
DRIVER="$GPULSE_BUILD_DIR/tests/promql_driver"
SPEC="$GPULSE_SOURCE_DIR/tests/promql/conformance.spec"
source "$(dirname "$0")/need.sh"
need promtool "Debian package prometheus"
WORK=$(mktemp -d /tmp/gpulse-promql.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() {
	echo "FAIL: $*" >&2
	exit 1
}

"$DRIVER" --yaml "$SPEC" >"$WORK/ok.yml" 2>"$WORK/driver.log" || fail "driver: $(cat "$WORK/driver.log")"
cat "$WORK/driver.log"
grep -q ' 0 errors' "$WORK/driver.log" || fail "gpulse could not evaluate every expression"
nexpr=$(grep -c '^      - expr:' "$WORK/ok.yml")
[ "$nexpr" -ge 40 ] || fail "only $nexpr expressions"

# within_tolerance FILE: promtool's output in FILE reports only
# differences of at most 1e-9 relative, with identical labels.
within_tolerance() {
	awk '
	function items(s, arr,   n) {
		n = 0
		while (match(s, /\{[^}]*\} [^ ,]+/)) {
			arr[++n] = substr(s, RSTART, RLENGTH)
			s = substr(s, RSTART + RLENGTH)
		}
		return n
	}
	function close_enough(a, b,   x, y, d, m) {
		if (a == b) return 1
		x = a + 0; y = b + 0
		d = x - y; if (d < 0) d = -d
		m = x < 0 ? -x : x; if ((y < 0 ? -y : y) > m) m = (y < 0 ? -y : y)
		return d <= 1e-9 * m
	}
	/^Unit Testing:/ || /^ *FAILED:/ || /^ *$/ || /^ *expr: / { next }
	/^ *exp: / { ex = $0; sub(/^ *exp: /, "", ex); next }
	/^ *got: / {
		got = $0; sub(/^ *got: /, "", got)
		ne = items(ex, E); ng = items(got, G)
		if (ne != ng) { print "count differs: " ex " / " got; bad = 1; next }
		for (i = 1; i <= ne; i++) {
			le = E[i]; sub(/ [^ ]+$/, "", le); ve = E[i]; sub(/^.* /, "", ve)
			lg = G[i]; sub(/ [^ ]+$/, "", lg); vg = G[i]; sub(/^.* /, "", vg)
			if (le != lg || !close_enough(ve, vg)) { print "differs: " E[i] " / " G[i]; bad = 1 }
		}
		next
	}
	{ print "unexpected promtool output: " $0; bad = 1 }
	END { exit bad }
	' "$1"
}

cd "$WORK"
if promtool test rules ok.yml >ok.out 2>&1; then
	echo "promtool agrees exactly on all $nexpr expressions"
else
	cat ok.out
	within_tolerance ok.out || fail "promtool disagrees with gpulse beyond 1e-9"
	echo "promtool agrees on all $nexpr expressions (some sums differ in the last bit, within 1e-9)"
fi

# A wrong value (off by 1%) and a wrong label must both be caught.
awk 'done == 0 && /value: 100$/ { sub(/value: 100$/, "value: 101"); done = 1 } { print }' ok.yml >bad_value.yml
cmp -s ok.yml bad_value.yml && fail "could not make the wrong-value file"
if promtool test rules bad_value.yml >bad_value.out 2>&1; then
	fail "promtool accepted a wrong value"
fi
within_tolerance bad_value.out >/dev/null && fail "the tolerance check accepted a wrong value"

awk 'done == 0 && /instance=\\"b\\"/ && /labels:/ { sub(/instance=\\"b\\"/, "instance=\\\"z\\\""); done = 1 } { print }' ok.yml >bad_label.yml
cmp -s ok.yml bad_label.yml && fail "could not make the wrong-label file"
if promtool test rules bad_label.yml >bad_label.out 2>&1; then
	fail "promtool accepted a wrong label"
fi
within_tolerance bad_label.out >/dev/null && fail "the tolerance check accepted a wrong label"
echo "PASS: promtool rejects a wrong value and a wrong label"
