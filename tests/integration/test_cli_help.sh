# Every command's help prints and exits 0, and none says a feature gpulse
# has is missing: `gpulse help rules` once called alert_rule_test "not
# supported yet" after it had been implemented.
source "$(dirname "$0")/lib.sh"

for cmd in status top record diagnose report fleet bench rules query alerts kernels run trace; do
	"$GPULSE" help "$cmd" >"$WORK/$cmd.txt" 2>&1 || fail "gpulse help $cmd: exit $?"
	[ -s "$WORK/$cmd.txt" ] || fail "gpulse help $cmd printed nothing"
	if grep -Eqi 'not supported|not yet|unsupported' "$WORK/$cmd.txt"; then
		fail "gpulse help $cmd: $(grep -Ei 'not supported|not yet|unsupported' "$WORK/$cmd.txt")"
	fi
done
grep -q 'alert_rule_test' "$WORK/rules.txt" || fail "gpulse help rules does not name alert_rule_test"
# gpulse help top lists its keys, and top refuses to run without a terminal.
for k in 'q, F10' 'h, ?, F1' 's, F6' '/ ' 'k, F9' 'g, Tab' '+ / -'; do
	grep -qF -- "  $k" "$WORK/top.txt" || fail "gpulse help top does not list the key \"$k\""
done
rc=0
"$GPULSE" top </dev/null >"$WORK/top-notty.txt" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q 'needs a terminal' "$WORK/top-notty.txt" ||
	fail "gpulse top without a terminal: exit $rc, $(cat "$WORK/top-notty.txt")"
rc=0
"$GPULSE" top --delay 0.01 >"$WORK/top-delay.txt" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q -- '--delay "0.01"' "$WORK/top-delay.txt" ||
	fail "gpulse top --delay 0.01: exit $rc, $(cat "$WORK/top-delay.txt")"
# The rule tests it names do run: an alert_rule_test that passes.
mkdir -p "$WORK/r"
cat >"$WORK/r/rules.yml" <<'YML'
groups:
  - name: g
    rules:
      - alert: Hot
        expr: temp > 80
YML
cat >"$WORK/r/test.yml" <<'YML'
rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'temp{gpu="0"}'
        values: '90x5'
    alert_rule_test:
      - eval_time: 2m
        alertname: Hot
        exp_alerts:
          - exp_labels: {gpu: "0"}
YML
"$GPULSE" rules test "$WORK/r/test.yml" >"$WORK/rt.txt" 2>&1 || fail "alert_rule_test: $(cat "$WORK/rt.txt")"
echo PASS
