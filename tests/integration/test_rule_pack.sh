#!/usr/bin/env bash
# The rule pack (deploy/rules/gpulse.rules.yml) in CI: promtool and
# `gpulse rules check` accept it; its unit tests (tests/rules/pack_test.yml:
# memory, hysteresis, XID severity, down, lost, stale) pass in promtool and
# in `gpulse rules test`; and a copy whose one memory threshold is raised
# fails them in both tools, which shows that the tests can fail and that
# a threshold is changed in one place. Skipped when promtool is missing.
set -euo pipefail

: "${GPULSE:?}" "${GPULSE_SOURCE_DIR:?}"
source "$(dirname "$0")/need.sh"
need promtool "Debian package prometheus"
PACK="$GPULSE_SOURCE_DIR/deploy/rules/gpulse.rules.yml"
TESTS="$GPULSE_SOURCE_DIR/tests/rules/pack_test.yml"
WORK=$(mktemp -d /tmp/gpulse-pack.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() {
	echo "FAIL: $*" >&2
	exit 1
}

promtool check rules "$PACK" >"$WORK/p.out" 2>&1 || { cat "$WORK/p.out" >&2; fail "promtool check rules"; }
grep -q "SUCCESS" "$WORK/p.out" || fail "promtool did not report success"
"$GPULSE" rules check "$PACK" >"$WORK/g.out" 2>&1 || { cat "$WORK/g.out" >&2; fail "gpulse rules check"; }
# Both count the same rules.
np=$(sed -n 's/.*SUCCESS: \([0-9]*\) rules found.*/\1/p' "$WORK/p.out")
ng=$(sed -n 's/.*SUCCESS: \([0-9]*\) rules found.*/\1/p' "$WORK/g.out")
[ -n "$np" ] && [ "$np" = "$ng" ] || fail "promtool found $np rules, gpulse $ng"

# Every alert carries a severity and the three annotations.
# (A text scan: the file is YAML, but python3-yaml is not a dependency.)
python3 - "$PACK" <<'PY' || fail "an alert lacks severity, summary, description or runbook"
import re, sys
text = open(sys.argv[1]).read()
blocks = re.split(r"\n      - (?=alert: |record: )", text)[1:]
alerts = [b for b in blocks if b.startswith("alert: ")]
assert len(alerts) >= 20, len(alerts)
names = set()
for b in alerts:
    name = b.split("\n", 1)[0][len("alert: "):].strip()
    names.add(name)
    assert re.search(r"\n          severity: (critical|warning|info)\n", b), name
    for k in ("summary", "description", "runbook"):
        assert re.search(r"\n          %s: \S" % k, b), (name, k)
# The names the default inhibition rule of the delivery path matches.
assert {"GPUDown", "GPULost", "GPUFallenOffBus"} <= names, names
PY

cd "$(dirname "$TESTS")"
promtool test rules "$(basename "$TESTS")" >"$WORK/pt.out" 2>&1 || { cat "$WORK/pt.out" >&2; fail "promtool test rules pack_test.yml"; }
"$GPULSE" rules test "$(basename "$TESTS")" >"$WORK/gt.out" 2>&1 || { cat "$WORK/gt.out" >&2; fail "gpulse rules test pack_test.yml"; }

# Raise the memory warning threshold (one line) in a copy: the memory
# tests must now fail in both tools, on the GPUMemoryHigh expectations.
mkdir -p "$WORK/deploy/rules" "$WORK/tests/rules"
python3 - "$PACK" "$WORK/deploy/rules/gpulse.rules.yml" <<'PY'
import sys
s = open(sys.argv[1]).read()
old = "- record: gpulse:threshold:memory_warning:ratio\n        expr: vector(0.85)"
assert s.count(old) == 1
open(sys.argv[2], "w").write(s.replace(old, old.replace("0.85", "0.90")))
PY
cp "$TESTS" "$WORK/tests/rules/"
cd "$WORK/tests/rules"
if promtool test rules pack_test.yml >"$WORK/pt2.out" 2>&1; then fail "promtool passed with the threshold raised"; fi
if "$GPULSE" rules test pack_test.yml >"$WORK/gt2.out" 2>&1; then fail "gpulse passed with the threshold raised"; fi
grep -q "alertname: GPUMemoryHigh" "$WORK/pt2.out" || { cat "$WORK/pt2.out" >&2; fail "promtool failed elsewhere"; }
grep -q "alertname: GPUMemoryHigh" "$WORK/gt2.out" || { cat "$WORK/gt2.out" >&2; fail "gpulse failed elsewhere"; }
echo "PASS: the pack checks in promtool and gpulse ($np rules); its unit tests pass in both, and fail in both with a threshold raised"
